import DequeModule
import Dispatch
import NIOConcurrencyHelpers
import NIOCore
import SalvoRows

/// Where a job's new rows come from, a chunk at a time, in order: `TokenSource`, or a test's own.
protocol HTTP2RowSource: AnyObject, Sendable {
    /// The next rows, at most `maximumRows`; nil when every row has been handed out. May block (it reads files).
    func nextChunk(maximumRows: Int) throws -> [TokenRow]?

    /// The next rows as work items, with their own payloads when the source renders one per row.
    func nextItems(maximumRows: Int) throws -> [HTTP2WorkItem]?

    /// The longest body a row of its own may have (nil: rows have none, the job's payload goes), for flow control.
    var maximumBodyLength: Int? { get }
}

extension HTTP2RowSource {
    func nextItems(maximumRows: Int) throws -> [HTTP2WorkItem]? {
        try self.nextChunk(maximumRows: maximumRows)?.map { HTTP2WorkItem(row: $0) }
    }

    var maximumBodyLength: Int? { nil }
}

extension TokenSource: HTTP2RowSource {
    var maximumBodyLength: Int? { self.payloads?.maximumByteCount }

    /// With `payloads`, the chunk's payloads (rendered as it is taken) are copied into one buffer, and each item's
    /// body is its slice of it (one allocation per chunk, none per row).
    ///
    /// The buffer is whole before the first slice is cut: a slice shares the buffer's storage, so a write after it
    /// would copy the whole buffer (copy on write) — one copy per row, each kept alive by its slice.
    func nextItems(maximumRows: Int) throws -> [HTTP2WorkItem]? {
        guard self.payloads != nil else {
            return try self.nextChunk(maximumRows: maximumRows)?.map { HTTP2WorkItem(row: $0) }
        }
        var fields = RowFields()
        guard let rows = try self.nextChunk(maximumRows: maximumRows, fields: &fields) else { return nil }
        let buffer = fields.withPayloads { ByteBuffer(bytes: $0) }
        var items: [HTTP2WorkItem] = []
        items.reserveCapacity(rows.count)
        var start = 0
        for (index, row) in rows.enumerated() {
            let count = fields.payloadByteCount(index)
            items.append(HTTP2WorkItem(row: row, payload: buffer.getSlice(at: start, length: count)))
            start += count
        }
        return items
    }
}

/// The rows of a job that every connection takes from: new rows from the token source, and rows waiting to be
/// sent again. Knows when the job is finished: the source is exhausted (or the job stopped), nothing waits, and
/// no taken row is still outstanding.
///
/// The source is read ahead on a queue of its own, a chunk at a time, while fewer than a chunk of rows are ready:
/// reading a file may block, and `take` runs on event loops, so it only moves rows that are ready (and asks for
/// the next chunk). A `take` that finds no row ready returns none; the connection looks again soon.
///
/// Rows with payloads of their own (a payload template) are rendered when their chunk is read, so what waits to be
/// sent is bounded by fixed numbers, never by the input or the server's speed: a chunk holds at most
/// `readyByteBudget` bytes at the longest body a row may have (so at most `chunkRows` rows), the next chunk is read
/// only while fewer than a chunk of rows and fewer than `readyByteBudget` bytes are ready, so at most two chunks of
/// rows and twice the budget wait (and the retries given back, which were taken before). A retry waiting for its
/// backoff keeps a copy of its own body, not its whole chunk's buffer.
///
/// Thread-safe: connections on different event loops take a batch and give back a batch of results under one
/// lock each, never one per row. The source is only ever called on `reader`, never under the lock.
final class HTTP2WorkQueue: Sendable {
    private let source: any HTTP2RowSource
    /// The longest body a row of its own may have (nil: every request carries the job's payload).
    let maximumBodyLength: Int?
    /// Rows read from the source at a time.
    let chunkRows: Int
    private let reader = DispatchQueue(label: "salvo.h2.read-ahead")
    private let state = NIOLockedValueBox(State())
    private let finished: EventLoopPromise<Void>

