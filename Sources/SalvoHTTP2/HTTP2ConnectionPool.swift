import NIOConcurrencyHelpers
import NIOCore
import NIOSSL
import SalvoRows

/// A job's connections: slots spread over the event loops of a group, each keeping one connection open (and
/// replacing it) while the job has work. A fixed count opens `configuration.connections` slots; with
/// `maximumConnections` (`--connections auto`) the pool starts that many and opens more when its
/// `HTTP2ConnectionSizer`, asked on a timer, says so. A job whose connections get no answer is stopped by its
/// give-up (`HTTP2ProgressWatch`), never by a slot.
///
/// Thread-safe: slots are confined to their loops; the sizer and the counts are locked (taken on the timer, not
/// per request).
final class HTTP2ConnectionPool: Sendable {
    private struct State {
        var started = 0
        var sizer: HTTP2ConnectionSizer?
        var seenCuts = 0
        var timer: RepeatedTask?
    }

    private let slots: [HTTP2ConnectionSlot]
    private let state: NIOLockedValueBox<State>
    private let job: HTTP2JobContext
    private let timerLoop: any EventLoop
    /// The job's rows as estimated while its input is read (a job whose count is not known at the start).
    private let estimatedRows: (@Sendable () -> Int)?

    init(
        configuration: HTTP2ClientConfiguration,
        factory: HTTP2ConnectionFactory,
        job: HTTP2JobContext,
        group: any EventLoopGroup,
        rows: Int = Int.max,
        estimatedRows: (@Sendable () -> Int)? = nil
    ) {
        self.estimatedRows = estimatedRows
        let sizer = configuration.maximumConnections.map { maximum in
            var sizing = HTTP2ConnectionSizer.Configuration(initial: configuration.connections, maximum: maximum)
            sizing.targetRate = Double(configuration.rate ?? HTTP2ConnectionSizer.nearbyRate)
            sizing.rows = rows
            sizing.streamCap = configuration.maximumStreamsPerConnection ?? Int.max
            return HTTP2ConnectionSizer(configuration: sizing, now: job.now())
        }
        let state = NIOLockedValueBox(State(sizer: sizer))
        self.state = state
        self.job = job
        self.timerLoop = group.next()
        self.slots = (0..<(configuration.maximumConnections ?? configuration.connections)).map { index in
            HTTP2ConnectionSlot(
                index: index,
                eventLoop: group.next(),
                random: SplitMix64(seed: configuration.randomSeed &+ UInt64(index) &* 0x9E37_79B9_7F4A_7C15),
                configuration: configuration,
                factory: factory,
                job: job
            )
        }
        state.withLockedValue { $0.started = configuration.connections }
    }

    /// Connections opened (slots started).
    var connections: Int { self.state.withLockedValue { $0.started } }

    func start() {
        let (started, sizing) = self.state.withLockedValue { ($0.started, $0.sizer != nil) }
        // The first step is sized as soon as the first handshake tells the distance (set before any connect), so
        // the connections it opens start a timer tick earlier; the timer then measures and grows.
        if sizing {
            self.job.onFirstHandshake.withLockedValue { hook in
                hook = { [weak self] in self?.size() }
            }
        }
        for slot in self.slots.prefix(started) { slot.start() }
        guard sizing else { return }
        let timer = self.timerLoop.scheduleRepeatedTask(initialDelay: .milliseconds(50), delay: .milliseconds(50)) {
            [self] _ in self.size()
        }
        self.state.withLockedValue { $0.timer = timer }
    }

    /// Closes every connection at once (`HTTP2JobEnding`) and returns when they are closed, or when the wait for
    /// the server's goodbyes is over and the connections still waiting are cut.
    func stop() async {
        self.state.withLockedValue { $0.timer?.cancel() }
        let distance = self.job.recorded.withLockedValue { $0.roundTrip ?? $0.handshake }
        let done = self.timerLoop.makePromise(of: Void.self)
        let closing = HTTP2PoolClosing(slots: self.slots, loop: self.timerLoop, job: self.job, done: done)
        self.timerLoop.execute { closing.begin(roundTrip: distance) }
        try? await done.futureResult.get()
    }

