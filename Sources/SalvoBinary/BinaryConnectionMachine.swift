import APNSWire
import DequeModule
import SalvoRows

/// The protocol decisions of one binary-interface connection after another (a shard's): which rows to write and
/// when to flush, when to write the barrier, what an error response or a close settles, when to reconnect, finish
/// or give up. A value with no I/O: the shard feeds it events (opened, room to write, flushed, error response,
/// tick, closed) with the time, and carries out the `Action` it returns. Tested without sockets.
///
/// Owns the rows in the shard's hands (`pending`, oldest first; discarded rows go back to the front), the sent
/// window, the flight limit, the reconnect streak and the row outcomes. Per-connection facts live in the
/// `State.open` case and vanish with the connection.
struct BinaryConnectionMachine {
    enum State {
        case idle
        case connecting
        case open(Open)
        /// The gateway answered an error (the window is settled); the connection is going away.
        case answered
        case finished
        case failed
    }

    /// What belongs to one live connection.
    struct Open {
        /// The barrier is written: nothing more goes on this connection.
        var barrierWritten = false
        /// Something written on this connection was settled (confirmed or presumed).
        var settledAny = false
        /// Encoded and not yet flushed, and since when.
        var unflushedBytes = 0
        var unflushedRows = 0
        var unflushedSince: UInt64?
        var flushScheduled = false
        /// The peer said something that is not an error response: its close counts as a failure.
        var misbehaved = false
        /// When the barrier was written.
        var barrierAt: UInt64?
        /// Ciphertext the connection has written, and what the peer's TCP acknowledged, since when.
        var ciphertextEnd = 0
        var acknowledged = 0
        var acknowledgedSince: UInt64 = 0
        /// Rows presumed on this connection: an answer that proves them (an error response for a later row, the
        /// barrier's) makes them confirmed.
        var presumed = 0
        /// When the last batch was written, and when a row last settled on this connection (0: never).
        var lastFlushAt: UInt64 = 0
        var lastSettledAt: UInt64 = 0
    }

    private(set) var state = State.idle
    let configuration: Configuration
    // Internal rather than private for the extensions in the type's other files (`+Isolation`); only the machine
    // changes them.
    var outcomes: RowOutcomes
    var window: SentWindow
    var pending: Deque<TokenRow> = []
    private var exhausted = false
    /// The input failed after the rows read so far (`sourceFailed`): those are sent and settled as at the end of the
    /// input, then the machine fails with this instead of finishing.
    private var inputFailure: JobError?
    /// Rows every error halves and every settled batch doubles, between `minimumFlight` and the window's
    /// capacity: everything written after a failed row is discarded and written again, so when errors come
    /// every few hundred rows a large flight only multiplies the waste.
    private(set) var flightLimit: Int
    static let minimumFlight = 256
    /// Processing errors (status 1) per row, by its place in the input.
    private var processingErrors: [RowReference: Int] = [:]
    /// Connections in a row that settled nothing (a connect that failed counts too).
    private(set) var failures = 0
    /// Of those, drops that narrowed isolated rows (`suspect`): they count toward giving up (a gateway that drops
    /// everything is not bisected forever: the job still ends `giveUpAfter` after its last progress) but not
    /// toward the backoff, since finding a row takes one connection per halving, asked for by us.
    private var narrowingDrops = 0
    private var lastConnectAt: UInt64 = 0
    /// Why the last connection ended, for the report's reconnect causes: an error response's reason name
    /// (`InvalidToken`, `Shutdown`, …), or what happened without one.
    private var endCause = ReconnectCause.closedWithoutAnswer
    /// When the job (this shard, or another through `noteProgress`) last settled a row; 0 before the start.
    private(set) var lastProgressAt: UInt64 = 0
    private var generator: SplitMix64
    /// The gateway's answer time, smoothed: from writing a batch to the error response naming one of its rows,
    /// or from writing the barrier to its answer. 0 until measured.
    private(set) var answerLatency: UInt64 = 0
    /// When deliberate closes (a barrier before the end of the job) happened in the last minute.
    private var deliberateCloses: Deque<UInt64> = []
    /// Rows of the last connection that dropped with no answer, sent again first: when the next connection drops
    /// before they settle, they are the suspects (`isolation`).
    var carried = 0
    var isolation: Isolation?