    private struct State {
        var ready = Deque<HTTP2WorkItem>()
        /// The rendered bytes of the rows in `ready`, and the most rows and bytes `ready` ever held.
        var readyBytes = 0
        var peakReady = (rows: 0, bytes: 0)
        var delayed: [HTTP2WorkItem] = []
        var earliestDelayed: NIODeadline = .distantFuture
        /// Rows taken and not yet given back (final or to retry).
        var outstanding = 0
        /// Rows handed to connections to write, retries included.
        var taken = 0
        /// Whether a chunk is being read on `reader`.
        var reading = false
        var sourceExhausted = false
        var stop: HTTP2JobStop?
        /// Rows never sent, or waiting for a retry, when the job stopped.
        var abandoned: [HTTP2WorkItem] = []
        var isFinished = false
        /// Connections that found no row, each woken once when rows may have come (`wakeWhenRowsArrive`).
        var waiting: [ObjectIdentifier: @Sendable () -> Void] = [:]
        /// How many times rows came (read, or given back) or the source ended.
        var arrivals: UInt64 = 0
    }

    /// Rendered bytes a chunk may hold, and that may wait before the next chunk is read: 4 MiB (a thousand rows at
    /// APNs' 4 KiB limit, 4096 of 1 KiB).
    static let defaultReadyByteBudget = 4 << 20

    /// The rendered bytes that may be ready before the next chunk is read.
    let readyByteBudget: Int

    /// Starts reading the first chunk.
    ///
    /// - Parameters:
    ///   - chunkRows: the most rows read at a time; with bodies of their own, fewer when `readyByteBudget` cannot
    ///     hold that many at the longest body.
    ///   - finished: succeeded once, when the job is finished.
    init(
        source: some HTTP2RowSource,
        chunkRows: Int = 4096,
        readyByteBudget: Int = HTTP2WorkQueue.defaultReadyByteBudget,
        finished: EventLoopPromise<Void>
    ) {
        precondition(chunkRows > 0 && readyByteBudget > 0)
        self.source = source
        self.maximumBodyLength = source.maximumBodyLength
        self.readyByteBudget = readyByteBudget
        if let longest = source.maximumBodyLength, longest > 0 {
            self.chunkRows = max(1, min(chunkRows, readyByteBudget / longest))
        } else {
            self.chunkRows = chunkRows
        }
        self.finished = finished
        let read = self.state.withLockedValue { self.startReadingIfLow(&$0) }
        if read { self.reader.async { self.readAhead() } }
    }

    /// Up to `maximum` rows that may be sent at `now`, retries first; empty when none may be sent now. Never
    /// reads the source: it takes ready rows and, when they run low, asks for the next chunk.
    ///
    /// - Parameter maximumBytes: with bodies of their own, the most body bytes the rows taken may have together
    ///   (a connection's send window): rows are taken in order while the next one fits.
    func take(maximum: Int, maximumBytes: Int = Int.max, now: NIODeadline) -> [HTTP2WorkItem] {
        guard maximum > 0 else { return [] }
        let (items, read, finishedNow) = self.state.withLockedValue { state -> ([HTTP2WorkItem], Bool, Bool) in
            guard state.stop == nil, !state.isFinished else { return ([], false, false) }
            if now >= state.earliestDelayed { Self.release(now: now, state: &state) }
            let most = min(maximum, state.ready.count)
            var items: [HTTP2WorkItem] = []
            items.reserveCapacity(most)
            var bytes = 0
            while items.count < most {
                let length = state.ready.first!.payload?.readableBytes ?? 0
                guard length <= maximumBytes - bytes else { break }
                bytes += length
                items.append(state.ready.removeFirst())
            }
            state.readyBytes -= bytes
            state.outstanding += items.count
            state.taken += items.count
            return (items, self.startReadingIfLow(&state), Self.checkFinished(&state))
        }
        if read { self.reader.async { self.readAhead() } }
        if finishedNow { self.finished.succeed() }
        return items
    }

