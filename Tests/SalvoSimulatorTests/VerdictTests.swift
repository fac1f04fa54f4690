import APNSWire
import Foundation
import NIOCore
import SalvoTestTraits
import Testing

@testable import SalvoSimulator

@Suite(.tags(.network), .runs(.network)) struct VerdictTests {
    @Test func expectedTokensReadPlainListsAndHeaderedCSV() throws {
        let a = TestTokens.hex(TestTokens.token(1))
        let b = TestTokens.hex(TestTokens.token(2)).uppercased()
        let plain = "\(a)\n\n\(b)\r\n\(a)\nnot-a-token\n"
        let parsed = Array(plain.utf8).withUnsafeBytes { ExpectedTokens(csv: $0) }
        #expect(parsed.count == 2 && parsed.repeatedLines == 1 && parsed.badLineCount == 1)
        #expect(parsed.badLines.first?.line == 5)
        let csv = "name,token,lang\nann,\(a),en\nbob,\"\(b)\",fr\n"
        let headered = Array(csv.utf8).withUnsafeBytes { ExpectedTokens(csv: $0) }
        #expect(headered.count == 2 && headered.badLineCount == 0)
        #expect(headered.tokens.contains(TestTokens.token(2)))
    }

    @Test func aLedgerWithoutLaterCountersReadsThemAsZero() throws {
        // A ledger written before `refusedStreams` (and a remote simulator of another version) still decodes; a
        // counter of the wrong type is still an error.
        let old = Data(#"{"accepted":7,"distinctTokens":6,"errorResponses":{"8":1},"connectionsRefused":{}}"#.utf8)
        let ledger = try JSONDecoder().decode(LedgerSnapshot.self, from: old)
        #expect(ledger.accepted == 7 && ledger.distinctTokens == 6 && ledger.errors(8) == 1)
        #expect(ledger.refusedStreams == 0 && ledger.notificationsPerReadHistogram.isEmpty)
        var full = LedgerSnapshot()
        full.refusedStreams = 3
        full.connectionsRefused = ["tls": 2]
        #expect(try JSONDecoder().decode(LedgerSnapshot.self, from: JSONEncoder().encode(full)) == full)
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(LedgerSnapshot.self, from: Data(#"{"accepted":"seven"}"#.utf8))
        }
    }

    @Test func verdictOnACraftedRun() async throws {
        // Expected: 1…6. Token 5 is invalid per plan; 6 is never sent; 3 is sent twice; 9 is unexpected.
        var plan = FaultPlan()
        plan.invalidTokens = [TestTokens.hex(TestTokens.token(5))]
        try await Harness.run(plan: plan) { h in
            let first = try await h.send([
                Frames.valid(TestTokens.token(1), identifier: 1), Frames.valid(TestTokens.token(2), identifier: 2),
                Frames.valid(TestTokens.token(3), identifier: 3), Frames.valid(TestTokens.token(5), identifier: 5),
                Frames.valid(TestTokens.token(4), identifier: 4),
            ])
            #expect(first.received == Frames.errorResponse(8, 5))
            let second = try await h.send([
                Frames.valid(TestTokens.token(3), identifier: 3), Frames.valid(TestTokens.token(4), identifier: 4),
                Frames.valid(TestTokens.token(9), identifier: 9),
                Frames.framed(token: nil, payload: Frames.payload, identifier: 10),
            ])
            #expect(second.received == Frames.errorResponse(2, 10))
            let expected = ExpectedTokens(try (1...6).map { try DeviceToken(bytes: TestTokens.token(UInt32($0))) })
            let verdict = h.simulator.verdict(expected: expected)
            #expect(verdict.expected == 6)
            #expect(verdict.deliveredOnce == 3)  // 1, 2, 4
            #expect(verdict.deliveredMoreThanOnce == 1)
            #expect(
                verdict.deliveredMoreThanOnceTokens == [.init(token: TestTokens.hex(TestTokens.token(3)), count: 2)]
            )
            #expect(
                verdict.neverDelivered == 1 && verdict.neverDeliveredTokens == [TestTokens.hex(TestTokens.token(6))]
            )
            #expect(verdict.invalidNeverDelivered == 1)
            #expect(verdict.invalidNeverDeliveredTokens == [TestTokens.hex(TestTokens.token(5))])
            #expect(verdict.unexpected == 1 && verdict.unexpectedTokens == [TestTokens.hex(TestTokens.token(9))])
            #expect(!verdict.passed)
            #expect(verdict.summary.contains("never delivered:                     1"))
            let digest = Verdict.digestHex(Frames.payload.withUnsafeBytes { TokenHash.digest($0) })
            let shown = verdict.displays.first { $0.token == TestTokens.hex(TestTokens.token(1)) }
            #expect(
                shown == .init(token: TestTokens.hex(TestTokens.token(1)), state: .displayed, payloadDigest: digest)
            )
            let json = try JSONEncoder().encode(verdict)
            #expect(try JSONDecoder().decode(Verdict.self, from: json) == verdict)
        }
    }

    @Test func tokensOfAnotherAppAreRefusedOverHTTP2OnlyAndTheVerdictKnows() async throws {
        // Tokens 2 and 3 belong to another app. The binary gateway has no status for that and accepts 2; 3 is
        // never sent, as a sender that was told DeviceTokenNotForTopic over HTTP/2 leaves it.
        var plan = FaultPlan()
        plan.foreignTokens = [TestTokens.hex(TestTokens.token(2)), TestTokens.hex(TestTokens.token(3))]
        try await Harness.run(plan: plan) { h in
            let outcome = try await h.send([
                Frames.valid(TestTokens.token(1), identifier: 1), Frames.valid(TestTokens.token(2), identifier: 2),
                Frames.framed(token: nil, payload: Frames.payload, identifier: 9),
            ])
            #expect(outcome.received == Frames.errorResponse(2, 9))
            let expected = ExpectedTokens(try (1...3).map { try DeviceToken(bytes: TestTokens.token(UInt32($0))) })
            let verdict = h.simulator.verdict(expected: expected)
            #expect(verdict.deliveredOnce == 2 && verdict.invalidButDelivered == 0)
            #expect(verdict.invalidNeverDeliveredTokens == [TestTokens.hex(TestTokens.token(3))])
            #expect(verdict.neverDelivered == 0)
            #expect(verdict.passed, "\(verdict.summary)")
        }
    }

    @Test func offlineDeviceShowsTheNewestStoredNotificationWhenItComesBack() async throws {
        let clock = ManualClock(now: 1_800_000_000)
        var plan = FaultPlan()
        let device = TestTokens.token(7)
        plan.devices = FaultPlan.Devices(offlineTokens: [TestTokens.hex(device)], onlineAfterSeconds: 60)
        try await Harness.run(plan: plan, clock: clock) { h in
            let older = Array(#"{"aps":{"alert":"first"}}"#.utf8)
            let newer = Array(#"{"aps":{"alert":"second"}}"#.utf8)
            let gone = Array(#"{"aps":{"alert":"expires"}}"#.utf8)
            let outcome = try await h.send([
                Frames.valid(device, identifier: 1, payload: older, expiry: 1_800_001_000),
                Frames.valid(device, identifier: 2, payload: newer, expiry: 1_800_001_000),
                Frames.valid(TestTokens.token(8), identifier: 3, payload: gone, expiry: 1_800_000_010),
                Frames.framed(token: nil, payload: Frames.payload, identifier: 4),
            ])
            #expect(outcome.received == Frames.errorResponse(2, 4))
            let expected = ExpectedTokens([try DeviceToken(bytes: device)])
            let waiting = h.simulator.verdict(expected: expected).displays
            let newerDigest = Verdict.digestHex(newer.withUnsafeBytes { TokenHash.digest($0) })
            #expect(waiting == [.init(token: TestTokens.hex(device), state: .stored, payloadDigest: newerDigest)])
            clock.advance(by: 60)
            let verdict = h.simulator.verdict(expected: expected)
            #expect(
                verdict.displays == [
                    .init(token: TestTokens.hex(device), state: .displayed, payloadDigest: newerDigest)
                ]
            )
            #expect(verdict.ledger.coalesced == 1 && verdict.ledger.deliveredLater == 1)
            #expect(verdict.deliveredMoreThanOnce == 1)  // accepted twice by the gateway, displayed once
        }
    }
}