    /// The connect budget: barriers before the end of the job, which close a healthy connection on purpose, at
    /// most this many a minute per shard (reconnects that errors force are not counted: the gateway chose them).
    static let deliberateClosesPerMinute = 6
    /// How long a full flight waits for an answer before it grows, until the answer time is measured.
    static let initialQuiet: UInt64 = 100_000_000
    /// A suspect row sent alone is left uncertain after dropping this many connections.
    static let poisonDrops = 2

    init(configuration: Configuration, files: [String], seed: UInt64, journal: RowJournal? = nil) {
        self.configuration = configuration
        self.outcomes = RowOutcomes(onUncertain: configuration.onUncertain, files: files, journal: journal)
        self.window = SentWindow(capacity: configuration.windowCapacity)
        self.window.journal = journal
        self.flightLimit = configuration.windowCapacity
        self.generator = SplitMix64(seed: seed)
    }

    /// Whether every row this shard took is settled and nothing more will come.
    var isDone: Bool { self.exhausted && self.pending.isEmpty && self.window.isEmpty && self.isolation == nil }

    /// How long a full flight waits for an error before it grows: a little longer than the gateway takes to
    /// answer (an error for a row in the flight would have come by then), at least 2 ms, at most the settle time.
    var flightQuiet: UInt64 {
        guard self.answerLatency > 0 else { return min(Self.initialQuiet, self.configuration.settleNanoseconds) }
        let quiet = self.answerLatency + self.answerLatency / 4
        return min(max(quiet, 2_000_000), max(self.configuration.settleNanoseconds, 2_000_000))
    }

    // MARK: - Connections

    /// Opens the first connection (or finishes, when there is nothing to send).
    mutating func start(now: UInt64) -> Action {
        guard case .idle = self.state else { return .impossible(.startWhileRunning) }
        if self.isDone {
            return self.finishNow()
        }
        self.state = .connecting
        self.lastConnectAt = now
        if self.lastProgressAt == 0 { self.lastProgressAt = now }
        return .connect
    }

    /// The job settled rows at `time` (another shard's progress counts: the gateway is alive).
    mutating func noteProgress(at time: UInt64) {
        self.lastProgressAt = max(self.lastProgressAt, time)
    }

    /// Whether failures in a row have lasted long enough, with no progress, to give up.
    private func givesUp(now: UInt64) -> Bool {
        let since = now > self.lastProgressAt ? now - self.lastProgressAt : 0
        return self.configuration.reconnect.givesUp(after: self.failures, sinceProgress: since)
    }

    /// "N connects in a row failed and no row settled for S s", for messages.
    private func streak(_ what: String, now: UInt64) -> String {
        let since = now > self.lastProgressAt ? now - self.lastProgressAt : 0
        return "\(self.failures) \(what) in a row and no row settled for \(since / 1_000_000_000) s"
    }

    /// The last connection ended before a row was written on it, closed by the gateway: a gateway that paces
    /// connects accepts and closes at once, so the job's connects are spaced further apart (`ConnectPacer`).
    var lastClosedOnConnect: Bool { self.endCause == ReconnectCause.closedOnConnect }

    /// A reconnect delay ran out.
    mutating func reconnectDue(now: UInt64) -> Action {
        switch self.state {
        case .idle: break
        // A delay that ran out after the shard stopped: nothing to do.
        case .finished, .failed: return .none
        case .connecting, .open, .answered: return .impossible(.reconnectWhileConnected)
        }
        self.outcomes.reconnected(cause: self.endCause)
        return self.start(now: now)
    }

    /// A connect succeeded. After the shard stopped the connection is not wanted (the driver closes it).
    mutating func opened() -> Action {
        switch self.state {
        case .connecting: break
        case .finished, .failed: return .none
        case .idle, .open, .answered: return .impossible(.openedWithoutConnect)
        }
        self.window.restart()
        self.state = .open(Open())
        return .write
    }

    mutating func connectFailed(_ failure: ConnectFailure, now: UInt64) -> Action {
        switch self.state {
        case .connecting: break
        case .finished, .failed: return .none
        case .idle, .open, .answered: return .impossible(.connectFailedWithoutConnect)
        }
        self.state = .idle
        switch failure {
        case .credentials(let message):
            return self.fail(.credentials, "the TLS handshake with the gateway failed: \(message)")
        case .hopeless(let message):
            return self.fail(.unreachable, "cannot reach \(self.configuration.gateway): \(message)")
        case .unreachable(let message):
            self.endCause = ReconnectCause.connectFailed
            self.failures += 1
            if self.givesUp(now: now) {
                return self.fail(
                    .unreachable,
                    "cannot reach \(self.configuration.gateway) (\(self.streak("failed connects", now: now))): "
                        + message
                )
            }
            return self.reconnectAction(now: now)
        }
    }