    /// Asks the sizer, with what the connections have reported, and starts the slots it asks for.
    private func size() {
        // No row left to send: a new connection would only open and close.
        guard !self.job.work.noRowsLeft else { return }
        let seen = self.job.recorded.withLockedValue { recorded in
            (
                answered: recorded.answered,
                streams: recorded.streamLimits.values.reduce(0, +),
                perConnection: recorded.streamLimits.values.max(),
                cuts: recorded.flightCuts,
                roundTrip: recorded.roundTrip,
                handshake: recorded.handshake
            )
        }
        let rows = self.estimatedRows?()
        let (from, to) = self.state.withLockedValue { state -> (Int, Int) in
            guard var sizer = state.sizer else { return (0, 0) }
            if let rows { sizer.estimate(rows: rows) }
            if let roundTrip = seen.roundTrip { sizer.observe(roundTrip: roundTrip) }
            if let handshake = seen.handshake { sizer.observe(handshake: handshake) }
            let decision = sizer.evaluate(
                now: self.job.now(),
                answered: seen.answered,
                streamsAvailable: seen.streams,
                flightCuts: seen.cuts - state.seenCuts,
                streamsPerConnection: seen.perConnection
            )
            state.seenCuts = seen.cuts
            state.sizer = sizer
            let from = state.started
            state.started = min(self.slots.count, from + decision.open)
            return (from, state.started)
        }
        for slot in self.slots[from..<to] { slot.start() }
    }

    /// The shortest round trip measured (request to answer), as the sizer saw it; nil for a fixed count.
    var measuredRoundTrip: TimeAmount? { self.state.withLockedValue { $0.sizer?.roundTrip } }

    /// Why `--connections auto` chose the connections it did, for the report; nil for a fixed count.
    var sizingReason: String? { self.state.withLockedValue { $0.sizer?.why } }
}

/// Carries out `HTTP2JobEnding` for a pool's slots: closes them all at once, cuts those still closing at the
/// deadline, and succeeds `done` when every one is closed.
///
/// Confined to `loop`; `@unchecked Sendable` so that the slots' close futures can call back into it there.
private final class HTTP2PoolClosing: @unchecked Sendable {
    private let slots: [HTTP2ConnectionSlot]
    private let loop: any EventLoop
    /// The job's clock, which the ending's deadline is on.
    private let job: HTTP2JobContext
    private let done: EventLoopPromise<Void>
    private var ending: HTTP2JobEnding?
    private var wakeUp: Scheduled<Void>?
    private var finished = false

    init(slots: [HTTP2ConnectionSlot], loop: any EventLoop, job: HTTP2JobContext, done: EventLoopPromise<Void>) {
        self.slots = slots
        self.loop = loop
        self.job = job
        self.done = done
    }

    func begin(roundTrip: TimeAmount?) {
        self.loop.preconditionInEventLoop()
        let ending = HTTP2JobEnding(places: self.slots.count, roundTrip: roundTrip, now: self.job.now())
        self.ending = ending
        self.perform(ending.start)
    }

    private func perform(_ actions: HTTP2JobEnding.Actions) {
        self.loop.preconditionInEventLoop()
        guard !self.finished else { return }
        for place in actions.close {
            self.slots[place].stop().hop(to: self.loop).whenComplete { _ in self.closed(place) }
        }
        for place in actions.cut {
            self.slots[place].cut().hop(to: self.loop).whenComplete { _ in self.closed(place) }
        }
        if let at = actions.wakeUpAt {
            self.wakeUp?.cancel()
            // On the loop's timer, in the time left on the job's clock: a test's clock need not be the system's.
            self.wakeUp = self.loop.scheduleTask(in: at - self.job.now()) {
                guard var ending = self.ending else { return }
                let actions = ending.tick(now: self.job.now())
                self.ending = ending
                self.perform(actions)
            }
        }
        if actions.done {
            self.finished = true
            self.wakeUp?.cancel()
            self.done.succeed()
        }
    }

    private func closed(_ place: Int) {
        guard var ending = self.ending else { return }
        let actions = ending.closed(place)
        self.ending = ending
        self.perform(actions)
    }
}
