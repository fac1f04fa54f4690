import APNSWire
import NIOCore
import NIOPosix
import SalvoHTTP2
import SalvoRows
import SalvoTestTraits
import Testing

@testable import SalvoService

/// The pure parts of the service: the job's answers as states, the waits for outcomes, API keys.
@Suite(.tags(.pure), .runs(.pure)) struct ServiceValuesTests {
    @Test func theJobsEndsOfARowBecomeStates() {
        let row = { (line: Int, outcome: UnsettledRow.Outcome) in
            UnsettledRow(token: "", file: "", line: line, outcome: outcome)
        }
        let resend = [
            AnswerOutcomes.unsettled(row(1, .unsent), onUncertain: .resend, at: 5),
            AnswerOutcomes.unsettled(row(2, .unanswered), onUncertain: .resend, at: 5),
            AnswerOutcomes.unsettled(row(3, .uncertain), onUncertain: .resend, at: 5),
        ]
        #expect(resend.map(\.state) == [.queued, .queued, .uncertain])
        #expect(resend.map(\.uncertainResend) == [false, true, false])
        let report = AnswerOutcomes.unsettled(row(2, .unanswered), onUncertain: .report, at: 5)
        #expect(report.state == .uncertain && report.reason == "Unanswered")
        #expect(NotificationState.allCases.filter(\.isFinal) == [.delivered, .refused, .expired, .uncertain])
    }

    @Test func aWaitEndsWhenItsIDsAreFinalOrItsTimeIsUp() async {
        let waiters = OutcomeWaiters()
        let timers = LoopTimers(loop: MultiThreadedEventLoopGroup.singleton.next())
        // Final before the wait asked the store: no wait at all.
        await waiters.wait(for: ["a"], timeout: .seconds(60), timers: timers) { [] }
        // Final while the wait asked the store: not missed.
        await waiters.wait(for: ["b", "c"], timeout: .seconds(60), timers: timers) {
            waiters.settled(["b", "c"])
            return ["b", "c"]
        }
        // Final later.
        async let later: Void = waiters.wait(for: ["d"], timeout: .seconds(60), timers: timers) { ["d"] }
        _ = try? await eventually("the wait is registered", timeout: .seconds(10)) { waiters.count == 1 }
        waiters.settled(["d"])
        await later
        // Never final: the timeout ends it.
        await waiters.wait(for: ["e"], timeout: .milliseconds(20), timers: timers) { ["e"] }
        #expect(waiters.count == 0)
        // After the service's timers closed, a wait ends at once rather than on a loop that is gone.
        timers.close()
        await waiters.wait(for: ["f"], timeout: .seconds(600), timers: timers) { ["f"] }
        #expect(waiters.count == 0)
    }

    @Test func aKeyIsShownOnceAndStoredAsItsHash() {
        let (key, record) = APIKeys.make(name: "backend", now: 7)
        #expect(key.hasPrefix("salvo_") && key.count == 49)
        #expect(record.hash == APIKeys.hash(key) && record.hash.count == 32)
        #expect(record.id.hasPrefix("key_") && record.name == "backend")
        #expect(APIKeys.make(name: "x", now: 7).key != key)
    }

    @Test func anIDIsAVersion7UUIDOfTheTimeAndTheGeneratorsBits() {
        var fixed = FixedBits(values: [0x0123_4567_89ab_cdef, 0xfedc_ba98_7654_3210])
        // The milliseconds big-endian first, then the generator's bits, with the version (7) and variant (10) bits set.
        #expect(
            NotificationService.uuid(milliseconds: 0x0191_2345_6789, using: &fixed)
                == "01912345-6789-7def-9032-547698badcfe"
        )
        var system = SystemRandomNumberGenerator()
        let ids = (0..<100).map { _ in NotificationService.uuid(milliseconds: 1_764_000_000_000, using: &system) }
        #expect(Set(ids).count == 100)
        for id in ids {
            #expect(APNSRequestHeaders.isCanonicalUUID(id), "\(id)")
            let characters = Array(id)
            #expect(id.hasPrefix("019ab697-e800-7"), "\(id)")
            #expect(characters[14] == "7" && "89ab".contains(characters[19]), "\(id)")
        }
        // Ids of a later millisecond sort after, whatever their random bits: the store's index grows at its end.
        let earlier = NotificationService.uuid(milliseconds: 1_764_000_000_000, using: &system)
        let later = NotificationService.uuid(milliseconds: 1_764_000_000_001, using: &system)
        #expect(earlier < later)
    }

    @Test func idempotencyKeysAreVisibleASCII() {
        #expect(NotificationService.isValidIdempotencyKey("order-42"))
        #expect(!NotificationService.isValidIdempotencyKey(""))
        #expect(!NotificationService.isValidIdempotencyKey("has space"))
        #expect(!NotificationService.isValidIdempotencyKey(String(repeating: "k", count: 256)))
    }
}

/// A generator that gives the values it was made with, in turn.
private struct FixedBits: RandomNumberGenerator {
    var values: [UInt64]
    var drawn = 0

    mutating func next() -> UInt64 {
        defer { self.drawn += 1 }
        return self.values[self.drawn % self.values.count]
    }
}