    /// Gives back the answers of a batch: `finals` rows settled, `retries` to send again at their `notBefore`.
    func complete(finals: Int, retries: some Collection<HTTP2WorkItem>) {
        let (finishedNow, wake) = self.state.withLockedValue { state -> (Bool, [@Sendable () -> Void]) in
            state.outstanding -= finals + retries.count
            precondition(state.outstanding >= 0, "more rows given back than taken")
            if state.stop != nil {
                state.abandoned.append(contentsOf: retries)
            } else {
                for item in retries {
                    state.delayed.append(Self.ownBody(item))
                    state.earliestDelayed = min(state.earliestDelayed, item.notBefore)
                }
            }
            // Rows given back may be taken by a connection that found none (at once, or at their time).
            return (Self.checkFinished(&state), retries.isEmpty ? [] : Self.arrived(&state))
        }
        for call in wake { call() }
        if finishedNow { self.finished.succeed() }
    }

    /// How many times rows came so far: read before `take`, for `wakeWhenRowsArrive`.
    var arrivals: UInt64 { self.state.withLockedValue { $0.arrivals } }

    /// Calls `wake` once, from whatever thread, when rows come after `arrivals` was `seen`: new rows were read, rows
    /// were given back, or the source ended. At once if they came since. A connection that found no row registers
    /// here rather than looking again and again (a served job's feed may stay empty for hours), and rows that come
    /// while it registers are never missed. `connection` names it: registering again replaces its earlier call.
    func wakeWhenRowsArrive(
        after seen: UInt64,
        connection: ObjectIdentifier,
        _ wake: @escaping @Sendable () -> Void
    ) {
        let now = self.state.withLockedValue { state -> Bool in
            guard state.arrivals == seen else { return true }
            state.waiting[connection] = wake
            return false
        }
        if now { wake() }
    }

    /// Forgets a connection's call (it closed).
    func forgetWaiting(connection: ObjectIdentifier) {
        self.state.withLockedValue { _ = $0.waiting.removeValue(forKey: connection) }
    }

