import APNSWire
import NIOCore
import SalvoTestSupport
import SalvoTestTraits
import Testing

@testable import SalvoSimulator

@Suite(.tags(.network), .runs(.network)) struct GatewayTests {
    let t1 = TestTokens.token(1)
    let t2 = TestTokens.token(2)
    let t3 = TestTokens.token(3)
    let t4 = TestTokens.token(4)

    @Test func acceptsCommandsZeroOneAndTwoAndAnswersNothing() async throws {
        try await Harness.run { h in
            let outcome = try await h.send([
                Frames.valid(t1, identifier: 0, command: .simple),
                Frames.valid(t2, identifier: 11, command: .enhanced, expiry: 1_900_000_000),
                Frames.valid(t3, identifier: 12, command: .framed, expiry: 7, priority: .powerConsiderate),
                // A barrier: its error response proves the three before it drew no answer.
                Frames.framed(token: nil, payload: Frames.payload, identifier: 99),
            ])
            #expect(outcome.received == Frames.errorResponse(2, 99))
            #expect(!outcome.timedOut)
            let snapshot = h.simulator.ledger.snapshot()
            #expect(snapshot.accepted == 3)
            #expect(snapshot.errors(2) == 1)
            let r1 = try #require(h.simulator.ledger.record(for: t1))
            #expect(r1.command == 0 && r1.lastIdentifier == 0 && r1.priority == 10 && r1.count == 1)
            let r2 = try #require(h.simulator.ledger.record(for: t2))
            #expect(r2.command == 1 && r2.lastIdentifier == 11 && r2.expiry == 1_900_000_000 && r2.priority == 10)
            let r3 = try #require(h.simulator.ledger.record(for: t3))
            #expect(r3.command == 2 && r3.lastIdentifier == 12 && r3.expiry == 7 && r3.priority == 5)
            let digest = Frames.payload.withUnsafeBytes { TokenHash.digest($0) }
            #expect(r3.payloadDigest == digest)
        }
    }

    struct StatusCase: Sendable, CustomTestStringConvertible {
        let name: String
        let frame: @Sendable () -> ByteBuffer
        let status: UInt8
        let identifier: UInt32
        var testDescription: String { "\(self.name) → \(self.status)" }
    }

    static let statusCases: [StatusCase] = [
        StatusCase(
            name: "missing token",
            frame: { Frames.framed(token: nil, payload: Frames.payload, identifier: 0x0102_0304) },
            status: 2,
            identifier: 0x0102_0304
        ),
        StatusCase(
            name: "token of 31 bytes",
            frame: {
                Frames.framed(token: Array(TestTokens.token(5).prefix(31)), payload: Frames.payload, identifier: 77)
            },
            status: 5,
            identifier: 77
        ),
        StatusCase(
            name: "missing payload",
            frame: { Frames.framed(token: TestTokens.token(5), payload: nil, identifier: 0xDEAD_BEEF) },
            status: 4,
            identifier: 0xDEAD_BEEF
        ),
        StatusCase(
            name: "command 2 payload over 2048",
            frame: {
                Frames.framed(token: TestTokens.token(5), payload: [UInt8](repeating: 0x20, count: 2049), identifier: 5)
            },
            status: 7,
            identifier: 5
        ),
        StatusCase(
            name: "command 1 payload over 256",
            frame: {
                Frames.enhanced(
                    token: TestTokens.token(5),
                    payload: [UInt8](repeating: 0x20, count: 257),
                    identifier: 6
                )
            },
            status: 7,
            identifier: 6
        ),
        StatusCase(
            name: "token on the plan's invalid list",
            frame: { Frames.valid(TestTokens.token(666), identifier: 8) },
            status: 8,
            identifier: 8
        ),
        StatusCase(
            name: "production token sent to the sandbox",
            frame: { Frames.valid(TestTokens.token(9, first: 0x11), identifier: 9) },
            status: 8,
            identifier: 9
        ),
        StatusCase(
            name: "priority 10 with only content-available",
            frame: { Frames.valid(TestTokens.token(5), identifier: 10, payload: Frames.silentPayload) },
            status: 1,
            identifier: 10
        ),
        StatusCase(
            name: "unknown command byte",
            frame: { ByteBuffer(bytes: [7, 0, 0, 0, 0]) },
            status: 1,
            identifier: 0
        ),
    ]

    @Test(arguments: statusCases)
    func everyStatusIsAnsweredByteForByte(_ statusCase: StatusCase) async throws {
        var plan = FaultPlan()
        plan.environment = .sandbox
        plan.invalidTokens = [TestTokens.hex(TestTokens.token(666))]
        try await Harness.run(plan: plan) { h in
            let outcome = try await h.send([Frames.valid(t1, identifier: 1), statusCase.frame()])
            #expect(outcome.received == Frames.errorResponse(statusCase.status, statusCase.identifier))
            #expect(!outcome.timedOut)
            let snapshot = h.simulator.ledger.snapshot()
            #expect(snapshot.accepted == 1)
            #expect(snapshot.errors(statusCase.status) == 1)
        }
    }

    @Test func silentNotificationWithPriorityFiveIsAccepted() async throws {
        try await Harness.run { h in
            let outcome = try await h.send([
                Frames.valid(t1, identifier: 1, payload: Frames.silentPayload, priority: .powerConsiderate),
                Frames.framed(token: nil, payload: Frames.payload, identifier: 2),
            ])
            #expect(outcome.received == Frames.errorResponse(2, 2))
            #expect(h.simulator.ledger.snapshot().accepted == 1)
        }
    }

    @Test func topicMissingOrInvalidInTheCertificate() async throws {
        try await Harness.run { h in
            let noTopic = try h.certificates.client(topic: nil)
            let missing = try await h.send([Frames.valid(t1, identifier: 41)], identity: noTopic)
            #expect(missing.received == Frames.errorResponse(3, 41))
            let badTopic = try h.certificates.client(topic: "not a bundle id")
            let invalid = try await h.send([Frames.valid(t1, identifier: 42)], identity: badTopic)
            #expect(invalid.received == Frames.errorResponse(6, 42))
            #expect(h.simulator.ledger.snapshot().accepted == 0)
        }
    }

    @Test func commandZeroErrorClosesWithoutAPacket() async throws {
        try await Harness.run { h in
            let outcome = try await h.send([
                Frames.simple(token: t1, payload: Frames.payload),
                Frames.simple(token: Array(t2.prefix(31)), payload: Frames.payload),
                Frames.simple(token: t3, payload: Frames.payload),
            ])
            #expect(outcome.received.isEmpty)
            #expect(!outcome.timedOut)
            let snapshot = h.simulator.ledger.snapshot()
            #expect(snapshot.accepted == 1 && snapshot.closedWithoutResponse == 1)
            #expect(snapshot.errorResponses.isEmpty)
            // The close reaches the client before the read that discarded the third frame ends
            // and is merged into the ledger.
            try await eventually("one frame counted discarded after the error", timeout: .seconds(10)) {
                h.simulator.ledger.snapshot().discardedAfterError == 1
            }
        }
    }

    @Test func everythingAfterAnErrorIsDiscarded() async throws {
        var plan = FaultPlan()
        plan.invalidTokens = [TestTokens.hex(t2)]
        try await Harness.run(plan: plan) { h in
            let outcome = try await h.send([
                Frames.valid(t1, identifier: 1), Frames.valid(t2, identifier: 2),
                Frames.valid(t3, identifier: 3), Frames.valid(t4, identifier: 4),
            ])
            #expect(outcome.received == Frames.errorResponse(8, 2))
            #expect(h.simulator.ledger.record(for: t1) != nil)
            #expect(h.simulator.ledger.record(for: t3) == nil && h.simulator.ledger.record(for: t4) == nil)
            try await eventually("two frames counted discarded after the error", timeout: .seconds(10)) {
                h.simulator.ledger.snapshot().discardedAfterError == 2
            }
            #expect(h.simulator.ledger.snapshot().accepted == 1)
        }
    }

    @Test func shutdownNamesTheLastAcceptedNotification() async throws {
        var plan = FaultPlan()
        plan.shutdown.everyAccepted = 3
        try await Harness.run(plan: plan) { h in
            let frames = (1...5).map { Frames.valid(TestTokens.token(UInt32($0)), identifier: UInt32(100 + $0)) }
            let first = try await h.send(frames)
            #expect(first.received == Frames.errorResponse(10, 103))
            #expect(h.simulator.ledger.record(for: TestTokens.token(3))?.lastIdentifier == 103)
            #expect(h.simulator.ledger.record(for: TestTokens.token(4)) == nil)
            // A sender resends from 104 on a new connection, which shuts down after its third.
            let second = try await h.send(Array(frames[3...]) + [Frames.valid(TestTokens.token(6), identifier: 106)])
            #expect(second.received == Frames.errorResponse(10, 106))
            try await eventually("two frames counted discarded after the error", timeout: .seconds(10)) {
                h.simulator.ledger.snapshot().discardedAfterError == 2
            }
            let snapshot = h.simulator.ledger.snapshot()
            #expect(snapshot.accepted == 6 && snapshot.tokensAcceptedMoreThanOnce == 0 && snapshot.errors(10) == 2)
        }
    }

    @Test func errorResponseCanBeDelayed() async throws {
        var plan = FaultPlan()
        plan.errorDelayMilliseconds = 150
        try await Harness.run(plan: plan) { h in
            let clock = ContinuousClock()
            let start = clock.now
            let outcome = try await h.send([Frames.framed(token: nil, payload: Frames.payload, identifier: 5)])
            #expect(outcome.received == Frames.errorResponse(2, 5))
            #expect(clock.now - start >= .milliseconds(150))
        }
    }

    @Test func plannedResetSendsNoErrorAndAcceptsNothingAfter() async throws {
        var plan = FaultPlan()
        plan.reset = FaultPlan.Reset(probability: 1, scope: .notification)
        try await Harness.run(plan: plan) { h in
            let outcome = try await h.send([Frames.valid(t1, identifier: 1), Frames.valid(t2, identifier: 2)])
            #expect(outcome.received.isEmpty)
            #expect(outcome.error != nil)
            #expect(!outcome.timedOut)
            let snapshot = h.simulator.ledger.snapshot()
            #expect(snapshot.resets == 1 && snapshot.accepted == 0 && snapshot.errorResponses.isEmpty)
        }
    }

    @Test func slowReaderStillAcceptsEverything() async throws {
        var plan = FaultPlan()
        plan.slowReader = FaultPlan.SlowReader(chunkSize: 512, delayMilliseconds: 5, probability: 1)
        try await Harness.run(plan: plan) { h in
            let frames = (1...200).map { Frames.valid(TestTokens.token(UInt32($0)), identifier: UInt32($0)) }
            let clock = ContinuousClock()
            let start = clock.now
            let outcome = try await h.send(
                frames + [Frames.framed(token: nil, payload: Frames.payload, identifier: 201)]
            )
            let elapsed = clock.now - start
            #expect(outcome.received == Frames.errorResponse(2, 201))
            #expect(h.simulator.ledger.snapshot().accepted == 200)
            // About 18 KiB in 512-byte chunks with 5 ms between them cannot take less than ~180 ms.
            #expect(elapsed >= .milliseconds(150))
        }
    }
}

