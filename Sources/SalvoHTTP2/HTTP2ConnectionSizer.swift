import NIOCore

/// How many connections a job with `--connections auto` keeps open: more while the distance, not the server or
/// the client, is what holds it back.
///
/// One connection delivers at most (streams in flight) ÷ (round trip). The sizer measures the round trip (the
/// shortest time from a request to its answer, which queueing can only lengthen) and the rate of answers over
/// each interval; by Little's law rate × round trip is the flight that rate needs. While that flight fills the
/// streams the open connections may use (`fullFraction` of them: half, since under load queueing in the client
/// and the server stretches the real round trip beyond the shortest, so full streams show as about half), the
/// connections may be the limit, and the sizer opens as many again as are open (1, 2, 4, …) up to `maximum`. It stops growing for good when a growth did not
/// raise the rate by `minimumGain` (the cores or the server are the limit then), and never grows in an interval in
/// which 429 answers cut a flight (the server asked for less, not more). Connections are never closed by it.
///
/// A value with the time passed in: the pool calls `evaluate` on a timer and opens what it answers; the tests
/// drive it with a fake clock and no sockets.
struct HTTP2ConnectionSizer: Hashable, Sendable {
    struct Configuration: Hashable, Sendable {
        /// Connections opened at the start.
        var initial: Int
        /// The most connections (`--max-connections`).
        var maximum: Int
        /// The shortest interval a rate is measured over.
        var interval: TimeAmount = .milliseconds(200)
        /// The share of the available streams a needed flight must reach for the streams to be the limit.
        var fullFraction = 0.5
        /// The rate after a growth must be at least this many times the rate before it, or growing stops.
        var minimumGain = 1.1
    }

    /// What one `evaluate` saw and decided.
    struct Decision: Hashable, Sendable {
        /// Connections to open now (0: none).
        var open: Int
        /// Answers per second over the interval; nil when the interval was too short to measure.
        var rate: Double?
    }

    let configuration: Configuration
    /// Connections opened so far (the initial ones included).
    private(set) var connections: Int
    /// The shortest round trip measured; nil before the first answer.
    private(set) var roundTrip: TimeAmount?
    /// Whether growing has stopped for good (a growth that did not pay, or the maximum reached).
    private(set) var settled = false
    private var lastAnswered = 0
    private var lastTime: NIODeadline
    /// The rate measured before the last growth, to compare the next one with.
    private var rateBeforeGrowth: Double?
    /// The interval right after a growth holds connects and handshakes: it only restarts the measurement.
    private var warmingUp = false

    init(configuration: Configuration, now: NIODeadline) {
        precondition(configuration.initial >= 1 && configuration.maximum >= configuration.initial)
        self.configuration = configuration
        self.connections = configuration.initial
        self.settled = configuration.initial >= configuration.maximum
        self.lastTime = now
    }

    /// A measured round trip (a request to its answer): the shortest is kept.
    mutating func observe(roundTrip: TimeAmount) {
        guard roundTrip > .zero else { return }
        self.roundTrip = min(self.roundTrip ?? roundTrip, roundTrip)
    }

    /// Called on a timer with the job's answers so far, the streams the open connections may have in flight
    /// now, and the 429 cuts since the last call. Says how many connections to open now.
    mutating func evaluate(now: NIODeadline, answered: Int, streamsAvailable: Int, flightCuts: Int) -> Decision {
        let elapsed = now - self.lastTime
        guard elapsed >= self.configuration.interval else { return Decision(open: 0, rate: nil) }
        let rate = Double(answered - self.lastAnswered) / (Double(elapsed.nanoseconds) / 1e9)
        self.lastAnswered = answered
        self.lastTime = now
        guard !self.settled else { return Decision(open: 0, rate: rate) }
        if self.warmingUp {
            self.warmingUp = false
            return Decision(open: 0, rate: rate)
        }
        if let before = self.rateBeforeGrowth {
            guard rate >= before * self.configuration.minimumGain else {
                self.settled = true
                return Decision(open: 0, rate: rate)
            }
            self.rateBeforeGrowth = nil
        }
        guard flightCuts == 0, let roundTrip = self.roundTrip, rate > 0 else { return Decision(open: 0, rate: rate) }
        let needed = rate * Double(roundTrip.nanoseconds) / 1e9
        guard needed >= self.configuration.fullFraction * Double(max(1, streamsAvailable)) else {
            return Decision(open: 0, rate: rate)
        }
        let open = min(self.connections, self.configuration.maximum - self.connections)
        self.connections += open
        self.rateBeforeGrowth = rate
        self.warmingUp = true
        if self.connections >= self.configuration.maximum { self.settled = true }
        return Decision(open: open, rate: rate)
    }
}
