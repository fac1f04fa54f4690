import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import SalvoEngine
import Testing

@testable import SalvoHTTP2

@Suite struct WorkQueueTests {
    @Test func retriesWaitForTheirTimeAndGoFirstAndTheJobFinishesOnlyWhenAllIsBack() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try TokenFile(count: 10, seed: 31, in: folder)
        let loop = EmbeddedEventLoop()
        let finished = loop.makePromise(of: Void.self)
        let done = NIOLockedValueBox(false)
        finished.futureResult.whenSuccess { done.withLockedValue { $0 = true } }
        let queue = HTTP2WorkQueue(source: file.source, chunkRows: 4, finished: finished)
        let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

        let first = queue.take(maximum: 3, now: start)
        #expect(first.map(\.row.line) == [2, 3, 4])
        var retry = first[1]
        retry.attempts = 1
        retry.notBefore = start + .milliseconds(50)
        queue.complete(finals: 2, retries: [retry])
        // Not yet due: new rows come.
        #expect(queue.take(maximum: 2, now: start + .milliseconds(10)).map(\.row.line) == [5, 6])
        #expect(queue.nextDelayed == start + .milliseconds(50))
        // Due: the retry goes before the remaining new rows.
        let next = queue.take(maximum: 2, now: start + .milliseconds(50))
        #expect(next.map(\.row.line) == [3, 7])
        #expect(next[0].attempts == 1)
        let rest = queue.take(maximum: 100, now: start + .milliseconds(60))
        #expect(rest.map(\.row.line) == [8, 9, 10, 11])
        #expect(queue.take(maximum: 100, now: start + .milliseconds(70)).isEmpty)
        loop.run()
        #expect(!done.withLockedValue { $0 })
        queue.complete(finals: 2 + 2 + 4, retries: [])
        loop.run()
        #expect(done.withLockedValue { $0 })
        #expect(queue.isDone)
    }

    @Test func aStopHandsOutNothingMoreAndFinishesWhenTheRowsInFlightAreBack() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try TokenFile(count: 10, seed: 32, in: folder)
        let loop = EmbeddedEventLoop()
        let finished = loop.makePromise(of: Void.self)
        let done = NIOLockedValueBox(false)
        finished.futureResult.whenSuccess { done.withLockedValue { $0 = true } }
        let queue = HTTP2WorkQueue(source: file.source, chunkRows: 4, finished: finished)
        let now = NIODeadline.now()
        let taken = queue.take(maximum: 3, now: now)
        #expect(taken.count == 3)
        queue.stop(HTTP2JobStop(reason: "BadCertificate", message: "refused"))
        queue.stop(HTTP2JobStop(reason: "Other", message: "later"))
        #expect(queue.take(maximum: 3, now: now).isEmpty)
        loop.run()
        #expect(!done.withLockedValue { $0 })
        queue.complete(finals: 2, retries: [taken[2]])
        loop.run()
        #expect(done.withLockedValue { $0 })
        #expect(queue.stopped?.reason == "BadCertificate")
    }
}
