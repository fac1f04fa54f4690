import NIOCore
import SalvoRows

/// The decisions of one connection slot (`HTTP2ConnectionSlot`): when to connect, when a connection that ended is
/// replaced and after how long, which of the gateway's addresses to try first, and what to close when the slot
/// stops. A value that holds no channel and reads no clock: every event comes with the time and what the slot must
/// know of the job, and returns the action its driver performs.
///
/// The backoff is the larger of the policy's (`ReconnectPolicy`: failed connects in a row, the floor between
/// connects, cut to end at the give-up deadline after the job's last progress) and the job's pacing of fruitless
/// connections (`HTTP2ReconnectPacer`). A stalled job is not the slot's to judge: before a reconnect the driver asks
/// the job (`Action.reconnectUnlessStalled`) and only then calls `reconnect(now:pacedUntil:)`.
struct HTTP2SlotMachine {
    enum State: Equatable {
        /// Made, not started.
        case idle
        /// A connect is under way.
        case connecting
        /// The slot's connection is open (others it replaced may still be finishing their streams).
        case open(ObjectIdentifier)
        /// No connection of the slot's own: a connect is scheduled.
        case waiting
        /// No connection of the slot's own and none scheduled: the job had no rows for it, is done, or stalled.
        case resting
        /// Stopped: nothing connects again.
        case stopped
    }

    enum Action: Equatable {
        case none
        /// Open a connection: its generator's seed, the address to try first, and whether it replaces one (counted
        /// as a reconnect).
        case connect(seed: UInt64, addressTurn: Int, replacing: Bool)
        /// The connection opened after the slot stopped: close it.
        case close
        /// Ask the job whether it has stalled (its watchdog stops it then); if not, take the job's pacing for a
        /// connection that ended (`answered`: it read an answer) with `jitter`, and call `reconnect`.
        case reconnectUnlessStalled(answered: Bool, jitter: Double)
        /// Connect again after `delay` (call `connectNow` then).
        case scheduleConnect(after: TimeAmount)
    }

    /// What a slot knows of its job when it decides.
    struct Job: Equatable {
        /// Rows the job has settled: a change is progress, which the give-up deadline counts from.
        var settled: Int
        /// The job has no more work (finished or stopped): nothing connects again.
        var isDone: Bool
    }

    private(set) var state = State.idle
    private let policy: ReconnectPolicy
    /// Failed connects (and connections closed before they were ready) in a row.
    private(set) var failures = 0
    /// The job's settled rows when this slot last saw them change, and when.
    private var progressMark: (settled: Int, at: NIODeadline)
    private var lastConnect: NIODeadline?
    /// Which of the gateway's addresses to try first (`RotatingResolver`): moved on by each failed connect.
    private(set) var addressTurn: Int
    /// Jitter for reconnect delays, and the seeds of the slot's connections.
    private var random: SplitMix64

    /// - Parameters:
    ///   - index: the slot's number, its first address turn.
    ///   - now: when the job started (the first progress mark).
    init(index: Int, policy: ReconnectPolicy, random: SplitMix64, now: NIODeadline) {
        self.policy = policy
        self.addressTurn = index
        self.random = random
        self.progressMark = (0, now)
    }

    /// The slot starts, or its scheduled connect is due: connect unless stopped, connecting already, or the job is
    /// done.
    mutating func connectNow(now: NIODeadline, jobIsDone: Bool) -> Action {
        switch self.state {
        case .stopped, .connecting, .open: return .none
        case .idle, .waiting, .resting: break
        }
        guard !jobIsDone else {
            self.state = .resting
            return .none
        }
        self.state = .connecting
        let replacing = self.lastConnect != nil
        self.lastConnect = now
        return .connect(seed: self.random.next(), addressTurn: self.addressTurn, replacing: replacing)
    }

    /// The connect succeeded with `connection`.
    mutating func connected(_ connection: ObjectIdentifier) -> Action {
        guard self.state != .stopped else { return .close }
        self.state = .open(connection)
        return .none
    }

    /// The connect failed (the job already heard why, and stopped if the cause cannot heal): back off and try the
    /// next address.
    mutating func connectFailed(now: NIODeadline, job: Job) -> Action {
        if self.state == .connecting { self.state = .resting }
        self.failures += 1
        self.addressTurn &+= 1
        return self.reconsider(answered: false, now: now, job: job)
    }

    /// The connection is ready (SETTINGS, credentials): the failures in a row are over.
    mutating func ready() {
        self.failures = 0
    }

    /// The slot's connection got GOAWAY: it finishes its streams, and a new one takes over — now when this one was
    /// of use, after the job's backoff when it brought no answer.
    mutating func goAway(answered: Bool, now: NIODeadline, job: Job) -> Action {
        if case .open = self.state { self.state = .resting }
        return self.reconsider(answered: answered, now: now, job: job)
    }

    /// A connection closed. One the slot had replaced already changes nothing; the slot's own is replaced unless it
    /// closed for want of rows (`finished`: rows that come back later go to connections that still have streams in
    /// flight). One closed before it was ready counts as a failure.
    mutating func closed(
        _ connection: ObjectIdentifier,
        wasReady: Bool,
        answered: Bool,
        finished: Bool,
        now: NIODeadline,
        job: Job
    ) -> Action {
        guard self.state == .open(connection) else { return .none }
        self.state = .resting
        guard !finished else { return .none }
        if !wasReady { self.failures += 1 }
        return self.reconsider(answered: answered, now: now, job: job)
    }

    /// The job has not stalled, and paces this slot's next connect no sooner than `pacedUntil`: the connect is
    /// scheduled after the longer of that and the policy's backoff.
    mutating func reconnect(now: NIODeadline, pacedUntil: NIODeadline) -> Action {
        guard self.state == .resting else { return .none }
        let since = self.lastConnect.map { UInt64(max(0, (now - $0).nanoseconds)) } ?? UInt64.max
        let sinceProgress = UInt64(max(0, (now - self.progressMark.at).nanoseconds))
        let delay = max(
            self.policy.delay(
                failures: self.failures,
                sinceLastConnect: since,
                sinceProgress: sinceProgress,
                random: self.random.nextUnit()
            ),
            UInt64(max(0, (pacedUntil - now).nanoseconds))
        )
        self.state = .waiting
        return .scheduleConnect(after: .nanoseconds(Int64(clamping: delay)))
    }

    /// The slot stops: nothing connects again (the driver cancels a scheduled connect and closes its connections).
    mutating func stop() {
        self.state = .stopped
    }

    /// A connection ended or failed: a reconnect is due unless the slot stopped, one is already scheduled or under
    /// way, or the job is done. The progress mark moves when the job settled rows since it was last seen.
    private mutating func reconsider(answered: Bool, now: NIODeadline, job: Job) -> Action {
        guard self.state == .resting, !job.isDone else { return .none }
        if job.settled != self.progressMark.settled { self.progressMark = (job.settled, now) }
        return .reconnectUnlessStalled(answered: answered, jitter: self.random.nextUnit())
    }
}