    /// The connection ended. Without an answer, the rows written on it are uncertain (they follow the policy)
    /// and the rows that never reached the kernel go back to the queue.
    ///
    /// - Parameters:
    ///   - sentThrough: ciphertext bytes the connection handed to the kernel.
    ///   - acknowledged: ciphertext bytes the gateway's TCP had acknowledged at the end (nil: unknown).
    ///   - resolve: reads a row's token again (the window keeps only where rows are).
    mutating func closed<Failure: Error>(
        _ cause: CloseCause,
        sentThrough: Int,
        acknowledged: Int? = nil,
        now: UInt64,
        resolve: (SentWindow.Journaled) throws(Failure) -> DeviceToken
    ) -> Action {
        switch self.state {
        case .open(let open):
            var settlement: SentWindow.Settlement
            // A probe's verdict counts only the rows the gateway's TCP acknowledged: a reset before the rest
            // arrived says nothing of them (they count as never written, and are probed again).
            let probing = self.isolation?.probeWritten == true
            let through = probing ? min(sentThrough, acknowledged ?? sentThrough) : sentThrough
            do {
                settlement = try self.window.abandon(sentThrough: through, resolve: resolve)
            } catch {
                return self.fail(.input, "\(error)")
            }
            var remote = false
            if case .remote = cause { remote = true }
            let narrowed = self.suspect(&settlement, dropped: remote, presumedHere: open.presumed)
            self.settle(settlement)
            switch cause {
            case .local: self.endCause = open.misbehaved ? ReconnectCause.silent : ReconnectCause.closedLocally
            case .remote, .certificateRefused:
                // A gateway that pacing connects closes right after accepting, before anything was written.
                self.endCause =
                    open.ciphertextEnd == 0 ? ReconnectCause.closedOnConnect : ReconnectCause.closedWithoutAnswer
            }
            if case .certificateRefused(let message) = cause {
                return self.fail(.credentials, "the gateway refused the client certificate: \(message)")
            }
            // A connection that settled something starts a new streak; one that settled nothing (the gateway
            // keeps dropping us) lengthens it, backing off further and eventually giving up. A drop that narrowed
            // isolated rows lengthens the streak but not the backoff (`narrowingDrops`).
            if cause != .local || open.misbehaved {
                let drops = narrowed ? 1 : 0
                self.failures = open.settledAny ? 1 : self.failures + 1
                self.narrowingDrops = open.settledAny ? drops : self.narrowingDrops + drops
            }
        case .answered:
            self.failures = 0
            self.narrowingDrops = 0
            self.carried = 0
        case .finished, .failed:
            return .none
        case .idle, .connecting:
            return .impossible(.closedWithoutConnection)
        }
        self.state = .idle
        if self.isDone {
            return self.finishNow()
        }
        if self.givesUp(now: now) {
            let reason: String
            switch cause {
            case .local: reason = "closed locally"
            case .remote(let message), .certificateRefused(let message): reason = message
            }
            return self.fail(
                .unreachable,
                "\(self.configuration.gateway) closed connections without settling anything "
                    + "(\(self.streak("connections", now: now))): \(reason)"
            )
        }
        return self.reconnectAction(now: now)
    }

    /// Stops taking rows (the job was asked to stop): rows not yet written are dropped (the job counts them not
    /// sent); what is in flight settles as usual, with the barrier.
    mutating func interrupt() -> Action {
        for row in self.pending { self.outcomes.leave(row, .unsent) }
        self.pending.removeAll()
        self.leaveSuspects()
        self.exhausted = true
        switch self.state {
        case .open:
            return .write
        case .idle, .connecting:
            return self.finishNow()
        case .answered, .finished, .failed:
            return .none
        }
    }

    /// Stops at once (another shard failed): nothing more is decided.
    mutating func stop() {
        self.state = .failed
    }

