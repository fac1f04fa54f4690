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
        #expect(
            text.hasPrefix(
                "name,channel_id,policy,environment,created_at,bundle_id\n\"game, final\",YQ==,none,development,"
            )
        )
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

    /// An inventory names its app, environment and policy per row: `mismatch` names both sides of the first row
    /// that differs from a job's, and an inventory written before the `bundle_id` column matches any app.
    @Test func anInventoryIsItsAppsEnvironmentsAndPolicys() throws {
        let folder = try scratchFolder("inventory-identity")
        let entry = ChannelInventory.Entry(
            name: "a",
            channelID: "YQ==",
            policy: .mostRecent,
            environment: .development,
            createdAt: "t",
            bundleID: "com.example.app"
        )
        try ChannelInventory(entries: [entry]).write(to: folder + "/inv.csv")
        let read = try ChannelInventory.read(folder + "/inv.csv")
        #expect(read.entries == [entry])
        #expect(read.mismatch(bundleID: "com.example.app", environment: .development, policy: .mostRecent) == nil)
        #expect(read.mismatch(bundleID: "com.example.app", environment: .development) == nil)
        let environment = read.mismatch(bundleID: "com.example.app", environment: .production)
        #expect(environment?.contains("in development") == true && environment?.contains("in production") == true)
        let policy = read.mismatch(
            bundleID: "com.example.app",
            environment: .development,
            policy: MessageStoragePolicy.none
        )
        #expect(policy?.contains("with policy most-recent") == true && policy?.contains("with policy none") == true)
        let app = read.mismatch(bundleID: "com.example.other", environment: .development)
        #expect(app?.contains("com.example.app's") == true && app?.contains("com.example.other") == true)

        try Data("name,channel_id,policy,environment,created_at\na,YQ==,none,development,t\n".utf8)
            .write(to: URL(fileURLWithPath: folder + "/old.csv"))
        let old = try ChannelInventory.read(folder + "/old.csv")
        #expect(old.entries.first?.bundleID == nil)
        #expect(old.mismatch(bundleID: "com.example.any", environment: .development) == nil)
    }

    /// Apple's bundle-id characters only: nothing that a URL's path would read as `?`, `#`, `%` or `/`.
    @Test(arguments: ["com.example.app", "com.Example-2.app"]) func aBundleIDIsAccepted(id: String) {
        #expect(ChannelManagement.problem(bundleID: id) == nil)
    }

    @Test(arguments: ["", "com.example?x=1", "com.example#top", "com.ex%41mple", "com/example", "com.exämple", "a..b"])
    func aBundleIDWithOtherCharactersIsRefused(id: String) {
        #expect(ChannelManagement.problem(bundleID: id) != nil)
    }
}
