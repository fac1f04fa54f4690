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
/// lock is held, and `--wait-for-journal` polls for it) while a task on the pool ticks. The ticks must all come while
/// the prepare is still blocked. With the pool held to one thread (`SALVO_TEST_ONE_POOL_THREAD=1`, as CI runs this
/// suite), a prepare that blocked its pool thread keeps the ticker from running until the lock is let go at the
/// bound: the test fails.
///
/// Not `.takesATurn`: a suite in its turn runs on Dispatch threads, and this one must run on the global executor. It
/// runs only with the pool held (CI runs it so, by itself): in the whole suite, the other suites' synchronous tests
/// hold the pool's threads for seconds at a time (13.8 s once), which is what the test measures, not `prepare`.
@Suite(
    .tags(.process),
    .runs(.process),
    .serialized,
    .enabled(
        if: ProcessInfo.processInfo.environment["SALVO_TEST_ONE_POOL_THREAD"] == "1",
        "needs the pool held to one thread and the process to itself: SALVO_TEST_ONE_POOL_THREAD=1, --filter"
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
        #expect(CooperativePool.isHeldToOneThread, "the pool hold was asked for and is not installed")
        let (folder, input) = try JournalManifestTests.threeTokens("salvo-pool")
        let directory = folder.appendingPathComponent("journal").path
        let holder = Holder(JournalLockTests.Held(try JournalLock.acquire(directory)), bound: .seconds(10))
        var request = try JournalManifestTests.journaledRequest(input, directory: directory)
        request.journal?.waitSeconds = 30
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
