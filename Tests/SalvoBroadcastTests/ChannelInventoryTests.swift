import Foundation
import SalvoBroadcast
import SalvoRows
import SalvoTestTraits
import Testing

/// The inventory CSV: written whole, read back, every bad row named with its line.
@Suite(.tags(.pure), .runs(.pure)) struct ChannelInventoryTests {
    @Test func anInventoryIsWrittenAndReadBack() throws {
        let folder = try scratchFolder("inventory")
        let path = folder + "/inventory.csv"
        let inventory = ChannelInventory(entries: [
            .init(
                name: "game, final",
                channelID: "YQ==",
                policy: .none,
                environment: .development,
                createdAt: "2026-11-26T16:00:00Z"
            ),
            .init(
                name: "flight \"7\"",
                channelID: "Yg==",
                policy: .mostRecent,
                environment: .production,
                createdAt: "x"
            ),
        ])
        try inventory.write(to: path)
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(text.hasPrefix("name,channel_id,policy,environment,created_at\n\"game, final\",YQ==,none,development,"))
        #expect(try ChannelInventory.read(path) == inventory)
    }

    @Test func everyBadRowIsNamedWithItsLine() throws {
        let folder = try scratchFolder("inventory-bad")
        let path = folder + "/bad.csv"
        try Data(
            """
            name,channel_id,policy,environment,created_at
            a,YQ==,none,development,t
            b,not base64!,none,development,t
            a,Yg==,sometimes,staging,t
            c,YQ==,most-recent,production,t

            """.utf8
        ).write(to: URL(fileURLWithPath: path))
        let (inventory, problems) = try ChannelInventory.check(path)
        #expect(inventory.entries.map(\.name) == ["a"])
        let text = problems.map { "\($0.line ?? 0): \($0.message)" }
        #expect(text.contains { $0.hasPrefix("3: channel_id 'not base64!'") })
        #expect(text.contains("4: the name a is also on line 2"))
        #expect(text.contains("4: policy 'sometimes' is not none or most-recent"))
        #expect(text.contains("4: environment 'staging' is not development or production"))
        #expect(text.contains("5: channel_id YQ== is also on line 2"))
        #expect(throws: InputError.self) { try ChannelInventory.read(path) }

        let missing = folder + "/missing.csv"
        try Data("name,channel\na,YQ==\n".utf8).write(to: URL(fileURLWithPath: missing))
        let (_, columns) = try ChannelInventory.check(missing)
        #expect(columns.first?.line == nil)
        #expect(columns.first?.message.hasPrefix("no channel_id column") == true)
    }
}
