import NIOConcurrencyHelpers
import NIOCore
import NIOSSL
import SalvoEngine

/// A job's connections: slots spread over the event loops of a group, each keeping one connection open (and
/// replacing it) while the job has work. A fixed count opens `configuration.connections` slots; with
/// `maximumConnections` (`--connections auto`) the pool starts that many and opens more when its
/// `HTTP2ConnectionSizer`, asked on a timer, says so. When every started slot has given up connecting, the job
/// stops with the connection errors as its explanation.
///
/// Thread-safe: slots are confined to their loops; the sizer and the counts are locked (taken on the timer, not
/// per request).
final class HTTP2ConnectionPool: Sendable {
    private struct State {
        var started = 0
        var gaveUp = 0
        var sizer: HTTP2ConnectionSizer?
        var seenCuts = 0
        var timer: RepeatedTask?
    }

    private let slots: [HTTP2ConnectionSlot]
    private let state: NIOLockedValueBox<State>
    private let job: HTTP2JobContext
    private let timerLoop: any EventLoop

    init(
        configuration: HTTP2ClientConfiguration,
        sslContext: NIOSSLContext?,
        job: HTTP2JobContext,
        group: any EventLoopGroup,
        rows: Int = Int.max
    ) {
        let sizer = configuration.maximumConnections.map { maximum in
            var sizing = HTTP2ConnectionSizer.Configuration(initial: configuration.connections, maximum: maximum)
            sizing.targetRate = Double(configuration.rate ?? HTTP2ConnectionSizer.nearbyRate)
            sizing.rows = rows
            return HTTP2ConnectionSizer(configuration: sizing, now: .now())
        }
        let state = NIOLockedValueBox(State(sizer: sizer))
        self.state = state
        self.job = job
        self.timerLoop = group.next()
        let onGiveUp: @Sendable () -> Void = {
            let all = state.withLockedValue { state -> Bool in
                state.gaveUp += 1
                return state.gaveUp == state.started
            }
            guard all else { return }
            let errors = job.connectionErrors.withLockedValue { $0 }
            let detail = errors.suffix(3).joined(separator: "; ")
            job.work.stop(
                HTTP2JobStop(
                    reason: nil,
                    message: "cannot keep a connection to \(configuration.host):\(configuration.port): every "
                        + "connection failed \(configuration.reconnect.maximumAttempts) times or more in a row and no "
                        + "row was answered for \(configuration.reconnect.giveUpAfter.components.seconds) s: \(detail)"
                )
            )
        }
        self.slots = (0..<(configuration.maximumConnections ?? configuration.connections)).map { index in
            HTTP2ConnectionSlot(
                index: index,
                eventLoop: group.next(),
                random: SplitMix64(seed: configuration.randomSeed &+ UInt64(index) &* 0x9E37_79B9_7F4A_7C15),
                configuration: configuration,
                sslContext: sslContext,
                job: job,
                onGiveUp: onGiveUp
            )
        }
        state.withLockedValue { $0.started = configuration.connections }
    }

    /// Connections opened (slots started).
    var connections: Int { self.state.withLockedValue { $0.started } }

    func start() {
        let (started, sizing) = self.state.withLockedValue { ($0.started, $0.sizer != nil) }
        for slot in self.slots.prefix(started) { slot.start() }
        guard sizing else { return }
        let timer = self.timerLoop.scheduleRepeatedTask(initialDelay: .milliseconds(50), delay: .milliseconds(50)) {
            [self] _ in self.size()
        }
        self.state.withLockedValue { $0.timer = timer }
    }

    /// Closes every connection.
    func stop() async {
        self.state.withLockedValue { $0.timer?.cancel() }
        for slot in self.slots { try? await slot.stop().get() }
    }

    /// Asks the sizer, with what the connections have reported, and starts the slots it asks for.
    private func size() {
        guard !self.job.work.isDone else { return }
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
        let (from, to) = self.state.withLockedValue { state -> (Int, Int) in
            guard var sizer = state.sizer else { return (0, 0) }
            if let roundTrip = seen.roundTrip { sizer.observe(roundTrip: roundTrip) }
            if let handshake = seen.handshake { sizer.observe(handshake: handshake) }
            let decision = sizer.evaluate(
                now: .now(),
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
}