    /// The job ends here (stopped, or failed): every row still in the shard's hands is listed as unsettled —
    /// written and unanswered, or never written. Nothing is left to settle afterwards.
    mutating func leaveUnsettled<Failure: Error>(resolve: (SentWindow.Journaled) throws(Failure) -> DeviceToken) {
        if !self.window.isEmpty, let settlement = try? self.window.abandon(sentThrough: .max, resolve: resolve) {
            for entry in settlement.uncertain where !entry.isBarrier { self.outcomes.leave(entry.row, .unanswered) }
            for entry in settlement.unsent where !entry.isBarrier { self.outcomes.leave(entry.row, .unsent) }
        }
        for row in self.pending { self.outcomes.leave(row, .unsent) }
        self.pending.removeAll()
        self.leaveSuspects()
    }

    private mutating func reconnectAction(now: UInt64) -> Action {
        let delay = self.configuration.reconnect.delay(
            failures: self.failures > 0 ? max(self.failures - self.narrowingDrops, 1) : 0,
            sinceLastConnect: now &- self.lastConnectAt,
            sinceProgress: now > self.lastProgressAt ? now - self.lastProgressAt : 0,
            random: self.generator.nextUnit()
        )
        return .reconnect(afterNanoseconds: delay)
    }

    private mutating func fail(_ code: JobError.Code, _ message: String) -> Action {
        self.state = .failed
        return .fail(JobError(code, message))
    }

    // MARK: - Rows

    mutating func rowsArrived(_ rows: some Collection<TokenRow>) {
        self.pending.append(contentsOf: rows)
    }

    mutating func sourceExhausted() {
        self.exhausted = true
    }

    /// A row already written could not be rendered again (its file changed): the job stops at once, as the frames
    /// in the connection's buffer can no longer be trusted.
    mutating func sourceFailed(_ message: String) -> Action {
        self.fail(.input, message)
    }

    /// The source could not be read on: the job cannot go on past the rows it has. Those already read are written
    /// and everything in flight settles as at the end of the input (the barrier), so that what the gateway took is
    /// counted, not left uncertain; then the machine fails with the input's error.
    mutating func inputFailed(_ message: String) -> Action {
        if self.inputFailure == nil { self.inputFailure = JobError(.input, message) }
        self.exhausted = true
        switch self.state {
        case .open:
            return .write
        case .idle, .connecting:
            return self.isDone ? self.finishNow() : .none
        case .answered, .finished, .failed:
            return .none
        }
    }

    /// The end of the shard's rows: finished, or failed with the input's error when the input ended in one.
    private mutating func finishNow() -> Action {
        if let failure = self.inputFailure {
            self.state = .failed
            return .fail(failure)
        }
        self.state = .finished
        return .finish
    }

    // MARK: - Writing

    /// Hands rows to `encode` (with their identifiers) while the flight and the connection take more, and says
    /// what to do next. The hot path: per row, a pop, a journal entry and the caller's encoding.
    ///
    /// - Parameters:
    ///   - queuedBytes: ciphertext the connection holds unsent.
    ///   - wallSeconds: seconds since 1970, for the expiry.
    mutating func write(
        queuedBytes: Int,
        now: UInt64,
        wallSeconds: Int,
        encode: (TokenRow, UInt32) -> Void
    ) -> Action {
        let frameByteCount = self.configuration.frameByteCount
        return self.writeSized(queuedBytes: queuedBytes, now: now, wallSeconds: wallSeconds) { row, identifier in
            encode(row, identifier)
            return frameByteCount
        }
    }

