import APNSWire
import Foundation
import SalvoBinary
import SalvoRows
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

@Suite(.tags(.network), .runs(.network)) struct FeedbackClientTests {
    private func configuration(_ harness: BulkSendHarness, port: Int? = nil) -> FeedbackClient.Configuration {
        FeedbackClient.Configuration(
            gateway: GatewayAddress(host: "127.0.0.1", port: port ?? harness.simulator.feedbackPort),
            credentials: harness.credentials,
            timeout: .seconds(20)
        )
    }

    @Test(arguments: [BinaryTransport.socket, nil])
    func readsEveryTupleTheServiceServesThenNothing(transport: BinaryTransport?) async throws {
        var generator = TokenGenerator(seed: 11)
        let gone = (0..<5000).map { _ in generator.next() }
        var plan = FaultPlan()
        plan.uninstalled = [
            FaultPlan.Uninstalled(
                topic: BulkSendHarness.topic,
                tokens: gone[..<3000].map(\.hexString),
                timestamp: 1_700_000_000
            ),
            FaultPlan.Uninstalled(topic: BulkSendHarness.topic, tokens: gone[3000...].map(\.hexString), timestamp: 7),
        ]
        let harness = try await BulkSendHarness.start(tokens: 1, plan: plan)
        var configuration = self.configuration(harness)
        configuration.transport = transport
        let first = try await FeedbackClient.read(configuration)
        #expect(first.problems.isEmpty)
        #expect(first.entries.count == 5000)
        #expect(Set(first.entries.map(\.token)) == Set(gone))
        let stamps = Dictionary(first.entries.map { ($0.token, $0.timestamp) }, uniquingKeysWith: { $1 })
        #expect(stamps[gone[0]] == 1_700_000_000)
        #expect(stamps[gone[4999]] == 7)
        // The list is cleared once read.
        let second = try await FeedbackClient.read(configuration)
        #expect(second.entries.isEmpty && second.problems.isEmpty)
        try await harness.stop()
    }

    @Test func aRefusedCertificateIsACredentialsError() async throws {
        let harness = try await BulkSendHarness.start(tokens: 1)
        let folder = TestScratch.root.appendingPathComponent("salvo-fb-\(UUID().uuidString)")
        let foreign = try CertificateFactory().write(to: folder.path, topic: BulkSendHarness.topic)
        var configuration = self.configuration(harness)
        configuration.credentials = GatewayCredentials(
            identity: .pem(certificateChainFile: foreign.client, privateKeyFile: foreign.clientKey),
            trustedCAFile: harness.credentials.trustedCAFile
        )
        let error = await #expect(throws: JobError.self) { try await FeedbackClient.read(configuration) }
        #expect(error?.code == .credentials)
        try await harness.stop()
    }

    @Test func aClosedPortIsUnreachable() async throws {
        let harness = try await BulkSendHarness.start(tokens: 1)
        try await harness.stop()
        let closed = try ClosedPort()
        defer { closed.close() }
        let port = closed.port
        let error = await #expect(throws: JobError.self) {
            try await FeedbackClient.read(self.configuration(harness, port: port))
        }
        #expect(error?.code == .unreachable)
        #expect(error?.message.contains("127.0.0.1:\(port)") == true)
    }
}

