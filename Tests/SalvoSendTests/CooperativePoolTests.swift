import APNSWire
import Foundation
import NIOConcurrencyHelpers
import SalvoRows
import SalvoSend
import SalvoTestSupport
import SalvoTestTraits
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The library's blocking work leaves Swift's cooperative pool free: `BulkSend.prepare` is made to block (its journal's
/// lock is held, and `--wait-for-journal` polls for it) while a task on the pool ticks. The lock is let go only after
/// the ticks, or at `bound` at the latest (so that a failing test ends). With the pool held to one thread
/// (`SALVO_TEST_ONE_POOL_THREAD=1`, as CI runs the whole suite), a prepare that blocked its pool thread keeps the
/// ticker from running at all until the bound lets the lock go: the test fails.
///
/// The bound is not a measure of speed: the ticker's five 20 ms pauses need the one thread five times, and in a whole
/// run the other tests hold it between those turns (13.8 s once, when every suite ran at once). Only a prepare that
/// blocks the thread keeps the ticks from coming before it. It runs only with the pool held: on a free pool a blocked
/// prepare takes one thread and the ticker another, and the test could not fail.
@Suite(
    .tags(.process),
    .runs(.process),
    .serialized,
    .enabled(
        if: CooperativePool.isHeldToOneThread,
        "needs the pool held to one thread: SALVO_TEST_ONE_POOL_THREAD=1"
    )
) struct CooperativePoolTests {
    /// Lets go of a held journal lock when asked, or at `bound` at the latest (so that a failing test ends).
    final class Holder: Sendable {
        private let released = NIOLockedValueBox<Bool>(false)
        private let ask = DispatchSemaphore(value: 0)

        init(_ held: JournalLockTests.Held, bound: Duration) {
            let seconds = Double(bound.components.seconds)
            let thread = Thread { [ask, released] in
                _ = ask.wait(timeout: .now() + seconds)
                released.withLockedValue { $0 = true }
                held.release()
            }
            thread.start()
        }

        var hasReleased: Bool { self.released.withLockedValue { $0 } }
        func release() { self.ask.signal() }
    }

    @Test func aPrepareThatBlocksLeavesThePoolFree() async throws {
        let (folder, input) = try JournalManifestTests.threeTokens("salvo-pool")
        let directory = folder.appendingPathComponent("journal").path
        let holder = Holder(JournalLockTests.Held(try JournalLock.acquire(directory)), bound: .seconds(90))
        var request = try JournalManifestTests.journaledRequest(input, directory: directory)
        // Longer than the bound: a prepare that blocked the thread must still be waiting when the bound lets go.
        request.journal?.waitSeconds = 180
        async let prepared = BulkSend.prepare(request)
        var ticks = 0
        for _ in 0..<5 {
            try await Task.sleep(for: .milliseconds(20))
            ticks += 1
        }
        let tickedWhileBlocked = !holder.hasReleased
        holder.release()
        let send = try await prepared
        #expect(ticks == 5)
        #expect(tickedWhileBlocked, "the pool's other tasks waited for the blocked prepare")
        #expect(send.journal?.manifest.runs == 1)
    }
}