    /// `write(queuedBytes:now:wallSeconds:encode:)` for frames whose size varies per row (a payload per row):
    /// `encode` returns the size of the frame it encoded, and the batch counts real sizes.
    mutating func writeSized(
        queuedBytes: Int,
        now: UInt64,
        wallSeconds: Int,
        encode: (TokenRow, UInt32) -> Int
    ) -> Action {
        guard case .open(var open) = self.state, !open.barrierWritten else { return .none }
        if self.isolation != nil {
            let action = self.writeProbe(&open, queuedBytes: queuedBytes, now: now, encode: encode)
            self.state = .open(open)
            return action
        }
        let configuration = self.configuration
        let expired = configuration.expiry != 0 && UInt64(max(0, wallSeconds)) > UInt64(configuration.expiry)
        let limit = min(self.flightLimit, configuration.windowCapacity)
        if queuedBytes < configuration.queueLimitBytes {
            while self.window.count < limit {
                guard let row = self.pending.popFirst() else {
                    if !self.exhausted {
                        self.state = .open(open)
                        return .needRows
                    }
                    break
                }
                if expired {
                    self.outcomes.expire(row)
                    continue
                }
                let size = encode(row, self.window.record(row))
                if open.unflushedSince == nil { open.unflushedSince = now }
                open.unflushedBytes += size
                open.unflushedRows += 1
                if open.unflushedBytes >= configuration.flush.bytes {
                    self.state = .open(open)
                    return .flush
                }
            }
        }

        let drained = self.exhausted && self.pending.isEmpty
        let flightFull = self.window.count >= limit
        let action: Action
        if (drained || flightFull) && open.unflushedBytes > 0 {
            action = .flush
        } else if drained && self.window.isEmpty {
            return self.finishNow()
        } else if drained && !self.window.isEmpty && configuration.command != .simple {
            // The end: a barrier settles everything written, at the cost of one close, rather than waiting for
            // rows to be presumed (which the last rows, within the gateway's receive buffer, never are).
            open.barrierWritten = true
            open.barrierAt = now
            action = .writeBarrier(identifier: self.window.record(SentWindow.barrierRow))
        } else if flightFull && !self.window.isEmpty {
            action = self.fullFlight(&open, limit: limit, now: now)
            if action == .write {
                self.state = .open(open)
                return self.writeSized(queuedBytes: queuedBytes, now: now, wallSeconds: wallSeconds, encode: encode)
            }
        } else if open.unflushedBytes > 0 {
            if configuration.flush.shouldFlush(
                pendingBytes: open.unflushedBytes,
                oldestPendingAt: open.unflushedSince,
                now: now
            ) {
                action = .flush
            } else if !open.flushScheduled,
                let delay = configuration.flush.delayUntilDue(oldestPendingAt: open.unflushedSince, now: now)
            {
                open.flushScheduled = true
                action = .scheduleFlush(afterNanoseconds: delay)
            } else {
                action = .none
            }
        } else {
            action = .none
        }
        self.state = .open(open)
        return action
    }

    /// A full flight, before the end of the job, with everything flushed. Closing a healthy connection on purpose is
    /// what the push service calls an attack pattern, so no barrier here:
    /// - below the window's capacity (errors shrank the flight), the flight doubles once it has been quiet for
    ///   `flightQuiet` — an error for one of its rows would have come by then — and the rows stay unsettled until an
    ///   answer proves them or they are presumed;
    /// - at the capacity, rows are presumed as the gateway reads them (`tick`); only a window nothing settles for
    ///   twice the settle time (one too small to outgrow the gateway's receive buffer) gets a barrier, within the
    ///   connect budget (`deliberateClosesPerMinute`).
    private mutating func fullFlight(_ open: inout Open, limit: Int, now: UInt64) -> Action {
        let quietSince = max(open.lastFlushAt, open.lastSettledAt)
        if limit < self.configuration.windowCapacity {
            let due = quietSince &+ self.flightQuiet
            guard now >= due else { return self.wake(&open, at: due, now: now) }
            self.flightLimit = min(self.configuration.windowCapacity, 2 * self.flightLimit)
            return .write
        }
        guard self.configuration.command != .simple else { return .none }
        let due = quietSince &+ 2 * self.configuration.settleNanoseconds
        guard now >= due else { return self.wake(&open, at: due, now: now) }
        let minute: UInt64 = 60_000_000_000
        while let first = self.deliberateCloses.first, now >= first &+ minute { self.deliberateCloses.removeFirst() }
        if self.deliberateCloses.count >= Self.deliberateClosesPerMinute, let first = self.deliberateCloses.first {
            return self.wake(&open, at: first &+ minute, now: now)
        }
        self.deliberateCloses.append(now)
        open.barrierWritten = true
        open.barrierAt = now
        return .writeBarrier(identifier: self.window.record(SentWindow.barrierRow))
    }

    /// Asks to be woken (`flushDue`) at `due`, unless a wake is already asked for.
    private func wake(_ open: inout Open, at due: UInt64, now: UInt64) -> Action {
        guard !open.flushScheduled else { return .none }
        open.flushScheduled = true
        return .scheduleFlush(afterNanoseconds: max(due &- now, 1))
    }