    /// Rows came: counted, and the connections waiting for them are returned, to be called outside the lock.
    private static func arrived(_ state: inout State) -> [@Sendable () -> Void] {
        state.arrivals &+= 1
        guard !state.waiting.isEmpty else { return [] }
        defer { state.waiting.removeAll(keepingCapacity: true) }
        return Array(state.waiting.values)
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

    /// Whether no row is left to hand out, now or later, but for the retries rows in flight may still give back:
    /// the source is read to its end (or the job stopped), and no row is ready or waits for its backoff. A
    /// connection without streams in flight then closes (`HTTP2ConnectionMachine.noRowsLeft`).
    var noRowsLeft: Bool {
        self.state.withLockedValue { state in
            state.isFinished || state.stop != nil
                || (state.sourceExhausted && !state.reading && state.ready.isEmpty && state.delayed.isEmpty)
        }
    }

    /// Rows that were never sent or were waiting to be sent again when the job stopped. Rows the source had not
    /// handed out yet are not counted here (the job counts them from the source's total).
    var abandoned: Int { self.state.withLockedValue { $0.abandoned.count } }

    /// The rows counted in `abandoned`, in no particular order.
    var abandonedItems: [HTTP2WorkItem] { self.state.withLockedValue { $0.abandoned } }

    /// Rows handed to connections and not given back yet, and every row handed out so far (retries included).
    var counts: (outstanding: Int, taken: Int) { self.state.withLockedValue { ($0.outstanding, $0.taken) } }

    /// Whether the job waits for its source with nothing to send and nothing in flight
    /// (`HTTP2ProgressWatch.waitsForInput`); false once it is finished or stopped.
    var waitsForInput: Bool {
        self.state.withLockedValue { state in
            !state.isFinished && state.stop == nil
                && HTTP2ProgressWatch.waitsForInput(
                    ready: state.ready.count,
                    delayed: state.delayed.count,
                    outstanding: state.outstanding,
                    sourceExhausted: state.sourceExhausted
                )
        }
    }

    /// When the next delayed row becomes ready, if any waits.
    var nextDelayed: NIODeadline? {
        self.state.withLockedValue { $0.delayed.isEmpty ? nil : $0.earliestDelayed }
    }

    /// The rows ready to be taken and their rendered bytes, and the most of each that were ever ready at once.
    var readyCounts: (rows: Int, bytes: Int, peakRows: Int, peakBytes: Int) {
        self.state.withLockedValue { ($0.ready.count, $0.readyBytes, $0.peakReady.rows, $0.peakReady.bytes) }
    }

    /// Waits until no chunk is being read (tests: the rows read ahead are then ready).
    func waitForReadAhead() {
        self.reader.sync {}
    }

    /// Whether to read the next chunk now; marks it as being read.
    private func startReadingIfLow(_ state: inout State) -> Bool {
        guard !state.reading, !state.sourceExhausted, state.stop == nil, state.ready.count < self.chunkRows,
            state.readyBytes < self.readyByteBudget
        else {
            return false
        }
        state.reading = true
        return true
    }

    /// On `reader`: reads chunks until a chunk of rows is ready, the source is exhausted or the job stopped.
    private func readAhead() {
        var again = true
        while again {
            let chunk = Result { try self.source.nextItems(maximumRows: self.chunkRows) }
            let finishedNow: Bool
            var wake: [@Sendable () -> Void] = []
            (again, finishedNow) = self.state.withLockedValue { state -> (Bool, Bool) in
                state.reading = false
                // New rows, the source's end or its failure: a connection waiting for rows looks now.
                let nothingNew = if case .success(let items?) = chunk { items.isEmpty } else { false }
                if !nothingNew { wake = Self.arrived(&state) }
                switch chunk {
                case .success(let items?) where state.stop != nil:
                    state.abandoned.append(contentsOf: items)
                case .success(let items?):
                    state.ready.append(contentsOf: items)
                    for item in items { state.readyBytes += item.payload?.readableBytes ?? 0 }
                    Self.notePeak(&state)
                case .success(nil):
                    state.sourceExhausted = true
                case .failure(let error):
                    state.sourceExhausted = true
                    Self.stop(HTTP2JobStop(reason: nil, message: "\(error)"), state: &state)
                }
                return (self.startReadingIfLow(&state), Self.checkFinished(&state))
            }
            for call in wake { call() }
            if finishedNow { self.finished.succeed() }
        }
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
        for item in due { state.readyBytes += item.payload?.readableBytes ?? 0 }
        Self.notePeak(&state)
        state.delayed = waiting
        state.earliestDelayed = earliest
    }

    private static func stop(_ stop: HTTP2JobStop, state: inout State) {
        guard state.stop == nil else { return }
        state.stop = stop
        state.abandoned.append(contentsOf: state.ready)
        state.abandoned.append(contentsOf: state.delayed)
        state.ready.removeAll()
        state.readyBytes = 0
        state.delayed.removeAll()
        state.earliestDelayed = .distantFuture
    }

    private static func notePeak(_ state: inout State) {
        state.peakReady.rows = max(state.peakReady.rows, state.ready.count)
        state.peakReady.bytes = max(state.peakReady.bytes, state.readyBytes)
    }

    /// A row to wait for its backoff with a body of its own: its chunk's buffer (every row's body) is freed once
    /// the chunk's other rows are answered, however long the retry waits. Retries are few; new rows never copy.
    private static func ownBody(_ item: HTTP2WorkItem) -> HTTP2WorkItem {
        guard let body = item.payload, body.storageCapacity >= 2 * body.readableBytes else { return item }
        var item = item
        var copy = ByteBufferAllocator().buffer(capacity: body.readableBytes)
        copy.writeImmutableBuffer(body)
        item.payload = copy
        return item
    }

    private static func checkFinished(_ state: inout State) -> Bool {
        guard !state.isFinished, state.outstanding == 0 else { return false }
        let drained = state.sourceExhausted && state.ready.isEmpty && state.delayed.isEmpty
        guard drained || state.stop != nil else { return false }
        state.isFinished = true
        return true
    }
}
