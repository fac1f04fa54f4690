import DequeModule
import NIOConcurrencyHelpers
import NIOCore
import SalvoEngine

/// The rows of a job that every connection takes from: new rows from the token source, and rows waiting to be
/// sent again. Knows when the job is finished: the source is exhausted (or the job stopped), nothing waits, and
/// no taken row is still outstanding.
///
/// Thread-safe: connections on different event loops take a batch and give back a batch of results under one
/// lock each, never one per row.
final class HTTP2WorkQueue: Sendable {
    private let source: TokenSource
    private let chunkRows: Int
    private let state = NIOLockedValueBox(State())
    private let finished: EventLoopPromise<Void>

    private struct State {
        var ready = Deque<HTTP2WorkItem>()
        var delayed: [HTTP2WorkItem] = []
        var earliestDelayed: NIODeadline = .distantFuture
        /// Rows taken and not yet given back (final or to retry).
        var outstanding = 0
        var sourceExhausted = false
        var stop: HTTP2JobStop?
        /// Rows never sent, or waiting for a retry, when the job stopped.
        var abandoned = 0
        var isFinished = false
    }

    /// - Parameter finished: succeeded once, when the job is finished.
    init(source: TokenSource, chunkRows: Int = 4096, finished: EventLoopPromise<Void>) {
        self.source = source
        self.chunkRows = chunkRows
        self.finished = finished
    }

    /// Up to `maximum` rows that may be sent at `now`, retries first; empty when none may be sent now.
    func take(maximum: Int, now: NIODeadline) -> [HTTP2WorkItem] {
        guard maximum > 0 else { return [] }
        let (items, finishedNow) = self.state.withLockedValue { state -> ([HTTP2WorkItem], Bool) in
            guard state.stop == nil, !state.isFinished else { return ([], false) }
            if now >= state.earliestDelayed { Self.release(now: now, state: &state) }
            if state.ready.count < maximum && !state.sourceExhausted {
                do {
                    if let rows = try self.source.nextChunk(maximumRows: max(self.chunkRows, maximum)) {
                        state.ready.append(contentsOf: rows.lazy.map { HTTP2WorkItem(row: $0) })
                    } else {
                        state.sourceExhausted = true
                    }
                } catch {
                    state.sourceExhausted = true
                    Self.stop(HTTP2JobStop(reason: nil, message: "\(error)"), state: &state)
                }
            }
            let count = min(maximum, state.ready.count)
            var items: [HTTP2WorkItem] = []
            items.reserveCapacity(count)
            for _ in 0..<count { items.append(state.ready.removeFirst()) }
            state.outstanding += count
            return (items, Self.checkFinished(&state))
        }
        if finishedNow { self.finished.succeed() }
        return items
    }

    /// Gives back the answers of a batch: `finals` rows settled, `retries` to send again at their `notBefore`.
    func complete(finals: Int, retries: some Collection<HTTP2WorkItem>) {
        let finishedNow = self.state.withLockedValue { state -> Bool in
            state.outstanding -= finals + retries.count
            precondition(state.outstanding >= 0, "more rows given back than taken")
            if state.stop != nil {
                state.abandoned += retries.count
            } else {
                for item in retries {
                    state.delayed.append(item)
                    state.earliestDelayed = min(state.earliestDelayed, item.notBefore)
                }
            }
            return Self.checkFinished(&state)
        }
        if finishedNow { self.finished.succeed() }
    }

    /// Stops the job: nothing more is handed out; rows in flight still give their answers. The first stop wins.
    func stop(_ stop: HTTP2JobStop) {
        let finishedNow = self.state.withLockedValue { state -> Bool in
            Self.stop(stop, state: &state)
            return Self.checkFinished(&state)
        }
        if finishedNow { self.finished.succeed() }
    }

    /// Whether the job is finished or stopped (connections then close rather than reconnect).
    var isDone: Bool { self.state.withLockedValue { $0.isFinished || $0.stop != nil } }

    /// The stop, if the job stopped.
    var stopped: HTTP2JobStop? { self.state.withLockedValue { $0.stop } }

    /// Rows that were never sent or were waiting to be sent again when the job stopped. Rows the source had not
    /// handed out yet are not counted here (the job counts them from the source's total).
    var abandoned: Int { self.state.withLockedValue { $0.abandoned } }

    /// When the next delayed row becomes ready, if any waits.
    var nextDelayed: NIODeadline? {
        self.state.withLockedValue { $0.delayed.isEmpty ? nil : $0.earliestDelayed }
    }

    private static func release(now: NIODeadline, state: inout State) {
        var earliest = NIODeadline.distantFuture
        var waiting: [HTTP2WorkItem] = []
        waiting.reserveCapacity(state.delayed.count)
        // Due rows go in front of new rows, in the order they were given back.
        var due: [HTTP2WorkItem] = []
        for item in state.delayed {
            if item.notBefore <= now {
                due.append(item)
            } else {
                waiting.append(item)
                earliest = min(earliest, item.notBefore)
            }
        }
        state.ready.insert(contentsOf: due, at: 0)
        state.delayed = waiting
        state.earliestDelayed = earliest
    }

    private static func stop(_ stop: HTTP2JobStop, state: inout State) {
        guard state.stop == nil else { return }
        state.stop = stop
        state.abandoned += state.ready.count + state.delayed.count
        state.ready.removeAll()
        state.delayed.removeAll()
        state.earliestDelayed = .distantFuture
    }

    private static func checkFinished(_ state: inout State) -> Bool {
        guard !state.isFinished, state.outstanding == 0 else { return false }
        let drained = state.sourceExhausted && state.ready.isEmpty && state.delayed.isEmpty
        guard drained || state.stop != nil else { return false }
        state.isFinished = true
        return true
    }
}
