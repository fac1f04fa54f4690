import APNSWire
import Foundation
import SalvoBinary
import SalvoRows
import SalvoSend
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

@Suite(.tags(.network), .runs(.network)) struct SuppressionSendTests {
    /// The first send meets every invalid token (one reconnect each) and lists them; the second, with that list as
    /// `--suppress`, sends none of them and reconnects for none.
    @Test func aSecondSendWithTheSuppressionListHasNoInvalidTokenReconnects() async throws {
        var generator = TokenGenerator(seed: 21)
        let tokens = (0..<2000).map { _ in generator.next() }
        let invalid = [3, 400, 700, 1200, 1500].map { tokens[$0] }
        var plan = FaultPlan()
        plan.invalidTokens = invalid.map(\.hexString)
        let setup = try await BinarySimulatorSetup.start("salvo-sup", plan: plan)
        let simulator = setup.simulator
        let input = try setup.tokenFile(tokens)
        let job = try setup.job(connections: 1)
        let suppression = setup.folder + "/suppress.csv"

        let first: SendResult
        let second: SendResult
        do {
            first = try await BulkSend.prepare(
                SendRequest(files: [input], interface: .binary(job), outputs: SendOutputs(unregistered: suppression))
            ).run()
            second = try await BulkSend.prepare(
                SendRequest(files: [input], interface: .binary(job), suppress: suppression)
            ).run()
        } catch {
            try await simulator.shutdown()
            throw error
        }
        try await simulator.shutdown()

        #expect(first.report.rejected == ["InvalidToken": invalid.count])
        #expect(first.report.reconnects >= invalid.count)
        let list = try SuppressionList.load(path: suppression)
        #expect(Set(list.entries.keys) == Set(invalid))
        #expect(list.entries.values.allSatisfy { $0.reason == "InvalidToken" })

        #expect(second.report.suppressed == invalid.count)
        #expect(second.report.rejected.isEmpty)
        #expect(second.report.reconnects == 0)
        #expect(second.report.delivered == tokens.count - invalid.count)
        #expect(second.report.inputRows == tokens.count)
        #expect(second.isComplete)
    }

    /// Apple's rule over the wire: the feedback service lists 30 uninstalled apps and 20 that were installed again
    /// later. Applied without registration times the list drops the 20 too, and the simulator's verdict names them
    /// as wrongly dropped; with `registeredAt` they are sent, and the ledger agrees with the report.
    @Test func aDeviceRegisteredAgainAfterItsFeedbackTimeIsSentOnlyWithRegistrationTimes() async throws {
        var generator = TokenGenerator(seed: 33)
        let tokens = (0..<600).map { _ in generator.next() }
        let gone = Array(tokens[100..<130])
        let back = Array(tokens[300..<320])
        let uninstalledAt: UInt32 = 1_700_000_000
        let registeredAgain: UInt32 = 1_700_100_000
        var plan = FaultPlan()
        plan.uninstalled = [
            FaultPlan.Uninstalled(topic: Self.topic, tokens: gone.map(\.hexString), timestamp: uninstalledAt),
            FaultPlan.Uninstalled(
                topic: Self.topic,
                tokens: back.map(\.hexString),
                timestamp: uninstalledAt,
                reregisteredAt: registeredAgain
            ),
        ]
        // Every device's last registration: before the feedback time, but the re-registered ones after it.
        let backSet = Set(back)
        let rows = tokens.map { "\($0.hexString),\(backSet.contains($0) ? registeredAgain : uninstalledAt - 86_400)" }
        let withoutTimes = try await self.sendAfterFeedback(plan: plan, rows: rows, registeredAt: nil)
        #expect(withoutTimes.feedback == 50)
        #expect(withoutTimes.result.report.suppressed == 50)
        #expect(withoutTimes.result.report.reregistered == 0)
        #expect(withoutTimes.verdict.wronglyDropped == back.count)
        #expect(withoutTimes.verdict.uninstalledNeverDelivered == gone.count)
        #expect(Set(withoutTimes.verdict.wronglyDroppedTokens) == Set(back.map(\.hexString)))
        #expect(!Reconciliation(report: withoutTimes.result.report, verdict: withoutTimes.verdict).agrees)

        let withTimes = try await self.sendAfterFeedback(plan: plan, rows: rows, registeredAt: .name("registered_at"))
        #expect(withTimes.result.report.suppressed == gone.count)
        #expect(withTimes.result.report.reregistered == back.count)
        #expect(withTimes.result.report.delivered == tokens.count - gone.count)
        #expect(withTimes.verdict.wronglyDropped == 0)
        #expect(withTimes.verdict.neverDelivered == 0)
        #expect(withTimes.verdict.uninstalledNeverDelivered == gone.count)
        #expect(withTimes.verdict.deliveredOnce == tokens.count - gone.count)
        let reconciliation = Reconciliation(report: withTimes.result.report, verdict: withTimes.verdict)
        #expect(reconciliation.agrees, "\(reconciliation)")
    }

    static let topic = "com.example.salvo"

    /// Starts a simulator with `plan`, reads its feedback service into a suppression file, sends `rows`
    /// (`token,registered_at`) with that file as `--suppress`, and judges the ledger.
    private func sendAfterFeedback(
        plan: FaultPlan,
        rows: [String],
        registeredAt: TokenColumn?
    ) async throws -> (feedback: Int, result: SendResult, verdict: Verdict) {
        let setup = try await BinarySimulatorSetup.start("salvo-rereg", plan: plan)
        let simulator = setup.simulator
        let input = try setup.write("token,registered_at\n" + rows.joined(separator: "\n") + "\n")
        let credentials = setup.credentials
        let job = try setup.job(connections: 1)
        let suppression = setup.folder + "/suppress.csv"
        do {
            let read = try await FeedbackClient.read(
                FeedbackClient.Configuration(
                    gateway: GatewayAddress(host: "127.0.0.1", port: simulator.feedbackPort),
                    credentials: credentials,
                    timeout: .seconds(20)
                )
            )
            var list = SuppressionList()
            for entry in read.entries {
                list.add(
                    SuppressionList.Entry(token: entry.token, timestamp: Int64(entry.timestamp), reason: "Feedback")
                )
            }
            try list.write(to: suppression)
            var options = TokenSource.Options()
            options.registeredAt = registeredAt
            let result = try await BulkSend.prepare(
                SendRequest(files: [input], input: options, interface: .binary(job), suppress: suppression)
            ).run()
            let verdict = simulator.verdict(
                expected: ExpectedTokens(try rows.map { try DeviceToken(hex: String($0.prefix(64))) })
            )
            try await simulator.shutdown()
            return (read.entries.count, result, verdict)
        } catch {
            try await simulator.shutdown()
            throw error
        }
    }
}