    /// The encoded batch went to the connection.
    ///
    /// - Parameters:
    ///   - bytes: plaintext bytes written.
    ///   - ciphertextStart: the connection's ciphertext offset before the batch.
    ///   - ciphertextEnd: the offset after it.
    ///   - now: when (0: not said).
    mutating func flushed(bytes: Int, ciphertextStart: Int, ciphertextEnd: Int, now: UInt64 = 0) {
        guard case .open(var open) = self.state else { return }
        self.window.markWritten(ciphertextStart: ciphertextStart, ciphertextEnd: ciphertextEnd, at: now)
        if now > 0 { open.lastFlushAt = now }
        // Only rows count as notifications (the barrier does not).
        self.outcomes.wrote(bytes: bytes, notifications: open.unflushedRows)
        open.ciphertextEnd = ciphertextEnd
        open.unflushedBytes = 0
        open.unflushedRows = 0
        open.unflushedSince = nil
        self.state = .open(open)
    }

    /// A scheduled flush is due.
    mutating func flushDue() -> Action {
        guard case .open(var open) = self.state else { return .none }
        open.flushScheduled = false
        self.state = .open(open)
        return .write
    }

    // MARK: - Settling

    /// The gateway answered an error: it closes the connection and discards what followed.
    ///
    /// - Parameter now: when it arrived (0: not said), for the answer time.
    mutating func received<Failure: Error>(
        _ response: ErrorResponse,
        now: UInt64 = 0,
        resolve: (SentWindow.Journaled) throws(Failure) -> DeviceToken
    ) -> Action {
        guard case .open(let open) = self.state else { return .none }
        self.state = .answered
        self.endCause = response.status.reasonName
        let settlement: SentWindow.Settlement
        do {
            settlement = try self.window.apply(response, resolve: resolve)
        } catch {
            return self.fail(.input, "\(error)")
        }
        // The barrier's answer is a close we asked for, not the gateway's refusal of a row.
        let barrier = settlement.failed?.isBarrier == true
        if barrier { self.endCause = ReconnectCause.barrier }
        let writtenAt = barrier ? open.barrierAt ?? 0 : settlement.failedWrittenAt
        if now > 0, writtenAt > 0, now > writtenAt {
            let sample = now - writtenAt
            self.answerLatency = self.answerLatency == 0 ? sample : (3 * self.answerLatency + sample) / 4
        }
        self.settle(settlement, accepted: settlement.confirmed + open.presumed)
        if barrier {
            self.probeSettled()
        } else if let isolation = self.isolation {
            // The gateway answers: rows are refused with a status, not by dropping the connection.
            self.pending.prepend(contentsOf: isolation.suspects)
            self.isolation = nil
        }
        // The answer names a row of this connection: every row written before it was accepted, the presumed ones
        // too.
        if !settlement.unknownIdentifier { self.outcomes.upgradePresumed(open.presumed) }
        return .close
    }

    /// The peer said something that is not an error response: it is not an APNs binary gateway (an HTTP/2 port,
    /// another service), and retrying cannot help. The rows on the connection stay unsettled.
    mutating func receivedGarbage(_ bytes: String = "") -> Action {
        guard case .open = self.state else { return .none }
        let sample = bytes.isEmpty ? "" : " (\(bytes))"
        return self.fail(
            .unreachable,
            "\(self.configuration.gateway) answered bytes that are not an APNs error response\(sample): "
                + "is it the binary interface's port (2195, or the simulator's gateway port)?"
        )
    }

    /// Presumes accepted what the gateway has certainly read at least the settle time ago.
    ///
    /// What the gateway has read is bounded below by what its TCP acknowledged less the most its receive buffer
    /// can hold: acknowledged bytes it has not read sit in that buffer. (Command 0 cannot be confirmed by a
    /// barrier, so it presumes from the acknowledgement alone, or it could never finish a job smaller than that
    /// buffer.)
    ///
    /// - Parameter acknowledged: ciphertext the peer's TCP acknowledged.
    mutating func tick(acknowledged: Int, now: UInt64) -> Action {
        guard case .open(var open) = self.state, now > self.configuration.settleNanoseconds else { return .none }
        if acknowledged != open.acknowledged || open.acknowledgedSince == 0 {
            open.acknowledged = acknowledged
            open.acknowledgedSince = now
            self.state = .open(open)
        }
        if let action = self.timeOut(&open, now: now) { return action }
        var consumed = acknowledged
        if self.configuration.command != .simple { consumed -= self.configuration.peerReceiveBufferBytes }
        if consumed > 0 { self.window.observe(consumedThrough: consumed, at: now) }
        let wasFull = self.window.count >= min(self.flightLimit, self.configuration.windowCapacity)
        let presumed = self.window.presume(readBefore: now - self.configuration.settleNanoseconds)
        guard presumed > 0 else { return .none }
        self.outcomes.presume(presumed)
        open.presumed += presumed
        open.settledAny = true
        open.lastSettledAt = now
        self.lastProgressAt = now
        self.state = .open(open)
        self.flightLimit = min(self.configuration.windowCapacity, 2 * self.flightLimit)
        if self.isolation != nil {
            self.probeSettled()
            return .write
        }
        if self.isDone { return self.finishNow() }
        return wasFull || self.configuration.command == .simple ? .write : .none
    }

