import NIOConcurrencyHelpers
import NIOCore
import SalvoEngine

/// What every connection of a job shares: the work queue, the request template, the token, the policies, and
/// the outcomes recorded so far.
///
/// Thread-safe: its fields are immutable or locked; connections merge their outcomes once per read batch.
final class HTTP2JobContext: Sendable {
    /// The rows' outcomes gathered from every connection, and the deliveries when they are recorded.
    struct Recorded: Sendable {
        var outcomes: RowOutcomes
        var deliveries: [HTTP2Delivery] = []
        /// 429 answers that cut a connection's flight window, and the smallest window they left.
        var flightCuts = 0
        var smallestFlightWindow: Int?
        /// Rows settled for good, for the rate the connection sizer measures.
        var answered = 0
        /// The shortest time from a request to its answer, on any connection.
        var roundTrip: TimeAmount?
        /// The shortest TLS handshake (TCP connected to handshake done: about one round trip with TLS 1.3), known
        /// before any answer.
        var handshake: TimeAmount?
        /// Each open connection's stream limit as it last reported it.
        var streamLimits: [ObjectIdentifier: Int] = [:]
    }

    let work: HTTP2WorkQueue
    let template: HTTP2RequestTemplate
    let token: ProviderToken?
    /// The job's `--rate`, shared by every connection; nil for none.
    let rate: NIOLockedValueBox<HTTP2RateLimiter>?
    /// What each connection's state machine needs: the stream cap, timeouts, retry policy.
    let connectionConfiguration: HTTP2ConnectionStateMachine.Configuration
    /// Empty outcomes with the job's policy for uncertain rows and its input files, for a connection to record
    /// into.
    let emptyOutcomes: RowOutcomes
    let recorded: NIOLockedValueBox<Recorded>
    /// Connection failures and protocol errors, for the report's explanation when a job cannot finish.
    let connectionErrors = NIOLockedValueBox([String]())
    /// Connections that are open (ready to take requests), for progress and metrics.
    let openConnections = NIOLockedValueBox(0)
    /// Whether any connection of the job has passed its credentials: until then, a failure that cannot heal
    /// (`HTTP2ConnectFailure`) stops the job at once.
    let anyReady = NIOLockedValueBox(false)
    /// Takes one request-to-answer time per batch of answers (nanoseconds), for the latency metric.
    let answerLatency: (@Sendable (Int64) -> Void)?

    init(
        work: HTTP2WorkQueue,
        template: HTTP2RequestTemplate,
        token: ProviderToken?,
        rate: HTTP2RateLimiter? = nil,
        connectionConfiguration: HTTP2ConnectionStateMachine.Configuration,
        outcomes: RowOutcomes,
        answerLatency: (@Sendable (Int64) -> Void)? = nil
    ) {
        self.answerLatency = answerLatency
        self.work = work
        self.template = template
        self.token = token
        self.rate = rate.map { NIOLockedValueBox($0) }
        self.connectionConfiguration = connectionConfiguration
        self.emptyOutcomes = outcomes
        self.recorded = NIOLockedValueBox(Recorded(outcomes: outcomes))
    }

    /// Takes a connection's batch of results: the outcomes first, then the rows back to the queue, so the job
    /// never finishes without them.
    func record(_ results: HTTP2ConnectionStateMachine.Results, from connection: ObjectIdentifier) {
        self.recorded.withLockedValue {
            $0.outcomes.merge(results.outcomes)
            $0.answered += results.finals
            $0.streamLimits[connection] = results.streamLimit
            if let roundTrip = results.roundTrip { $0.roundTrip = min($0.roundTrip ?? roundTrip, roundTrip) }
            if let sample = results.answerSample { self.answerLatency?(sample.nanoseconds) }
            $0.deliveries.append(contentsOf: results.deliveries)
            if results.flightCuts > 0 {
                $0.flightCuts += results.flightCuts
                if let window = results.smallestFlightWindow {
                    $0.smallestFlightWindow = min($0.smallestFlightWindow ?? window, window)
                }
            }
        }
        self.work.complete(finals: results.finals, retries: results.retries)
    }

    /// A connection closed: its streams are no longer available.
    func connectionClosed(_ connection: ObjectIdentifier) {
        self.recorded.withLockedValue { _ = $0.streamLimits.removeValue(forKey: connection) }
    }

    /// The rows a connection may write now: up to `room`, within the job's `--rate` (what the bucket granted and the
    /// queue had no row for goes back to it). `rateLimited`: the rate held rows back; `nextDelayed`: when a row may
    /// be ready, for a connection that got none.
    func take(room: Int, now: NIODeadline) -> (items: [HTTP2WorkItem], rateLimited: Bool, nextDelayed: NIODeadline?) {
        var room = room
        var nextDelayed = self.work.nextDelayed
        var rateLimited = false
        if let rate = self.rate {
            let granted = rate.withLockedValue { $0.take(upTo: room, now: now) }
            rateLimited = granted < room
            if granted == 0 { nextDelayed = rate.withLockedValue { $0.nextAvailable(now: now) } }
            room = granted
        }
        let items = room > 0 ? self.work.take(maximum: room, now: now) : []
        if let rate = self.rate, items.count < room { rate.withLockedValue { $0.giveBack(room - items.count) } }
        return (items, rateLimited, nextDelayed)
    }

    /// When the `--rate` bucket has room again (nil without a rate).
    func nextRateSlot(now: NIODeadline) -> NIODeadline? {
        self.rate?.withLockedValue { $0.nextAvailable(now: now) }
    }

    func noteConnectionError(_ message: String) {
        self.connectionErrors.withLockedValue { errors in
            // Bounded: the first few explain a failure; thousands would not.
            if errors.count < 32 { errors.append(message) }
        }
    }
}
