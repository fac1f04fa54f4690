import NIOCore
import NIOTLS
import SalvoRows

/// What both HTTP/2 engines' handlers hold alike: the connection's `HTTP2ConnectionMachine`, its timers (one
/// tick per connection, one wake-up when no row was ready), the slot's callbacks, and what the job is told of the
/// connection's start. The logic that drives it (`HTTP2ConnectionCodec`'s extension) is shared too: a handler adds
/// only its codec.
struct HTTP2ConnectionDriverCore {
    let job: HTTP2JobContext
    var machine: HTTP2ConnectionMachine
    var context: ChannelHandlerContext?
    var timer: Scheduled<Void>?
    var wakeUp: Scheduled<Void>?
    var onGoAway: (() -> Void)?
    var onReady: (() -> Void)?
    var hopeless: String?
    /// Whether this connection wrote a request yet (the job's start is timed by each connection's first).
    var wroteFirst = false
    /// When TCP connected, to time the TLS handshake (the first measure of the distance, for the sizer).
    var activeAt: NIODeadline?

    /// - Parameters:
    ///   - firstStreamID: the first stream's id: 1, or near the end of the id space in tests.
    ///   - random: this connection's generator (backoff jitter).
    init(job: HTTP2JobContext, firstStreamID: Int32, random: SplitMix64) {
        self.job = job
        self.machine = HTTP2ConnectionMachine(
            configuration: job.connectionConfiguration,
            outcomes: job.emptyOutcomes,
            firstStreamID: firstStreamID,
            random: random,
            now: job.now()
        )
    }
}

/// A channel handler that speaks HTTP/2 for one connection of a job: it turns what it reads into the machine's
/// events and writes what the machine's actions ask for, in its own framing. Everything else — carrying out the
/// actions, taking rows, the timers — is this protocol's extension, the same for every engine.
protocol HTTP2ConnectionCodec: HTTP2ConnectionDriver {
    var core: HTTP2ConnectionDriverCore { get set }

    /// Writes RST_STREAM (CANCEL) for a stream whose deadline passed.
    func writeResetStream(_ streamID: Int32)
    /// Writes a PING.
    func writePing()
    /// Sends what was written since the last flush.
    func flushOutput()
    /// Writes the requests for `items` on consecutive streams from `firstStreamID` (each next id 2 above); the
    /// caller flushes.
    func writeRequests(
        _ items: [HTTP2WorkItem],
        firstStreamID: Int32,
        bearer: ProviderToken.Bearer?,
        context: ChannelHandlerContext
    )
    /// How many of the machine's `room` requests the codec's flow control takes now, and how many body bytes they
    /// may carry together.
    func admit(room: Int) -> (requests: Int, bytes: Int)
    /// Closes the connection once the machine said so, after sending what is written.
    func closeConnection(context: ChannelHandlerContext)
}

extension HTTP2ConnectionCodec {
    var onGoAway: (() -> Void)? {
        get { self.core.onGoAway }
        set { self.core.onGoAway = newValue }
    }
    var onReady: (() -> Void)? {
        get { self.core.onReady }
        set { self.core.onReady = newValue }
    }
    var hopeless: String? {
        get { self.core.hopeless }
        set { self.core.hopeless = newValue }
    }
    /// Whether the server's SETTINGS have arrived on this connection.
    var isReady: Bool { self.core.machine.isReady }
    /// Whether the connection read any answer.
    var answered: Bool { self.core.machine.answers > 0 }
    /// Whether the connection closed because the job had no row left for it.
    var finished: Bool { self.core.machine.finished }

    // MARK: Channel events every codec handles alike (its channel handler methods call these)

    func driverAdded(context: ChannelHandlerContext) { self.core.context = context }

    func driverRemoved() { self.core.context = nil }

    /// The connection is up (TCP): the machine starts its clocks and the tick runs.
    func driverActive(context: ChannelHandlerContext) {
        let now = self.core.job.now()
        self.core.activeAt = now
        self.core.machine.opened(now: now)
        self.scheduleTick(context: context)
    }

    /// The TLS handshake's end times the distance to the server.
    func driverEvent(_ event: Any) {
        if case TLSUserEvent.handshakeCompleted = event, let activeAt = self.core.activeAt {
            let now = self.core.job.now()
            self.core.job.noteHandshake(now - activeAt, now: now)
        }
    }

    func driverInactive() {
        self.core.timer?.cancel()
        self.core.timer = nil
        self.core.wakeUp?.cancel()
        self.core.wakeUp = nil
        self.core.job.work.forgetWaiting(connection: ObjectIdentifier(self))
        self.perform(self.core.machine.closed(now: self.core.job.now()))
        self.core.job.connectionClosed(ObjectIdentifier(self))
    }

    /// The end of a read batch: answers go back, freed streams take new rows.
    func driverReadComplete() {
        self.perform(self.core.machine.readComplete())
        self.flushOutput()
    }

    func driverWritabilityChanged(context: ChannelHandlerContext) {
        guard context.channel.isWritable else { return }
        self.takeAndWriteRequests()
        self.flushOutput()
    }

    /// A connection error: the connection fails (and, before it was ready, may be hopeless).
    func driverFailed(_ error: Error) {
        if self.core.hopeless == nil && !self.isReady {
            self.core.hopeless = HTTP2ConnectFailure.hopeless(connectionError: error)
        }
        self.perform(self.core.machine.failed("\(error)", now: self.core.job.now()))
    }

    // MARK: Carrying out