@Suite(.tags(.network), .runs(.network)) struct SuppressionListTests {
    private func folder() throws -> String {
        let path = TestScratch.root.appendingPathComponent("salvo-sup-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    @Test func timesReadAsUNIXSecondsOrISO8601() {
        #expect(UnixTime.parse("1700000000") == 1_700_000_000)
        #expect(UnixTime.parse(" 0 ") == 0)
        #expect(UnixTime.parse("2023-11-14T22:13:20Z") == 1_700_000_000)
        #expect(UnixTime.parse("2023-11-14T23:13:20+01:00") == 1_700_000_000)
        #expect(UnixTime.parse("2023-11-14T22:13:20.250Z") == 1_700_000_000)
        #expect(UnixTime.parse("2023-11-14 22:13:20") == 1_700_000_000)
        #expect(UnixTime.parse("2023-11-14") == 1_699_920_000)
        #expect(UnixTime.parse("1969-12-31T23:59:59Z") == -1)
        for bad in ["", "yesterday", "2023-13-01", "2023-11-14T25:00:00Z", "2023-11-14T22:13:20Q", "12ab"] {
            #expect(UnixTime.parse(bad) == nil, "\(bad)")
        }
        #expect(UnixTime.iso8601(1_700_000_000) == "2023-11-14T22:13:20Z")
        #expect(UnixTime.iso8601(0) == "1970-01-01T00:00:00Z")
        #expect(UnixTime.iso8601(-1) == "1969-12-31T23:59:59Z")
        for seconds in stride(from: Int64(-5_000_000_000), through: 5_000_000_000, by: 7_777_777) {
            #expect(UnixTime.parse(UnixTime.iso8601(seconds)) == seconds)
        }
    }

    @Test func mergingKeepsOneRowPerTokenWithTheNewestTimestamp() throws {
        var generator = TokenGenerator(seed: 5)
        let (a, b, c) = (generator.next(), generator.next(), generator.next())
        let path = try self.folder() + "/suppress.csv"
        var first = SuppressionList()
        first.add(.init(token: a, timestamp: 100, reason: "Feedback"))
        first.add(.init(token: b, timestamp: 300, reason: "Feedback"))
        try first.merge(into: path)
        var second = SuppressionList()
        second.add(.init(token: a, timestamp: 200, reason: "Unregistered"))
        second.add(.init(token: b, timestamp: 250, reason: "InvalidToken"))
        second.add(.init(token: c, timestamp: 50, reason: "BadDeviceToken"))
        let merged = try second.merge(into: path)
        #expect(merged.count == 3)
        let read = try SuppressionList.load(path: path)
        #expect(read.entries == merged.entries)
        #expect(read.entries[a] == .init(token: a, timestamp: 200, reason: "Unregistered"))
        #expect(read.entries[b] == .init(token: b, timestamp: 300, reason: "Feedback"))
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(text.hasPrefix("token,timestamp,time,reason\n"))
        #expect(text.contains("\(c.hexString),50,1970-01-01T00:00:50Z,BadDeviceToken\n"))
        // No temporary file is left beside it.
        let folder = (path as NSString).deletingLastPathComponent
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder) == ["suppress.csv"])
    }

    @Test func applesRuleKeepsATokenRegisteredAgainAfterTheTimestamp() {
        var generator = TokenGenerator(seed: 6)
        let token = generator.next()
        var list = SuppressionList()
        list.add(.init(token: token, timestamp: 1000, reason: "Feedback"))
        #expect(list.suppresses(token) != nil)
        #expect(list.suppresses(token, registeredAt: 999) != nil)
        #expect(list.suppresses(token, registeredAt: 1000) != nil)
        #expect(list.suppresses(token, registeredAt: 1001) == nil)
        #expect(list.suppresses(generator.next()) == nil)
    }

    @Test func aBadRowIsNamedWithFileLineAndValue() throws {
        let path = try self.folder() + "/suppress.csv"
        try Data("token,timestamp\n\(String(repeating: "ab", count: 32)),5\nnot-a-token,6\n".utf8)
            .write(to: URL(fileURLWithPath: path))
        let error = #expect(throws: InputError.self) { try SuppressionList.load(path: path) }
        #expect(error?.line == 3)
        #expect(error?.description.contains("not-a-token") == true)
        try Data("token,timestamp\n\(String(repeating: "ab", count: 32)),soon\n".utf8)
            .write(to: URL(fileURLWithPath: path))
        let timestamp = #expect(throws: InputError.self) { try SuppressionList.load(path: path) }
        #expect(timestamp?.description.contains("\"soon\"") == true)
    }
}
