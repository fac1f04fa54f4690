import APNSWire
import Foundation
import SalvoBinary
import SalvoRows
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

@Suite(.tags(.network), .runs(.network)) struct TokenPrunerTests {
    /// The feedback service's list, read over TLS and merged into a suppression file, prunes a token file: the
    /// listed devices that registered again after their feedback timestamp stay, the others go.
    @Test func pruneKeepsReregisteredTokensAndDropsTheOthers() async throws {
        let gone: UInt32 = 1_700_000_000
        var generator = TokenGenerator(seed: 31)
        let tokens = (0..<300).map { _ in generator.next() }
        var plan = FaultPlan()
        plan.uninstalled = [
            FaultPlan.Uninstalled(
                topic: BulkSendHarness.topic,
                tokens: tokens[..<100].map(\.hexString),
                timestamp: gone
            )
        ]
        let harness = try await BulkSendHarness.start(tokens: 1, plan: plan)
        let read = try await FeedbackClient.read(
            FeedbackClient.Configuration(
                gateway: GatewayAddress(host: "127.0.0.1", port: harness.simulator.feedbackPort),
                credentials: harness.credentials,
                timeout: .seconds(20)
            )
        )
        try await harness.stop()
        #expect(read.entries.count == 100)

        let folder = TestScratch.root.appendingPathComponent("salvo-prune-\(UUID().uuidString)")
            .path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        var list = SuppressionList()
        for entry in read.entries {
            list.add(.init(token: entry.token, timestamp: Int64(entry.timestamp), reason: "Feedback"))
        }
        try list.merge(into: folder + "/suppress.csv")

        // Rows 0–49: listed, registered again later (ISO 8601); 50–99: listed, registered before (UNIX
        // seconds) or at the very second; 100–299: not listed, some with no registration time.
        var csv = "user,token,registered_at\n"
        for (index, token) in tokens.enumerated() {
            let registered: String
            switch index {
            case 0..<50: registered = UnixTime.iso8601(Int64(gone) + 10)
            case 50..<98: registered = String(Int64(gone) - 10)
            case 98..<100: registered = String(gone)
            case 100..<200: registered = ""
            default: registered = "1600000000"
            }
            csv += "\"u,\(index)\",\(token.hexString),\(registered)\n"
        }
        try Data(csv.utf8).write(to: URL(fileURLWithPath: folder + "/tokens.csv"))

        let summary = try TokenPruner.prune(
            TokenPruner.Configuration(
                input: folder + "/tokens.csv",
                registeredAt: .name("registered_at"),
                kept: folder + "/kept.csv",
                dropped: folder + "/dropped.csv"
            ),
            suppression: try SuppressionList.load(path: folder + "/suppress.csv")
        )
        #expect(summary.rows == 300 && summary.kept == 250 && summary.dropped == 50)
        #expect(summary.reregistered == 50 && summary.unreadable == 0)
        let kept = try String(contentsOfFile: folder + "/kept.csv", encoding: .utf8).split(separator: "\n")
        #expect(kept.first == "user,token,registered_at")
        #expect(kept.count == 251)
        #expect(kept[1] == "\"u,0\",\(tokens[0].hexString),\(UnixTime.iso8601(Int64(gone) + 10))")
        let keptTokens = Set(kept.dropFirst().map { $0.split(separator: ",")[2] })
        #expect(keptTokens == Set((tokens[..<50] + tokens[100...]).map { Substring($0.hexString) }))
        let dropped = try String(contentsOfFile: folder + "/dropped.csv", encoding: .utf8).split(separator: "\n")
        #expect(dropped.first == "user,token,registered_at,suppressed_since,reason")
        #expect(dropped.count == 51)
        #expect(dropped[1] == "\"u,50\",\(tokens[50].hexString),\(Int64(gone) - 10),2023-11-14T22:13:20Z,Feedback")

        // Without registration times every listed token goes.
        let strict = try TokenPruner.prune(
            TokenPruner.Configuration(input: folder + "/tokens.csv", kept: folder + "/kept.csv"),
            suppression: list
        )
        #expect(strict.dropped == 100 && strict.kept == 200)
    }

    @Test func aRegistrationTimeThatIsNotATimeIsNamed() throws {
        let folder = TestScratch.root.appendingPathComponent("salvo-prune-\(UUID().uuidString)")
            .path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        var generator = TokenGenerator(seed: 32)
        let token = generator.next()
        var list = SuppressionList()
        list.add(.init(token: token, timestamp: 10, reason: "Feedback"))
        try Data("token,seen\n\(token.hexString),last tuesday\n".utf8)
            .write(to: URL(fileURLWithPath: folder + "/tokens.csv"))
        let error = #expect(throws: JobError.self) {
            try TokenPruner.prune(
                TokenPruner.Configuration(
                    input: folder + "/tokens.csv",
                    registeredAt: .name("seen"),
                    kept: folder + "/kept.csv"
                ),
                suppression: list
            )
        }
        #expect(error?.code == .input)
        #expect(error?.message.contains("line 2") == true)
        #expect(error?.message.contains("\"last tuesday\"") == true)
        #expect(!FileManager.default.fileExists(atPath: folder + "/kept.csv"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder) == ["tokens.csv"])
    }
}