    /// Carries out the machine's actions, in their order (`HTTP2ConnectionMachine.Action.rank`).
    func perform(_ actions: HTTP2ConnectionMachine.Actions) {
        guard let context = self.core.context else { return }
        // Resets and the PING go out together, in one flush before anything else happens.
        var unflushed = false
        for action in actions {
            if unflushed, !action.writesControlFrame {
                self.flushOutput()
                unflushed = false
            }
            switch action {
            case .resetStreams(let ids):
                for id in ids { self.writeResetStream(id) }
                unflushed = true
            case .sendPing:
                self.writePing()
                unflushed = true
            case .impossible(let event):
                self.core.job.noteConnectionError("internal error: the connection got \(event.rawValue)")
            case .note(let note):
                self.core.job.noteConnectionError(note)
            case .stopJob(let stop):
                self.core.job.work.stop(stop)
            case .renewToken(let renewal):
                let result = self.core.job.token?.renew(after: renewal.bearer) ?? .refused("no provider token to renew")
                self.perform(self.core.machine.tokenRenewed(renewal, result: result, now: self.core.job.now()))
            case .giveBack:
                // The results go back before the connection closes, so the job never finishes without them.
                if let results = self.core.machine.takeResults() {
                    self.core.job.record(results, from: ObjectIdentifier(self))
                }
            case .ready:
                self.core.onReady?()
                self.core.onReady = nil
            case .retire:
                self.core.onGoAway?()
                self.core.onGoAway = nil
            case .close:
                self.closeConnection(context: context)
            case .writeRequests:
                self.takeAndWriteRequests()
            }
        }
        if unflushed { self.flushOutput() }
    }

    /// Takes as many rows as the machine and the codec's flow control have room for and writes them; the caller
    /// flushes.
    func takeAndWriteRequests() {
        guard let context = self.core.context else { return }
        let job = self.core.job
        // Nothing in flight here and no row left for any connection: this one closes now, not with the last.
        if self.core.machine.openStreams == 0, job.work.noRowsLeft {
            self.perform(self.core.machine.noRowsLeft(now: job.now()))
            return
        }
        let (room, maximumBytes) = self.admit(
            room: self.core.machine.roomToWrite(isWritable: context.channel.isWritable)
        )
        guard room > 0 else { return }
        let now = job.now()
        let arrivals = job.work.arrivals
        let (items, rateLimited, nextDelayed) = job.take(room: room, maximumBytes: maximumBytes, now: now)
        guard !items.isEmpty else {
            guard !job.work.isDone else { return }
            self.scheduleWakeUp(
                at: self.core.machine.noRowsReady(now: now, nextDelayed: nextDelayed),
                orWhenRowsCameAfter: arrivals
            )
            return
        }
        let bearer = job.token?.current()
        let (first, actions) = self.core.machine.writing(items, bearer: bearer, now: now)
        self.writeRequests(items, firstStreamID: first, bearer: bearer, context: context)
        if !self.core.wroteFirst {
            self.core.wroteFirst = true
            job.noteFirstRequest(now: now)
        }
        self.perform(actions)
        if rateLimited, let slot = job.nextRateSlot(now: now) {
            // Held back by the rate: look again when the bucket has refilled, not only when answers come.
            self.scheduleWakeUp(at: self.core.machine.noRowsReady(now: now, nextDelayed: slot))
        } else if items.count < room, !job.work.isDone {
            // The queue ran out before the room did: rows that come next wake this connection too, rather than
            // wait for its next answer (a round trip away; rows of a served job waited 40 ms on average so).
            self.scheduleWakeUp(
                at: self.core.machine.noRowsReady(now: now, nextDelayed: nextDelayed),
                orWhenRowsCameAfter: arrivals
            )
        }
    }

    /// Looks for rows again at `deadline`, and with `arrivals`, as soon as rows come after it was read (whichever
    /// comes first): the deadline bounds the wait, the queue's call ends it, so an idle connection neither polls
    /// nor lets new rows wait.
    private func scheduleWakeUp(at deadline: NIODeadline?, orWhenRowsCameAfter arrivals: UInt64? = nil) {
        guard let deadline, let context = self.core.context else { return }
        let loop = context.eventLoop
        // On the loop's timer, in the time left on the job's clock: a test's clock need not be the system's.
        let left = deadline - self.core.job.now()
        self.core.wakeUp = loop.assumeIsolated().scheduleTask(in: left) { self.wakeUpCame() }
        guard let arrivals else { return }
        // The queue calls from any thread: the call only hops to this connection's loop (bound to it, so the
        // closure that crosses holds no handler).
        let wake = NIOLoopBound({ self.rowsMayHaveArrived() }, eventLoop: loop)
        self.core.job.work.wakeWhenRowsArrive(after: arrivals, connection: ObjectIdentifier(self)) {
            loop.execute { wake.value() }
        }
    }

    private func wakeUpCame() {
        self.core.wakeUp = nil
        self.perform(self.core.machine.wokeUp())
        self.flushOutput()
    }

    /// The queue called: the wake-up comes now, if it is still waited for.
    private func rowsMayHaveArrived() {
        guard let wakeUp = self.core.wakeUp else { return }
        wakeUp.cancel()
        self.wakeUpCame()
    }

    /// One timer per connection, not one per request.
    private func scheduleTick(context: ChannelHandlerContext) {
        self.core.timer = context.eventLoop.assumeIsolated().scheduleTask(in: self.core.machine.tickInterval) {
            guard self.core.machine.state != .closed else { return }
            self.perform(self.core.machine.tick(now: self.core.job.now()))
            self.flushOutput()
            if let context = self.core.context { self.scheduleTick(context: context) }
        }
    }
}
