/// What the endpoint's faults (`HTTP2EndpointConfiguration.Faults`) decide for one HTTP/2 connection: the stream
/// limit it announces, a reset at a new stream, an error in place of an accepted request's 200 (one by one or in
/// bursts), and after each request a limit that shrinks and comes back or a GOAWAY.
///
/// A value, deterministic from the plan's seed and the connection's serial number: every draw comes from `random`,
/// in the order the connection's events ask for them, so a plan's run repeats. It decides; the connection
/// (`HTTP2GatewayHandler`) writes what it decides.
struct HTTP2ConnectionFaults {
    let faults: HTTP2EndpointConfiguration.Faults
    /// The endpoint's configured limit, which a shrink's end restores.
    let maximumConcurrentStreams: Int
    /// The connection's serial number at the endpoint (its first is 1).
    let connection: UInt32
    /// The connection's one seeded sequence: the faults' draws, and the `apns-id`s the endpoint makes
    /// (`HTTP2Answers.withAPNSID`) as their answers are written, in the order they happen.
    var random: SeededGenerator
    /// The endpoint's stream limit now: what accepted requests restore (lower while a shrink lasts).
    private(set) var fullLimit: Int
    /// An error burst: answers still to give, and their status.
    private var burstRemaining = 0
    private var burstStatus = 500
    /// While a seeded limit drop lasts: the request count at which the endpoint's limit comes back.
    private var restoreLimitAt: Int?

    init(faults: HTTP2EndpointConfiguration.Faults, maximumConcurrentStreams: Int, seed: UInt64, connection: UInt32) {
        self.faults = faults
        self.maximumConcurrentStreams = maximumConcurrentStreams
        self.connection = connection
        self.random = SeededGenerator(seed: seed ^ 0x4832, stream: UInt64(connection))
        self.fullLimit = maximumConcurrentStreams
    }

    /// The limit the preface announces: a token-authenticated connection gets 1 stream until its first request is
    /// accepted, as APNs does (unless the faults turn that off).
    func prefaceLimit(tokenAuthenticated: Bool) -> Int {
        tokenAuthenticated && self.faults.tokenConnectionsStartWithOneStream ? 1 : self.fullLimit
    }

    /// APNs' limit after an answer: the full limit after an accepted request (the first one lifts a token
    /// connection's 1), 1 after a rejected one when `dropToOneAfterRejection` is on; nil: unchanged.
    func limit(afterStatus status: Int) -> Int? {
        if status == 200 { return self.fullLimit }
        return self.faults.dropToOneAfterRejection ? 1 : nil
    }

    /// Whether the connection is reset as a new stream's HEADERS arrive. Drawn only while `quiet`: no processed
    /// request waits for its answer (a slow answer, a blocked body), so a reset never loses an answer recorded.
    mutating func resets(quiet: Bool) -> Bool {
        guard self.faults.resetRate > 0, quiet else { return false }
        return self.random.chance(self.faults.resetRate)
    }

    /// The error that answers a request that would be accepted, if the faults give one: a burst's status (a burst
    /// starts here), then 429, 500 and 503 each by its rate; nil: the request is accepted.
    mutating func injectedError() -> HTTP2Answer? {
        let faults = self.faults
        if self.burstRemaining == 0, faults.errorBurstRate > 0, self.random.chance(faults.errorBurstRate) {
            self.burstRemaining = faults.errorBurstLength
            self.burstStatus = [429, 500, 503][Int(self.random.next() % 3)]
        }
        if self.burstRemaining > 0 {
            self.burstRemaining -= 1
            switch self.burstStatus {
            case 429: return .refused(.tooManyRequests, retryAfter: faults.retryAfterSeconds)
            case 503: return .refused(.serviceUnavailable)
            default: return .refused(.internalServerError)
            }
        }
        if faults.tooManyRequestsRate > 0 && self.random.chance(faults.tooManyRequestsRate) {
            return .refused(.tooManyRequests, retryAfter: faults.retryAfterSeconds)
        }
        if faults.internalServerErrorRate > 0 && self.random.chance(faults.internalServerErrorRate) {
            return .refused(.internalServerError)
        }
        if faults.serviceUnavailableRate > 0 && self.random.chance(faults.serviceUnavailableRate) {
            return .refused(.serviceUnavailable)
        }
        return nil
    }

    /// The connection faults after its `requests`th request is answered: each stream limit to announce, in order
    /// (`announce`: a shrink at `shrinkAfterStreams` on the connections `shrinkConnections` names, the limit back at `restoreAfterStreams`, a seeded drop or
    /// its end), and whether to send GOAWAY now (never once `goAwaySent`).
    mutating func afterRequest(_ requests: Int, goAwaySent: Bool, announce: (Int) -> Void) -> Bool {
        let faults = self.faults
        if let after = faults.shrinkAfterStreams, requests == after,
            faults.shrinkConnections.map({ self.connection <= $0 }) ?? true
        {
            self.fullLimit = faults.shrinkTo
            announce(faults.shrinkTo)
        }
        if let after = faults.restoreAfterStreams, requests == after {
            self.fullLimit = self.maximumConcurrentStreams
            announce(self.fullLimit)
        }
        if let at = self.restoreLimitAt, requests >= at {
            self.restoreLimitAt = nil
            self.fullLimit = self.maximumConcurrentStreams
            announce(self.fullLimit)
        } else if self.restoreLimitAt == nil, faults.shrinkRate > 0, self.random.chance(faults.shrinkRate) {
            self.restoreLimitAt = requests + faults.shrinkForStreams
            self.fullLimit = faults.shrinkTo
            announce(faults.shrinkTo)
        }
        guard !goAwaySent else { return false }
        if let after = faults.goAwayAfterStreams, requests == after { return true }
        return faults.goAwayRate > 0 && self.random.chance(faults.goAwayRate)
    }
}
