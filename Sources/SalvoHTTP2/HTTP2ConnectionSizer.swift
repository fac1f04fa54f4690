import NIOCore

/// How many connections a job with `--connections auto` keeps open: more while the distance, not the server or
/// the client, is what holds it back.
///
/// One connection delivers at most (streams in flight) ÷ (round trip). The sizer measures the round trip (the
/// shortest time from a request to its answer, which queueing can only lengthen) and the rate of answers over
/// each interval (at least two round trips); by Little's law rate × round trip is the flight that rate needs.
///
/// First, as soon as the distance is known — the first TLS handshake (about one round trip with TLS 1.3, before any
/// answer; the pool asks at that moment, not on its timer), or else the first answer — it opens at once, in parallel,
/// as many connections as carry `targetRate`'s flight in their streams (the server's limit, or `assumedStreams` while
/// a token-authenticated connection still has its first single stream), but no more than carry the job's rows in
/// `roundTripsToCarry` round trips: far away, doubling alone would spend a warm-up (a connect, a handshake, a first
/// answer at one stream) per step, longer than many jobs. So every connection of the first step writes its first
/// request about two round trips (TCP, TLS) after the first handshake. Then, while the measured flight fills
/// the streams the open connections may use (`fullFraction` of them: half, since under load queueing in the client
/// and the server stretches the real round trip beyond the shortest, so full streams show as about half), the
/// connections may be the limit, and the sizer opens as many again as are open up to `maximum`. After a growth it
/// judges nothing until the new connections have their streams (at most `maximumWarmUp` intervals). It stops growing
/// for good when a growth did not raise the rate by `minimumGain` (the cores or the server are the limit then), and
/// never grows in an interval in which 429 answers cut a flight (the server asked for less, not more). Connections
/// are never closed by it.
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
        /// The rate the first step sizes for (`--rate`, or what one client on two cores delivers nearby): once the
        /// round trip and the server's stream limit are known, as many connections open at once as carry this
        /// rate's flight (rate × round trip) in their streams; nil to only double.
        var targetRate: Double?
        /// The job's rows: the first step opens no more connections than carry them in `roundTripsToCarry` round
        /// trips of full flights.
        var rows = Int.max
        /// The round trips of full flights a job's rows may take before more connections pay for their opening (a
        /// connect, a handshake, a first answer at one stream each): a few, so that a 50,000-row job far away
        /// opens the 17 connections that carry it in three round trips, not the 32 that would carry it in two.
        var roundTripsToCarry = 3
        /// The job's own cap on streams per connection (`--max-streams`).
        var streamCap = Int.max
        /// The most intervals a warm-up after a growth lasts, when the new connections do not all come up.
        var maximumWarmUp = 5
    }

    /// What one `evaluate` saw and decided.
    struct Decision: Hashable, Sendable {
        /// Connections to open now (0: none).
        var open: Int
        /// Answers per second over the interval; nil when the interval was too short to measure.
        var rate: Double?
    }

    /// The rate the first step sizes for without `--rate`: about what the client delivers nearby on two cores
    /// shared with a server (the wire engine, `salvo-bench h2`), so that far away the job opens the connections
    /// whose streams carry it.
    static let nearbyRate = 200_000
    /// The streams a connection is counted for in the first step while its limit is unknown or still the single
    /// stream of a token-authenticated connection before its first answer: what APNs and the simulator announce.
    static let assumedStreams = 1000

    private(set) var configuration: Configuration
    /// Connections opened so far (the initial ones included).
    private(set) var connections: Int
    /// The shortest round trip measured; nil before the first answer.
    private(set) var roundTrip: TimeAmount?
    /// The shortest TLS handshake seen: the distance before any answer (a handshake also holds some computing, so
    /// it errs long, toward more connections).
    private(set) var handshake: TimeAmount?
    /// Whether growing has stopped for good (a growth that did not pay, or the maximum reached).
    private(set) var settled = false
    private var lastAnswered = 0
    private var lastTime: NIODeadline
    /// The rate measured before the last growth, to compare the next one with.
    private var rateBeforeGrowth: Double?
    /// The intervals right after a growth hold connects, handshakes and the new connections' first answers (a
    /// token-authenticated connection has one stream until then): they only restart the measurement, until the
    /// streams available reach what the open connections will have, or `maximumWarmUp` intervals passed.
    private var warmingUp = 0
    /// Whether the first step (sized by `targetRate`) was taken.
    private var jumped = false
    /// Why the connections are as many as they are, for a person (the report's summary).
    private(set) var why = "the first connection was enough"

    init(configuration: Configuration, now: NIODeadline) {
        precondition(configuration.initial >= 1 && configuration.maximum >= configuration.initial)
        self.configuration = configuration
        self.connections = configuration.initial
        self.settled = configuration.initial >= configuration.maximum
        self.lastTime = now
    }

    /// The job's rows as estimated so far, for a job that reads its input while it sends (the count is not known
    /// at the start): 0 or less says nothing yet.
    mutating func estimate(rows: Int) {
        guard rows > 0 else { return }
        self.configuration.rows = rows
    }

    /// A measured round trip (a request to its answer): the shortest is kept.
    mutating func observe(roundTrip: TimeAmount) {
        guard roundTrip > .zero else { return }
        self.roundTrip = min(self.roundTrip ?? roundTrip, roundTrip)
    }

    /// A TLS handshake's duration: the shortest is kept.
    mutating func observe(handshake: TimeAmount) {
        guard handshake > .zero else { return }
        self.handshake = min(self.handshake ?? handshake, handshake)
    }

    /// The interval a rate is measured over: `interval`, and at least two round trips (answers come in bursts
    /// of a round trip's flight).
    var measuringInterval: TimeAmount {
        max(self.configuration.interval, .nanoseconds(2 * (self.roundTrip?.nanoseconds ?? 0)))
    }

    /// Called on a timer with the job's answers so far, the streams the open connections may have in flight
    /// now, the 429 cuts since the last call, and the largest stream limit a connection reported (nil when none
    /// did). Says how many connections to open now.
    mutating func evaluate(
        now: NIODeadline,
        answered: Int,
        streamsAvailable: Int,
        flightCuts: Int,
        streamsPerConnection: Int? = nil
    ) -> Decision {
        // The first step needs no rate: it is taken as soon as the round trip and the stream limit are known.
        if !self.settled, self.warmingUp == 0,
            let step = self.firstStep(streamsPerConnection: streamsPerConnection, flightCuts: flightCuts)
        {
            self.lastAnswered = answered
            self.lastTime = now
            return Decision(open: step, rate: nil)
        }
        let elapsed = now - self.lastTime
        guard elapsed >= self.measuringInterval else { return Decision(open: 0, rate: nil) }
        let rate = Double(answered - self.lastAnswered) / (Double(elapsed.nanoseconds) / 1e9)
        self.lastAnswered = answered
        self.lastTime = now
        guard !self.settled else { return Decision(open: 0, rate: rate) }
        if self.warmingUp > 0 {
            self.warmingUp -= 1
            let full = streamsPerConnection.map { streamsAvailable >= self.connections * $0 } ?? true
            if !full && self.warmingUp > 0 { return Decision(open: 0, rate: rate) }
            self.warmingUp = 0
            return Decision(open: 0, rate: rate)
        }
        if let before = self.rateBeforeGrowth {
            guard rate >= before * self.configuration.minimumGain else {
                self.settled = true
                self.why =
                    "growing stopped: \(self.connections) connections answered \(Int(rate))/s against "
                    + "\(Int(before))/s before the last doubling (the cores or the server are the limit)"
                return Decision(open: 0, rate: rate)
            }
            self.rateBeforeGrowth = nil
        }
        guard flightCuts == 0, let roundTrip = self.roundTrip, rate > 0 else { return Decision(open: 0, rate: rate) }
        let needed = rate * Double(roundTrip.nanoseconds) / 1e9
        guard needed >= self.configuration.fullFraction * Double(max(1, streamsAvailable)) else {
            if !self.jumped || self.rateBeforeGrowth == nil {
                self.why =
                    "\(Int(rate))/s needs \(Int(needed)) requests in flight, under half of the \(streamsAvailable) "
                    + "streams open"
            }
            return Decision(open: 0, rate: rate)
        }
        let open = min(self.connections, self.configuration.maximum - self.connections)
        self.grow(by: open)
        self.why =
            self.settled
            ? "the flight filled the streams up to --max-connections"
            : "doubled to \(self.connections): \(Int(rate))/s filled half the streams or more"
        self.rateBeforeGrowth = rate
        return Decision(open: open, rate: rate)
    }

    /// The first step, once: connections enough for the target rate's flight at the measured round trip, when
    /// that is more than are open. Doubling alone takes a warm-up per step (a connect, a handshake and a first
    /// answer, several round trips each), which far away is longer than many jobs.
    private mutating func firstStep(streamsPerConnection: Int?, flightCuts: Int) -> Int? {
        guard !self.jumped, self.configuration.targetRate != nil,
            let roundTrip = self.roundTrip ?? self.handshake, flightCuts == 0
        else { return nil }
        self.jumped = true
        let wanted = Self.firstStepConnections(
            configuration: self.configuration,
            roundTrip: roundTrip,
            streamsPerConnection: streamsPerConnection
        )
        self.why = Self.firstStepReason(
            configuration: self.configuration,
            roundTrip: roundTrip,
            streamsPerConnection: streamsPerConnection,
            connections: max(wanted, self.connections)
        )
        guard wanted > self.connections else { return nil }
        let open = wanted - self.connections
        self.grow(by: open)
        return open
    }

    /// The connections the first step wants open: as many as carry `targetRate`'s flight at `roundTrip`, no more
    /// than carry the job's rows in `roundTripsToCarry` round trips, at most `maximum`. A connection counts for the
    /// streams it reported (`streamsPerConnection`, when above the single stream of a connection whose credentials
    /// are not yet checked), else `assumedStreams`, within `streamCap`.
    static func firstStepConnections(
        configuration: Configuration,
        roundTrip: TimeAmount,
        streamsPerConnection: Int?
    ) -> Int {
        let bounds = Self.firstStepBounds(
            configuration,
            roundTrip: roundTrip,
            streamsPerConnection: streamsPerConnection
        )
        return max(1, min(configuration.maximum, bounds.forRate, bounds.forRows))
    }

    /// The first step's two bounds: the connections whose streams carry `targetRate`'s flight, and those that carry
    /// the job's rows in `roundTripsToCarry` round trips; with the streams a connection counts for.
    private static func firstStepBounds(
        _ configuration: Configuration,
        roundTrip: TimeAmount,
        streamsPerConnection: Int?
    ) -> (forRate: Int, forRows: Int, perConnection: Int) {
        let reported = streamsPerConnection.flatMap { $0 > 1 ? $0 : nil } ?? Self.assumedStreams
        let perConnection = max(1, min(reported, configuration.streamCap))
        let flight = (configuration.targetRate ?? 0) * Double(roundTrip.nanoseconds) / 1e9
        let forRate = Int((flight / Double(perConnection)).rounded(.up))
        let carried = perConnection.multipliedReportingOverflow(by: max(1, configuration.roundTripsToCarry))
        let perRows = carried.overflow ? perConnection : carried.partialValue
        let forRows = configuration.rows / perRows + (configuration.rows % perRows == 0 ? 0 : 1)
        return (forRate, forRows, perConnection)
    }

    /// Which bound the first step's count came from.
    static func firstStepReason(
        configuration: Configuration,
        roundTrip: TimeAmount,
        streamsPerConnection: Int?,
        connections: Int
    ) -> String {
        let bounds = Self.firstStepBounds(
            configuration,
            roundTrip: roundTrip,
            streamsPerConnection: streamsPerConnection
        )
        let milliseconds = Double(roundTrip.nanoseconds) / 1e6
        let rate = Int(configuration.targetRate ?? 0)
        let flight = "\(bounds.perConnection) streams each, round trip \(Int(milliseconds.rounded())) ms"
        if connections >= configuration.maximum { return "\(connections) at once (--max-connections; \(flight))" }
        if bounds.forRows <= bounds.forRate && configuration.rows < Int.max {
            return "\(connections) at once carry the job's rows (about \(configuration.rows)) in "
                + "\(configuration.roundTripsToCarry) round trips (\(flight))"
        }
        return "\(connections) at once carry \(rate)/s in flight (\(flight))"
    }

    private mutating func grow(by open: Int) {
        self.connections += open
        self.warmingUp = self.configuration.maximumWarmUp
        if self.connections >= self.configuration.maximum { self.settled = true }
    }
}