    /// Leaves a gateway that has been silent too long: a barrier with no answer, or written bytes it does not
    /// read. Rows its TCP acknowledged at least the settle time ago are presumed (it read them and said nothing);
    /// the rest follow the uncertain policy when the connection is gone.
    private mutating func timeOut(_ open: inout Open, now: UInt64) -> Action? {
        let timeout = max(self.configuration.answerTimeoutNanoseconds, self.configuration.settleNanoseconds)
        let quietSince = max(open.barrierAt ?? 0, open.acknowledgedSince)
        let waiting = open.barrierAt != nil || open.ciphertextEnd > open.acknowledged
        guard waiting, now > quietSince, now - quietSince >= timeout else { return nil }
        self.window.observe(consumedThrough: open.acknowledged, at: open.acknowledgedSince)
        let presumed = self.window.presume(readBefore: now - self.configuration.settleNanoseconds)
        if presumed > 0 {
            self.outcomes.presume(presumed)
            open.presumed += presumed
            open.settledAny = true
            self.lastProgressAt = now
        }
        if open.barrierAt != nil { self.outcomes.barrierUnanswered() }
        open.misbehaved = true
        self.state = .open(open)
        return .abort
    }

    ///
    /// - Parameter accepted: rows the connection carried before the failed one (its spacing from the last error).
    private mutating func settle(_ settlement: SentWindow.Settlement, accepted: Int = .max) {
        var requeue: [TokenRow] = []
        self.outcomes.confirm(settlement.confirmed)
        let failedRow = settlement.failed.flatMap { $0.isBarrier ? nil : $0.row }
        if settlement.failed?.isBarrier == true {
            self.flightLimit = min(self.configuration.windowCapacity, 2 * self.flightLimit)
        } else if failedRow != nil && settlement.status != .noErrors {
            // Each error wastes what was written after the failed row: halve the flight while errors come, and at
            // once down to twice their spacing, so that a dirty list does not resend a whole window per error.
            let spaced = accepted > self.flightLimit / 4 ? self.flightLimit / 2 : 2 * accepted
            self.flightLimit = max(Self.minimumFlight, min(self.configuration.windowCapacity, spaced))
        }
        if let row = failedRow, let status = settlement.status {
            if status == .noErrors {
                // "No errors encountered" refuses nothing: whether the gateway kept the row is unknown.
                if self.outcomes.uncertain(CollectionOfOne(row)) { requeue.append(row) }
            } else if status == .processingError,
                self.processingErrors[row.reference, default: 0] < self.configuration.processingErrorRetries
            {
                self.processingErrors[row.reference, default: 0] += 1
                self.outcomes.resend()
                requeue.append(row)
            } else {
                self.outcomes.reject(row, status: Int(status.rawValue), reason: status.reasonName)
            }
        }
        if settlement.unknownIdentifier { self.outcomes.unmatchedAnswer() }
        let resend = settlement.resend.lazy.filter { !$0.isBarrier }.map(\.row)
        self.outcomes.resend(resend.count)
        requeue.append(contentsOf: resend)
        let uncertain = settlement.uncertain.filter { !$0.isBarrier }
        if !uncertain.isEmpty && self.outcomes.uncertain(uncertain.map(\.row)) {
            requeue.append(contentsOf: uncertain.map(\.row))
        }
        // Never left the process: written again, neither resent nor uncertain.
        requeue.append(contentsOf: settlement.unsent.lazy.filter { !$0.isBarrier }.map(\.row))
        // Before anything new, in the order they were first written.
        self.pending.prepend(contentsOf: requeue)
    }
}
