import APNSWire
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import SalvoRows
import SalvoTestTraits
import Testing

@testable import SalvoHTTP2

@Suite(.tags(.pure), .runs(.pure)) struct WorkQueueTests {
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

        // The source is read ahead off the caller's thread: wait for it before each take, so the batches are exact.
        queue.waitForReadAhead()
        let first = queue.take(maximum: 3, now: start)
        #expect(first.map(\.row.line) == [2, 3, 4])
        var retry = first[1]
        retry.attempts = 1
        retry.notBefore = start + .milliseconds(50)
        queue.complete(finals: 2, retries: [retry])
        // Not yet due: new rows come.
        queue.waitForReadAhead()
        #expect(queue.take(maximum: 2, now: start + .milliseconds(10)).map(\.row.line) == [5, 6])
        #expect(queue.nextDelayed == start + .milliseconds(50))
        // Due: the retry goes before the remaining new rows.
        queue.waitForReadAhead()
        let next = queue.take(maximum: 2, now: start + .milliseconds(50))
        #expect(next.map(\.row.line) == [3, 7])
        #expect(next[0].attempts == 1)
        queue.waitForReadAhead()
        let rest = queue.take(maximum: 100, now: start + .milliseconds(60))
        #expect(rest.map(\.row.line) == [8, 9, 10, 11])
        queue.waitForReadAhead()
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
        queue.waitForReadAhead()
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

    @Test func takeNeverReadsTheSourceItselfAndTheJobStillFinishesWithTheLastAnswer() throws {
        let loop = EmbeddedEventLoop()
        let finished = loop.makePromise(of: Void.self)
        let done = NIOLockedValueBox(false)
        finished.futureResult.whenSuccess { done.withLockedValue { $0 = true } }
        let source = SlowRowSource(rows: 10, delay: .seconds(1))
        let queue = HTTP2WorkQueue(source: source, chunkRows: 4, finished: finished)
        let caller = pthread_self()
        let clock = ContinuousClock()
        var taken: [HTTP2WorkItem] = []
        // Ten rows in chunks of four: a few takes a chunk, and a wait for each of the three reads.
        for _ in 0..<30 where taken.count < 10 {
            let began = clock.now
            let batch = queue.take(maximum: 3, now: .now())
            // The source needs a second a chunk; a take that read it, or waited for the read, would take that
            // long (the rest of the second is room for a loaded machine's scheduling).
            #expect(clock.now - began < .milliseconds(900))
            taken += batch
            // Nothing ready: the next chunk is being read on the queue's own thread. Wait for that read, outside take.
            if batch.isEmpty { queue.waitForReadAhead() }
        }
        #expect(taken.map(\.row.line) == Array(1...10), "every row once, in order")
        #expect(source.calls >= 3)
        #expect(!source.wasCalled(on: caller), "the source is read on the queue's own thread, never in take")
        queue.waitForReadAhead()
        #expect(queue.take(maximum: 3, now: .now()).isEmpty)
        loop.run()
        #expect(!done.withLockedValue { $0 }, "rows are outstanding")
        queue.complete(finals: 10, retries: [])
        loop.run()
        #expect(done.withLockedValue { $0 })
    }

    @Test func aConnectionThatFoundNoRowIsCalledOnceWhenRowsComeAndNeverBefore() async throws {
        let loop = EmbeddedEventLoop()
        let finished = loop.makePromise(of: Void.self)
        let source = GatedRowSource()
        let queue = HTTP2WorkQueue(source: source, chunkRows: 4, finished: finished)
        let calls = NIOLockedValueBox([String]())
        let connection = ObjectIdentifier(source)
        let seen = queue.arrivals
        #expect(queue.take(maximum: 4, now: .now()).isEmpty)
        queue.wakeWhenRowsArrive(after: seen, connection: connection) { calls.withLockedValue { $0.append("first") } }
        // Registering again replaces the connection's earlier call: one call per connection, however often it looked.
        queue.wakeWhenRowsArrive(after: seen, connection: connection) { calls.withLockedValue { $0.append("again") } }
        #expect(calls.withLockedValue { $0 }.isEmpty, "no row came")
        source.open(rows: 3)
        #expect(try await eventually("the call", timeout: .seconds(30)) { !calls.withLockedValue { $0 }.isEmpty })
        #expect(queue.take(maximum: 4, now: .now()).map(\.row.line) == [1, 2, 3])
        // Rows came after `seen`: a connection that registers late is called at once, not left waiting.
        queue.wakeWhenRowsArrive(after: seen, connection: connection) { calls.withLockedValue { $0.append("late") } }
        #expect(calls.withLockedValue { $0 } == ["again", "late"])
        // Rows given back count as rows that came.
        let before = queue.arrivals
        queue.wakeWhenRowsArrive(after: before, connection: connection) { calls.withLockedValue { $0.append("back") } }
        let retry = HTTP2WorkItem(row: TokenRow(token: try DeviceToken(bytes: Array(repeating: 1, count: 32)), line: 3))
        queue.complete(finals: 2, retries: [retry])
        #expect(calls.withLockedValue { $0 } == ["again", "late", "back"])
        source.end()
        #expect(try await eventually("the source's end", timeout: .seconds(30)) { queue.arrivals > before + 1 })
        // The row given back is the last: once it is answered, the job is finished.
        let last = queue.take(maximum: 4, now: .now())
        #expect(last.map(\.row.line) == [3])
        queue.complete(finals: last.count, retries: [])
        let done = NIOLockedValueBox(false)
        finished.futureResult.whenSuccess { done.withLockedValue { $0 = true } }
        loop.run()
        #expect(done.withLockedValue { $0 })
    }

    @Test func aSourceThatFailsWhileReadingAheadStopsTheJobWithItsError() throws {
        let loop = EmbeddedEventLoop()
        let finished = loop.makePromise(of: Void.self)
        let done = NIOLockedValueBox(false)
        finished.futureResult.whenSuccess { done.withLockedValue { $0 = true } }
        let queue = HTTP2WorkQueue(source: FailingRowSource(), chunkRows: 4, finished: finished)
        queue.waitForReadAhead()
        let taken = queue.take(maximum: 2, now: .now())
        #expect(taken.map(\.row.line) == [1, 2])
        // Two rows left: the next chunk is read, and fails.
        queue.waitForReadAhead()
        #expect(queue.stopped?.message.contains("the file went away") == true)
        #expect(queue.abandoned == 2, "the rows read but never handed out")
        #expect(queue.take(maximum: 2, now: .now()).isEmpty)
        loop.run()
        #expect(!done.withLockedValue { $0 }, "two rows are in flight")
        queue.complete(finals: 2, retries: [])
        loop.run()
        #expect(done.withLockedValue { $0 })
    }
}