@Suite(.tags(.network), .runs(.network)) struct RepeatableFaultTests {
    /// A doomed connection resets at a seeded notification index: the same seed, the same place.
    @Test func perConnectionResetIsRepeatableForASeed() async throws {
        var plan = FaultPlan()
        plan.seed = 12
        plan.reset = FaultPlan.Reset(probability: 1, scope: .connection, withinNotifications: 8)
        var acceptedCounts: [Int] = []
        for _ in 0..<2 {
            let accepted = try await Harness.run(plan: plan) { h in
                let frames = (1...10).map { Frames.valid(TestTokens.token(UInt32($0)), identifier: UInt32($0)) }
                let outcome = try await h.send(frames)
                #expect(outcome.received.isEmpty && outcome.error != nil)
                try await eventually("one reset counted", timeout: .seconds(10)) {
                    h.simulator.ledger.snapshot().resets == 1
                }
                let snapshot = h.simulator.ledger.snapshot()
                #expect(snapshot.errorResponses.isEmpty)
                #expect(snapshot.accepted < 8)
                // Everything accepted is the prefix before the reset, in order.
                for n in 1...10 {
                    #expect(
                        (h.simulator.ledger.record(for: TestTokens.token(UInt32(n))) != nil) == (n <= snapshot.accepted)
                    )
                }
                return snapshot.accepted
            }
            acceptedCounts.append(accepted)
        }
        #expect(acceptedCounts[0] == acceptedCounts[1])
    }

    @Test func ledgerRefusesTokensBeyondItsMaximumAndCountsThem() async throws {
        let ledger = DeliveryLedger(
            maximumTokens: 12,
            devices: DeviceModel(offline: TokenSet(), offlineFraction: 0, seed: 0, onlineAt: nil),
            clock: ManualClock(now: 0)
        )
        let batch = LedgerBatch(capacity: 64)
        for n in 0..<40 {
            TestTokens.token(UInt32(n)).withUnsafeBytes {
                batch.append(
                    token: $0,
                    identifier: UInt32(n),
                    connection: 1,
                    expiry: 0,
                    priority: 10,
                    command: 2,
                    digest: 1
                )
            }
        }
        ledger.merge(batch, bytes: 4000, accepted: 40, discarded: 0)
        let snapshot = ledger.snapshot()
        // 12 tokens need 16 slots at 3/4 load: 12 recorded, 28 refused, 1 KiB of table.
        #expect(snapshot.distinctTokens == 12 && snapshot.refusedForCapacity == 28)
        #expect(snapshot.tableBytes == 16 * 64)
        #expect(snapshot.accepted == 40 && snapshot.reads == 1 && snapshot.maxNotificationsPerRead == 40)
    }

    @Test func ledgerStartsWithRoomForTheExpectedTokens() {
        let devices = DeviceModel(offline: TokenSet(), offlineFraction: 0, seed: 0, onlineAt: nil)
        let sized = DeliveryLedger(
            maximumTokens: 10_000,
            expectedTokens: 3_000,
            devices: devices,
            clock: ManualClock(now: 0)
        )
        // 3000 tokens need 4096 slots at 3/4 load; the maximum (16384 slots) is not taken up front.
        #expect(sized.snapshot().tableBytes == 4096 * 64)
        let unsized = DeliveryLedger(maximumTokens: 10_000, devices: devices, clock: ManualClock(now: 0))
        #expect(unsized.snapshot().tableBytes == 1024 * 64)
    }
}
