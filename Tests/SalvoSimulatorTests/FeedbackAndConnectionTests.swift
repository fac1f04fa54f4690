import APNSWire
import Glibc
import NIOCore
import SalvoTestSupport
import SalvoTestTraits
import Testing

@testable import SalvoSimulator

@Suite(.tags(.network), .runs(.network)) struct FeedbackAndConnectionTests {
    @Test func feedbackStreamsTheTopicsTuplesOnceThenNothing() async throws {
        var plan = FaultPlan()
        let gone = [TestTokens.token(1), TestTokens.token(2)]
        plan.uninstalled = [
            FaultPlan.Uninstalled(topic: Harness.topic, tokens: gone.map(TestTokens.hex), timestamp: 1_700_000_000),
            FaultPlan.Uninstalled(topic: "com.example.other", tokens: [TestTokens.hex(TestTokens.token(3))]),
        ]
        try await Harness.run(plan: plan) { h in
            let first = try await h.readFeedback()
            #expect(!first.timedOut)
            var buffer = ByteBuffer(bytes: first.received)
            var tuples: [FeedbackTuple] = []
            while let tuple = FeedbackTuple.read(from: &buffer) { tuples.append(tuple) }
            #expect(buffer.readableBytes == 0)
            #expect(tuples == gone.map { FeedbackTuple(timestamp: 1_700_000_000, token: $0) })
            // Byte for byte: timestamp | 0x0020 | token.
            #expect(Array(first.received.prefix(6)) == [0x65, 0x53, 0xF1, 0x00, 0x00, 0x20])
            let second = try await h.readFeedback()
            #expect(second.received.isEmpty && !second.timedOut)
            // The other topic's list is untouched by this topic's reads.
            #expect(h.simulator.pendingFeedback(topic: "com.example.other") == 1)
            #expect(h.simulator.pendingFeedback(topic: Harness.topic) == 0)
            h.simulator.markUninstalled(try DeviceToken(bytes: TestTokens.token(4)), topic: Harness.topic, timestamp: 5)
            let third = try await h.readFeedback()
            #expect(third.received == [0, 0, 0, 5, 0, 32] + TestTokens.token(4))
            #expect(h.simulator.ledger.snapshot().feedbackTuplesSent == 3)
        }
    }

    @Test func connectionsWithoutAClientCertificateAreRefused() async throws {
        try await Harness.run { h in
            let outcome = try await h.send([Frames.valid(TestTokens.token(1), identifier: 1)], withoutCertificate: true)
            #expect(outcome.received.isEmpty)
            #expect(outcome.error != nil)
            try await eventually("one connection counted refused at TLS", timeout: .seconds(10)) {
                h.simulator.ledger.snapshot().connectionsRefused["tls"] == 1
            }
            #expect(h.simulator.ledger.snapshot().accepted == 0)
        }
    }

    @Test func clientCertificatesFromAnotherCAAreRefused() async throws {
        try await Harness.run { h in
            let foreign = try CertificateFactory().client(topic: Harness.topic)
            let outcome = try await h.send([Frames.valid(TestTokens.token(1), identifier: 1)], identity: foreign)
            #expect(outcome.received.isEmpty)
            #expect(outcome.error != nil)
            try await eventually("one connection counted refused at TLS", timeout: .seconds(10)) {
                h.simulator.ledger.snapshot().connectionsRefused["tls"] == 1
            }
            #expect(h.simulator.ledger.snapshot().accepted == 0)
            // The feedback service applies the same rule.
            let feedback = try await h.readFeedback(identity: foreign)
            #expect(feedback.received.isEmpty && feedback.error != nil)
        }
    }

    @Test func aReconnectStormIsRefusedAfterAccept() async throws {
        var plan = FaultPlan()
        plan.connectionLimits = FaultPlan.ConnectionLimits(maxConnectsPerSecond: 2)
        try await Harness.run(plan: plan) { h in
            // Six connects at once: the gate admits two per second and closes the rest right after accept.
            let outcomes = try await withThrowingTaskGroup(of: (UInt32, TestClient.Outcome).self) { group in
                for identifier in UInt32(1)...6 {
                    group.addTask {
                        let frame = Frames.framed(token: nil, payload: Frames.payload, identifier: identifier)
                        return (identifier, try await h.send([frame]))
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            let answered = outcomes.filter { $0.1.received == Frames.errorResponse(2, $0.0) }.count
            let refused = outcomes.filter { $0.1.received.isEmpty && $0.1.error != nil }.count
            #expect(answered + refused == 6)
            let snapshot = h.simulator.ledger.snapshot()
            #expect(snapshot.connectionsAccepted == answered)
            #expect(snapshot.connectionsRefused["rate"] == refused)
            // Only a machine too loaded to connect six times within a second could admit more than two.
            #expect(refused >= 1 && answered >= 2)
        }
    }

    @Test func aClientReconnectingTooSoonIsRefused() async throws {
        var plan = FaultPlan()
        plan.connectionLimits = FaultPlan.ConnectionLimits(minIntervalPerClientMilliseconds: 60_000)
        try await Harness.run(plan: plan) { h in
            let first = try await h.send([Frames.framed(token: nil, payload: Frames.payload, identifier: 1)])
            #expect(first.received == Frames.errorResponse(2, 1))
            let second = try await h.send([Frames.framed(token: nil, payload: Frames.payload, identifier: 2)])
            #expect(second.received.isEmpty && second.error != nil)
            #expect(h.simulator.ledger.snapshot().connectionsRefused["minInterval"] == 1)
        }
    }
}

@Suite(.tags(.network), .runs(.network)) struct OpenConnectionLimitTests {
    @Test func connectionsOverTheOpenLimitAreRefused() async throws {
        var plan = FaultPlan()
        plan.connectionLimits = FaultPlan.ConnectionLimits(maxOpen: 1)
        try await Harness.run(plan: plan) { h in
            // The first connection sends nothing and stays open until it is closed here: a plain TCP socket,
            // connected on this thread (a client task of the test's own could wait behind other suites' work on a
            // busy machine, and the gate counts a connection when it is accepted, before any TLS).
            let idle = try #require(
                LoopbackSocket.connect(port: h.simulator.gatewayPort),
                "connect to the gateway: errno \(errno)"
            )
            var idleOpen = true
            defer { if idleOpen { close(idle) } }
            try await eventually("one connection counted accepted", timeout: .seconds(10)) {
                h.simulator.ledger.snapshot().connectionsAccepted == 1
            }
            let second = try await h.send([Frames.framed(token: nil, payload: Frames.payload, identifier: 1)])
            #expect(second.received.isEmpty && second.error != nil)
            #expect(h.simulator.ledger.snapshot().connectionsRefused["maxOpen"] == 1)
            close(idle)
            idleOpen = false
            // Once the server has seen it close, a new connection is admitted again.
            let probe = Frames.framed(token: nil, payload: Frames.payload, identifier: 3)
            var third = try await h.send([probe])
            try await eventually("a new connection admitted once the idle one closed", timeout: .seconds(10)) {
                if third.received.isEmpty { third = try await h.send([probe]) }
                return !third.received.isEmpty
            }
            #expect(third.received == Frames.errorResponse(2, 3))
        }
    }
}
