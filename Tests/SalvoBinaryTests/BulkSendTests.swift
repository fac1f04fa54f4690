import APNSWire
import SalvoBinary
import SalvoIO
import SalvoRows
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// End to end over real TLS: the engine (SalvoIO, OpenSSL) against the simulator (NIO, BoringSSL).
@Suite(.tags(.network), .runs(.network), .serialized) struct BulkSendTests {
    @Test func cleanRunDeliversEveryTokenExactlyOnce() async throws {
        let harness = try await BulkSendHarness.start(tokens: 20_000)
        let result = try await harness.run(try harness.configuration())
        let verdict = harness.verdict()
        try await harness.stop()

        #expect(verdict.passed, "\(verdict.summary)")
        #expect(verdict.deliveredOnce == 20_000)
        #expect(result.report.isComplete, "\(result.report.summary)")
        #expect(result.report.delivered == 20_000)
        #expect(result.report.confirmed > 0, "the barrier confirms what it follows")
        #expect(result.rejectedRows.isEmpty)
        #expect(verdict.ledger.accepted == 20_000)
    }

    @Test func invalidTokensAreExactlyTheRejectedOnes() async throws {
        let count = 5_000
        var generator = TokenGenerator(seed: 1)
        let tokens = (0..<count).map { _ in generator.next() }
        // First, last, three consecutive, and every 100th.
        var invalid: Set<Int> = [0, count - 1, 2000, 2001, 2002]
        for index in stride(from: 99, to: count, by: 100) { invalid.insert(index) }
        var plan = FaultPlan()
        plan.invalidTokens = invalid.map { tokens[$0].hexString }

        let harness = try await BulkSendHarness.start(tokens: count, plan: plan)
        let result = try await harness.run(try harness.configuration())
        let verdict = harness.verdict()
        try await harness.stop()

        #expect(Set(result.rejectedRows.map(\.line)) == Set(invalid.map { $0 + 2 }), "rows are lines: header + 1")
        #expect(result.rejectedRows.allSatisfy { $0.status == 8 })
        #expect(result.report.rejectedTotal == invalid.count)
        #expect(result.report.delivered == count - invalid.count)
        #expect(verdict.invalidNeverDelivered == invalid.count)
        #expect(verdict.deliveredOnce == count - invalid.count)
        #expect(verdict.deliveredMoreThanOnce == 0 && verdict.neverDelivered == 0, "\(verdict.summary)")
        #expect(!result.report.isComplete)
    }

    /// A dirty list: every invalid token makes the gateway close the connection, but no connection is closed on
    /// purpose before the end (no barrier on a full flight), and the report says the list should be cleaned.
    @Test func aDirtyListClosesConnectionsForItsErrorsOnlyAndIsToldSo() async throws {
        let count = 20_000
        var generator = TokenGenerator(seed: 1)
        let tokens = (0..<count).map { _ in generator.next() }
        let invalid = Set(stride(from: 150, to: count, by: 250))
        var plan = FaultPlan()
        plan.invalidTokens = invalid.map { tokens[$0].hexString }
        plan.errorDelayMilliseconds = 10

        let harness = try await BulkSendHarness.start(tokens: count, plan: plan)
        let result = try await harness.run(try harness.configuration())
        let verdict = harness.verdict()
        try await harness.stop()

        #expect(verdict.deliveredOnce == count - invalid.count, "\(verdict.summary)")
        #expect(verdict.invalidNeverDelivered == invalid.count)
        #expect(verdict.deliveredMoreThanOnce == 0 && verdict.neverDelivered == 0)
        let report = result.report
        #expect(report.reconnectCauses[ReconnectCause.barrier] == nil, "\(report.summary)")
        #expect(report.reconnectCauses["InvalidToken"] == invalid.count)
        #expect(report.reconnects == invalid.count, "one reconnect per invalid token, none on purpose")
        #expect(report.dirtyListWarning != nil)
        #expect(report.summary.contains("--suppress"))
    }

    /// Command 0 has no error response: the gateway drops the connection on a token it cannot take. The row is
    /// found by bisection, sent alone, and left uncertain ("connection dropped") instead of riding every
    /// reconnect; every other row arrives (at least once: command 0 cannot confirm what preceded a drop).
    @Test func aCommandZeroRowThatDropsEveryConnectionIsIsolated() async throws {
        let count = 2_000
        var generator = TokenGenerator(seed: 1)
        let tokens = (0..<count).map { _ in generator.next() }
        var plan = FaultPlan()
        plan.invalidTokens = [tokens[1234].hexString]

        let harness = try await BulkSendHarness.start(tokens: count, plan: plan)
        let result = try await harness.run(try harness.configuration(command: .simple, connections: 1))
        let verdict = harness.verdict()
        try await harness.stop()

        let report = result.report
        #expect(report.droppedConnection == 1, "\(report.summary)")
        #expect(report.uncertain == 1)
        #expect(report.delivered == count - 1)
        #expect(result.unsettledRows.map(\.line) == [1234 + 2])
        #expect(result.unsettledRows.first?.outcome == .connectionDropped)
        #expect(verdict.invalidNeverDelivered == 1)
        #expect(verdict.neverDelivered == 0, "\(verdict.summary)")
        #expect(verdict.unexpected == 0)
        #expect(report.reconnects < 40, "bounded: \(report.reconnects) reconnects")
    }

    /// A gateway that refuses a connect within 150 ms of the previous one from the same client (it paces connects)
    /// while invalid tokens close connections: the shards' connects share one pacer, refusals widen it, and the
    /// job, which keeps making progress, is never abandoned however many connects are refused.
    @Test func aGatewayThatPacesConnectsIsBackedOffFromNeverAbandoned() async throws {
        let count = 2_000
        var generator = TokenGenerator(seed: 5)
        let tokens = (0..<count).map { _ in generator.next() }
        let invalid = stride(from: 37, to: count, by: 100).map { tokens[$0].hexString }
        var plan = FaultPlan()
        plan.invalidTokens = invalid
        plan.connectionLimits = FaultPlan.ConnectionLimits(minIntervalPerClientMilliseconds: 150)
        let harness = try await BulkSendHarness.start(tokens: count, plan: plan, seed: 5)
        var configuration = try harness.configuration(connections: 2)
        // The shipped policy: a 50 ms floor between connects of the job, 4 failures and 30 s without progress
        // before giving up.
        configuration.reconnect = .default
        let result = try await harness.run(configuration)
        let verdict = harness.verdict()
        try await harness.stop()

        #expect(verdict.deliveredOnce == count - invalid.count, "\(verdict.summary)")
        #expect(verdict.invalidNeverDelivered == invalid.count)
        #expect(verdict.deliveredMoreThanOnce == 0 && verdict.neverDelivered == 0)
        #expect(result.report.reconnectCauses["InvalidToken"] == invalid.count, "\(result.report.summary)")
        // The second shard's first connect comes 50 ms after the first shard's: refused, and more after it.
        #expect(
            verdict.ledger.connectionsRefused["minInterval", default: 0] > 0,
            "\(verdict.ledger.connectionsRefused)"
        )
    }

    @Test func shutdownsLoseNothingAndDuplicateNothing() async throws {
        var plan = FaultPlan()
        plan.shutdown = .init(everyAccepted: 997)
        let harness = try await BulkSendHarness.start(tokens: 10_000, plan: plan)
        let result = try await harness.run(try harness.configuration())
        let verdict = harness.verdict()
        try await harness.stop()

        #expect(verdict.passed, "\(verdict.summary)")
        #expect(result.report.isComplete, "\(result.report.summary)")
        #expect(result.report.reconnects >= 9)
        #expect(verdict.ledger.errorResponses.values.reduce(0, +) >= 10)
    }

    @Test func resetsLoseNothingWithResendAndEveryDuplicateWasUncertain() async throws {
        var plan = FaultPlan()
        // Every connection resets within its first 1,000 notifications (each of the four carries about 2,500), so a
        // reset always comes: a connection doomed at random later could end first.
        plan.reset = .init(probability: 1, scope: .connection, withinNotifications: 1000)
        let harness = try await BulkSendHarness.start(tokens: 10_000, plan: plan)
        let result = try await harness.run(try harness.configuration(connections: 4, onUncertain: .resend))
        let verdict = harness.verdict()
        let reconciliation = harness.reconcile(result)
        try await harness.stop()

        #expect(verdict.ledger.resets > 0, "the plan reset some connections")
        #expect(result.report.uncertainEvents > 0)
        #expect(reconciliation.agrees, "\(reconciliation)\n\(verdict.summary)")
        #expect(verdict.neverDelivered == 0, "resent: nothing is lost")
        // Stricter than the reconciliation, which counts tokens: every extra copy was an uncertain row.
        let duplicates = verdict.deliveredMoreThanOnceTokens.reduce(0) { $0 + $1.count - 1 }
        #expect(duplicates <= result.report.uncertainEvents, "every duplicate is one the report called uncertain")
        #expect(result.report.isComplete, "\(result.report.summary)")
    }

    @Test func resetsDuplicateNothingWithReport() async throws {
        var plan = FaultPlan()
        plan.reset = .init(probability: 1, scope: .connection, withinNotifications: 1000)
        let harness = try await BulkSendHarness.start(tokens: 10_000, plan: plan)
        let result = try await harness.run(try harness.configuration(connections: 4, onUncertain: .report))
        let verdict = harness.verdict()
        let reconciliation = harness.reconcile(result)
        try await harness.stop()

        #expect(verdict.ledger.resets > 0 && result.report.uncertain > 0)
        // With policy report: nothing duplicated, and only uncertain rows may be lost.
        #expect(reconciliation.agrees, "\(reconciliation)\n\(verdict.summary)")
        #expect(reconciliation.duplicationAllowed == 0 && verdict.deliveredMoreThanOnce == 0)
        #expect(result.report.delivered + result.report.uncertain == 10_000)
    }

    @Test func slowReaderLosesNothing() async throws {
        var plan = FaultPlan()
        plan.slowReader = .init(chunkSize: 16 * 1024, delayMilliseconds: 2, probability: 1)
        let harness = try await BulkSendHarness.start(tokens: 5_000, plan: plan)
        let result = try await harness.run(try harness.configuration())
        let verdict = harness.verdict()
        try await harness.stop()
        #expect(verdict.passed, "\(verdict.summary)")
        #expect(result.report.isComplete)
    }

    @Test(arguments: [1, 4, 16])
    func anyNumberOfShards(connections: Int) async throws {
        var plan = FaultPlan()
        plan.shutdown = .init(everyAccepted: 1500)
        let harness = try await BulkSendHarness.start(tokens: 8_000, plan: plan)
        let result = try await harness.run(try harness.configuration(connections: connections))
        let verdict = harness.verdict()
        try await harness.stop()
        #expect(verdict.passed, "\(verdict.summary)")
        #expect(result.report.connections == connections)
        #expect(result.report.isComplete)
    }

    @Test(arguments: FrameCommand.allCases)
    func everyCommand(command: FrameCommand) async throws {
        let harness = try await BulkSendHarness.start(tokens: 5_000)
        let result = try await harness.run(try harness.configuration(command: command))
        let verdict = harness.verdict()
        try await harness.stop()
        #expect(verdict.passed, "\(verdict.summary)")
        #expect(result.report.isComplete, "\(result.report.summary)")
        if command == .simple {
            #expect(result.report.presumed == 5_000, "command 0 has no identifiers: nothing can be confirmed")
        } else {
            #expect(result.report.confirmed > 0)
        }
    }

    @Test(arguments: ["uring", "socket"])
    func bothTransports(transport: String) async throws {
        let kind = BinaryTransport(rawValue: transport)!
        if kind == .uring, let refusal = TransportKind.uringRefusal {
            print("skipping the io_uring run: \(refusal)")
            return
        }
        var plan = FaultPlan()
        plan.invalidTokenFraction = 0.002
        plan.shutdown = .init(everyAccepted: 2000)
        let harness = try await BulkSendHarness.start(tokens: 10_000, plan: plan)
        let result = try await harness.run(try harness.configuration(transport: kind))
        let verdict = harness.verdict()
        try await harness.stop()
        #expect(result.report.mode.hasSuffix(transport))
        #expect(verdict.neverDelivered == 0 && verdict.deliveredMoreThanOnce == 0, "\(verdict.summary)")
        #expect(result.report.rejectedTotal == verdict.invalidNeverDelivered && result.report.rejectedTotal > 0)
        #expect(result.report.delivered == verdict.deliveredOnce)
    }
}
