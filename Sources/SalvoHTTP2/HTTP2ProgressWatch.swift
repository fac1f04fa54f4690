import NIOCore
import SalvoRows

/// When an HTTP/2 job that gets no answers gives up: `giveUpAfter` (`--give-up-seconds`) after the last answer
/// any connection of the job read, whatever the connections are waiting for — a stream the server never allows
/// (`SETTINGS_MAX_CONCURRENT_STREAMS` 0), a GOAWAY before any stream, streams refused one after another, SETTINGS
/// that never come after TLS, a flow-control window that never opens, or streams never answered. Connect failures
/// are one way among these, not the only one: a server that accepts connections and then lets nothing through stalls
/// a job as surely as one that is gone.
///
/// An answer is progress whatever it says (200, a rejection, a 429): the server is processing requests. A retry the
/// server asked to wait for (`Retry-After`) extends the mark to when the row is due, so that a job parked by the
/// server's own request is not given up on while it waits. A refused stream, a reset, a PING answer or a connect
/// is not progress.
/// Nor is a job given up on while it waits for its own input with nothing to send and nothing in flight
/// (`waitsForInput`): the server has no request to answer.
///
/// Pure: time comes from the caller (a fake clock in tests).
struct HTTP2ProgressWatch: Sendable {
    /// `.zero`: never give up.
    let giveUpAfter: TimeAmount
    /// The last answer, or when the last retry the server asked for is due; the job's start at first.
    private(set) var progressUntil: NIODeadline

    init(giveUpAfter: TimeAmount, now: NIODeadline) {
        self.giveUpAfter = giveUpAfter
        self.progressUntil = now
    }

    /// A connection read answers (or was told to wait) up to `until`.
    mutating func progressed(until: NIODeadline) {
        self.progressUntil = max(self.progressUntil, until)
    }

    /// Whether the job waits for its own input rather than for the server: no row is ready, none waits for a retry,
    /// none is in flight, and the source has rows still to come (a resume reading past rows already settled, a slow
    /// read-ahead). No request can be answered then, so the wait is not the server's.
    static func waitsForInput(ready: Int, delayed: Int, outstanding: Int, sourceExhausted: Bool) -> Bool {
        ready == 0 && delayed == 0 && outstanding == 0 && !sourceExhausted
    }

    /// A connection looked for rows at `now` and found none: while the job `waitsForInput`, the wait counts as
    /// progress.
    mutating func foundNoRows(waitingForInput: Bool, now: NIODeadline) {
        if waitingForInput { self.progressed(until: now) }
    }

    /// Whether the job has gone `giveUpAfter` without progress.
    func isStalled(now: NIODeadline) -> Bool {
        self.giveUpAfter > .zero && now - self.progressUntil >= self.giveUpAfter
    }

    /// Why the job stops when it is stalled, with what the connections saw (the last few connection errors).
    func stop(connectionErrors: [String], host: String, port: Int) -> HTTP2JobStop {
        let seconds = self.giveUpAfter.nanoseconds / 1_000_000_000
        let seen = connectionErrors.suffix(3).joined(separator: "; ")
        return HTTP2JobStop(
            reason: nil,
            message: "no request was answered by \(host):\(port) for \(seconds) s (--give-up-seconds)"
                + (seen.isEmpty ? "" : ": \(seen)") + "; the job stopped, and every row without an answer is listed "
                + "as unsettled"
        )
    }
}

/// Reconnects of one HTTP/2 job to a server that lets nothing through: a connection that ends (GOAWAY, a close,
/// a failed connect) without a single answer counts as fruitless, and each fruitless one in a row doubles the wait
/// before the job's next connect, from the reconnect policy's `initialDelay` up to its `maximumDelay`, with jitter
/// (a wait drawn from the upper half of the doubled ceiling, so that it grows whatever the draw). An answer on any
/// connection starts the count again. Per job rather than per connection slot: slots that each backed off on their
/// own would together reconnect as often as there are slots. Fruitless reconnects are also kept `minimumInterval`
/// apart job-wide.
///
/// Pure: time and the random draw come from the caller.
struct HTTP2ReconnectPacer: Sendable {
    let policy: ReconnectPolicy
    /// Connections in a row that ended without an answer.
    private(set) var fruitless = 0
    private var nextSlot: NIODeadline

    init(policy: ReconnectPolicy, now: NIODeadline) {
        self.policy = policy
        self.nextSlot = now
    }

    /// A connection ended (or a connect failed): `answered` when it read at least one answer.
    mutating func connectionEnded(answered: Bool) {
        self.fruitless = answered ? 0 : self.fruitless + 1
    }

    /// An answer came on some connection: the server processes requests again.
    mutating func answered() {
        self.fruitless = 0
    }

    /// The wait before the next fruitless reconnect: 0 when the last connection was answered, else the doubled
    /// ceiling's upper half, drawn with `random` in [0, 1).
    func backoff(random: Double) -> TimeAmount {
        guard self.fruitless > 0 else { return .zero }
        let initial = UInt64(max(1, self.policy.initialDelay.nanoseconds))
        let maximum = max(initial, self.policy.maximumDelay.nanoseconds)
        let ceiling = backoffCeiling(initial: initial, maximum: maximum, attempt: self.fruitless)
        let draw = 0.5 + 0.5 * min(max(random, 0), 1)
        return .nanoseconds(Int64(clamping: UInt64(Double(ceiling) * draw)))
    }

    /// When a slot may connect: after a fruitless connection, after the backoff and `minimumInterval` after the
    /// job's previous connect; after an answered one, now (the slot keeps its own floor), so that replacing every
    /// connection after a GOAWAY does not queue the last one behind all the others. Takes that time.
    mutating func nextConnect(now: NIODeadline, random: Double) -> NIODeadline {
        let at = self.fruitless > 0 ? max(now + self.backoff(random: random), self.nextSlot) : now
        self.nextSlot = max(
            self.nextSlot,
            at + .nanoseconds(Int64(clamping: self.policy.minimumInterval.nanoseconds))
        )
        return at
    }
}
