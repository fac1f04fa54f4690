import Logging
import NIOConcurrencyHelpers
import NIOCore
import SalvoRows

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
        /// When the first TLS handshake ended, and when each connection wrote its first request (at most
        /// `maximumStartTimes` of them): how long the job took to start.
        var firstHandshakeAt: NIODeadline?
        var firstRequests: [NIODeadline] = []
        /// Each open connection's stream limit as it last reported it.
        var streamLimits: [ObjectIdentifier: Int] = [:]
        /// The job's last answer, for its give-up.
        var watch: HTTP2ProgressWatch
        /// The job's reconnect backoff after connections that brought no answer.
        var pacer: HTTP2ReconnectPacer
    }

    let work: HTTP2WorkQueue
    let template: HTTP2RequestTemplate
    let token: ProviderToken?
    /// The job's `--rate`, shared by every connection; nil for none.
    let rate: NIOLockedValueBox<HTTP2RateLimiter>?
    /// What each connection's state machine needs: the stream cap, timeouts, retry policy.
    let connectionConfiguration: HTTP2ConnectionMachine.Configuration
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
    /// Takes each batch of rows' answers as they come (a service writes them to its store); nil: the answers are
    /// gathered in `recorded` for the job's end (a bulk job's files).
    let answers: (@Sendable (HTTP2Answers) -> Void)?
    /// Takes one request-to-answer time per batch of answers (nanoseconds), for the latency metric.
    let answerLatency: (@Sendable (Int64) -> Void)?
    /// Asked about every row right before it is written (a service's leases): a row it withholds is not written and
    /// goes to `answers` as unsent. Nil: every row is written.
    let gate: (any HTTP2WriteGate)?
    /// Called once, when the first TLS handshake tells the distance: the pool sizes its first step then, not on
    /// its next timer tick.
    let onFirstHandshake = NIOLockedValueBox<(@Sendable () -> Void)?>(nil)
    /// Connection events and every connection error, with its cause.
    let logger: Logger
    /// Where the job's decisions read the time (`HTTP2ClientConfiguration.clock`).
    let clock: any JobClock

    init(
        work: HTTP2WorkQueue,
        template: HTTP2RequestTemplate,
        token: ProviderToken?,
        rate: HTTP2RateLimiter? = nil,
        connectionConfiguration: HTTP2ConnectionMachine.Configuration,
        outcomes: RowOutcomes,
        answers: (@Sendable (HTTP2Answers) -> Void)? = nil,
        answerLatency: (@Sendable (Int64) -> Void)? = nil,
        gate: (any HTTP2WriteGate)? = nil,
        reconnect: ReconnectPolicy = .default,
        logger: Logger = Logger(label: "salvo.h2", factory: { _ in SwiftLogNoOpLogHandler() }),
        clock: any JobClock = SystemJobClock(),
        now: NIODeadline? = nil
    ) {
        self.clock = clock
        let now = now ?? .uptimeNanoseconds(clock.now)
        self.answers = answers
        self.answerLatency = answerLatency
        self.gate = gate
        self.logger = logger
        self.work = work
        self.template = template
        self.token = token
        self.rate = rate.map { NIOLockedValueBox($0) }
        self.connectionConfiguration = connectionConfiguration
        self.emptyOutcomes = outcomes
        self.recorded = NIOLockedValueBox(
            Recorded(
                outcomes: outcomes,
                watch: HTTP2ProgressWatch(giveUpAfter: TimeAmount(reconnect.giveUpAfter), now: now),
                pacer: HTTP2ReconnectPacer(policy: reconnect, now: now)
            )
        )
    }

    /// Takes a connection's batch of results: the outcomes first, then the rows back to the queue, so the job
    /// never finishes without them.
    func record(_ results: HTTP2ConnectionMachine.Results, from connection: ObjectIdentifier) {
        // Handed on as they come, the rows' answers are not kept: a job that never ends holds only counts.
        if let answers = self.answers { answers(HTTP2Answers(results.outcomes, deliveries: results.deliveries)) }
        let keepsRows = self.answers == nil
        self.recorded.withLockedValue {
            if keepsRows { $0.outcomes.merge(results.outcomes) } else { $0.outcomes.mergeCounts(results.outcomes) }
            $0.answered += results.finals
            $0.streamLimits[connection] = results.streamLimit
            if let roundTrip = results.roundTrip { $0.roundTrip = min($0.roundTrip ?? roundTrip, roundTrip) }
            if let sample = results.answerSample { self.answerLatency?(sample.nanoseconds) }
            if let until = results.progressUntil {
                $0.watch.progressed(until: until)
                $0.pacer.answered()
            }
            if keepsRows { $0.deliveries.append(contentsOf: results.deliveries) }
            if results.flightCuts > 0 {
                $0.flightCuts += results.flightCuts
                if let window = results.smallestFlightWindow {
                    $0.smallestFlightWindow = min($0.smallestFlightWindow ?? window, window)
                }
            }
        }
        self.work.complete(finals: results.finals, retries: results.retries)
    }

    /// Now, on the job's clock.
    func now() -> NIODeadline {
        .uptimeNanoseconds(self.clock.now)
    }

    /// A TLS handshake took `duration` (TCP connected to handshake done: about one round trip with TLS 1.3).
    func noteHandshake(_ duration: TimeAmount, now: NIODeadline) {
        self.recorded.withLockedValue {
            $0.handshake = min($0.handshake ?? duration, duration)
            if $0.firstHandshakeAt == nil { $0.firstHandshakeAt = now }
        }
        let first = self.onFirstHandshake.withLockedValue { hook in
            defer { hook = nil }
            return hook
        }
        first?()
    }

    /// The most first requests kept for the job's start.
    static let maximumStartTimes = 256

    /// A connection wrote its first request (once per connection, never per request).
    func noteFirstRequest(now: NIODeadline) {
        self.recorded.withLockedValue {
            if $0.firstRequests.count < Self.maximumStartTimes { $0.firstRequests.append(now) }
        }
    }

    /// A connection closed: its streams are no longer available.
    func connectionClosed(_ connection: ObjectIdentifier) {
        self.recorded.withLockedValue { _ = $0.streamLimits.removeValue(forKey: connection) }
    }

    /// The rows a connection may write now: up to `room`, within the job's `--rate` (what the bucket granted and the
    /// queue had no row for goes back to it). `rateLimited`: the rate held rows back; `nextDelayed`: when a row may
    /// be ready, for a connection that got none.
    func take(
        room: Int,
        maximumBytes: Int = Int.max,
        now: NIODeadline
    ) -> (items: [HTTP2WorkItem], rateLimited: Bool, nextDelayed: NIODeadline?) {
        var room = room
        var nextDelayed = self.work.nextDelayed
        var rateLimited = false
        if let rate = self.rate {
            let granted = rate.withLockedValue { $0.take(upTo: room, now: now) }
            rateLimited = granted < room
            if granted == 0 { nextDelayed = rate.withLockedValue { $0.nextAvailable(now: now) } }
            room = granted
        }
        var items = room > 0 ? self.work.take(maximum: room, maximumBytes: maximumBytes, now: now) : []
        if let gate = self.gate, !items.isEmpty {
            items = self.admitted(items, by: gate)
            // Rows withheld leave room that the rows behind them may fill now, rather than at the next wake-up.
            while items.count < room {
                let bytes = items.reduce(0) { $0 + ($1.payload?.readableBytes ?? 0) }
                let more = self.work.take(maximum: room - items.count, maximumBytes: maximumBytes - bytes, now: now)
                guard !more.isEmpty else { break }
                items += self.admitted(more, by: gate)
            }
        }
        if let rate = self.rate, items.count < room { rate.withLockedValue { $0.giveBack(room - items.count) } }
        // Nothing to send and nothing in flight while the source reads ahead: the server is not the one stalling.
        if items.isEmpty, self.work.waitsForInput {
            self.recorded.withLockedValue { $0.watch.foundNoRows(waitingForInput: true, now: now) }
        }
        return (items, rateLimited, nextDelayed)
    }

    /// The rows of `items` the gate lets be written; the others are settled at once and the queue counts them done:
    /// a served job hands them to `answers` as unsent (the store decides what they were), a job with a source leaves
    /// them in its outcomes, unsent when no send of theirs can have arrived and unanswered when one was lost (its
    /// journal and report say so, as for the rows a stopped job never took).
    private func admitted(_ items: [HTTP2WorkItem], by gate: any HTTP2WriteGate) -> [HTTP2WorkItem] {
        let withheld = gate.withheld(items.map(\.row.line))
        guard !withheld.isEmpty else { return items }
        var kept: [HTTP2WorkItem] = []
        kept.reserveCapacity(items.count - withheld.count)
        var left: [HTTP2WorkItem] = []
        for item in items {
            if withheld.contains(item.row.line) { left.append(item) } else { kept.append(item) }
        }
        if let answers = self.answers {
            answers(
                HTTP2Answers(
                    unsettled: left.map {
                        UnsettledRow(token: $0.row.token.hexString, file: "", line: $0.row.line, outcome: .unsent)
                    }
                )
            )
        } else {
            self.recorded.withLockedValue { recorded in
                for item in left { recorded.outcomes.leave(item.row, item.losses > 0 ? .unanswered : .unsent) }
            }
        }
        self.work.complete(finals: left.count, retries: [HTTP2WorkItem]())
        return kept
    }

    /// When the `--rate` bucket has room again (nil without a rate).
    func nextRateSlot(now: NIODeadline) -> NIODeadline? {
        self.rate?.withLockedValue { $0.nextAvailable(now: now) }
    }

    /// Why the job stops now, when it has gone its give-up time without an answer; nil while it has not.
    func stall(now: NIODeadline, host: String, port: Int) -> HTTP2JobStop? {
        let watch = self.recorded.withLockedValue { $0.watch }
        guard watch.isStalled(now: now) else { return nil }
        return watch.stop(connectionErrors: self.connectionErrors.withLockedValue { $0 }, host: host, port: port)
    }

    /// A connection ended (GOAWAY, a close, a failed connect), `answered` when it read any answer: when the slot
    /// may connect again, backed off per job after fruitless ones.
    func reconnectAt(answered: Bool, now: NIODeadline, random: Double) -> NIODeadline {
        self.recorded.withLockedValue {
            $0.pacer.connectionEnded(answered: answered)
            return $0.pacer.nextConnect(now: now, random: random)
        }
    }

    /// A connection error or a cause a stopped job names: logged (with its cause) and kept for the report.
    func noteConnectionError(_ message: String) {
        self.logger.warning("connection error", metadata: ["cause": "\(message)"])
        self.connectionErrors.withLockedValue { errors in
            // Bounded: the first few explain a failure; thousands would not.
            if errors.count < 32 { errors.append(message) }
        }
    }
}