/// A source whose second chunk fails, as a file that cannot be read any more would.
private final class FailingRowSource: HTTP2RowSource {
    private let calls = NIOLockedValueBox(0)

    func nextChunk(maximumRows: Int) throws -> [TokenRow]? {
        let call = self.calls.withLockedValue { value -> Int in
            value += 1
            return value
        }
        guard call == 1 else { throw InputError(file: "tokens.csv", line: nil, message: "the file went away") }
        let token = try DeviceToken(bytes: [UInt8](repeating: 7, count: 32))
        return (1...maximumRows).map { TokenRow(token: token, line: $0) }
    }
}

/// A source of `rows` made-up rows that takes `delay` for every chunk and notes the threads that called it.
private final class SlowRowSource: HTTP2RowSource {
    private let rows: Int
    private let delay: Duration
    private let state = NIOLockedValueBox((next: 1, threads: [pthread_t]()))

    init(rows: Int, delay: Duration) {
        self.rows = rows
        self.delay = delay
    }

    var calls: Int { self.state.withLockedValue { $0.threads.count } }

    func wasCalled(on thread: pthread_t) -> Bool {
        self.state.withLockedValue { $0.threads.contains { pthread_equal($0, thread) != 0 } }
    }

    func nextChunk(maximumRows: Int) throws -> [TokenRow]? {
        let first = self.state.withLockedValue { state -> Int in
            state.threads.append(pthread_self())
            return state.next
        }
        usleep(
            UInt32(self.delay.components.attoseconds / 1_000_000_000_000 + self.delay.components.seconds * 1_000_000)
        )
        guard first <= self.rows else { return nil }
        let last = min(self.rows, first + maximumRows - 1)
        self.state.withLockedValue { $0.next = last + 1 }
        return (first...last).map { line in
            var bytes = [UInt8](repeating: 0, count: 32)
            bytes[0] = UInt8(line)
            return TokenRow(token: try! DeviceToken(bytes: bytes), line: line)
        }
    }
}

/// A source that hands out nothing until the test opens it for some rows, waiting (on the queue's read-ahead thread)
/// as a service's feed does.
private final class GatedRowSource: HTTP2RowSource {
    private let state = NIOLockedValueBox((next: 1, open: 0, ended: false))
    private let gate = DispatchSemaphore(value: 0)

    func open(rows: Int) {
        self.state.withLockedValue { $0.open += rows }
        self.gate.signal()
    }

    func end() {
        self.state.withLockedValue { $0.ended = true }
        self.gate.signal()
    }

    func nextChunk(maximumRows: Int) throws -> [TokenRow]? {
        // Bounded: a read that finds nothing returns none, and the queue reads again.
        _ = self.gate.wait(timeout: .now() + .milliseconds(100))
        return self.state.withLockedValue { state -> [TokenRow]? in
            if state.ended { return nil }
            let count = min(state.open, maximumRows)
            state.open -= count
            defer { state.next += count }
            return (0..<count).map { offset in
                var bytes = [UInt8](repeating: 0, count: 32)
                bytes[0] = UInt8(state.next + offset)
                return TokenRow(token: try! DeviceToken(bytes: bytes), line: state.next + offset)
            }
        }
    }
}
