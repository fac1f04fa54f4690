import APNSWire
import NIOCore
import SalvoRows

/// Rows that arrive while a job runs (a service's queue), for `HTTP2Job.serve`: the job asks for the next ones on
/// a queue of its own and never finishes while the feed is open.
public protocol HTTP2RowFeed: AnyObject, Sendable {
    /// Rows ready now, at most `maximumRows`; when none is ready, waits a bounded time for some and returns [] if
    /// none came; nil once the feed is closed (the job then ends when the rows it took are answered). Called on
    /// the job's read-ahead queue, never on an event loop or the concurrency pool: it may block, bounded.
    func nextItems(maximumRows: Int) -> [HTTP2WorkItem]?

    /// The longest body a row may have (each row carries its own), for flow control.
    var maximumBodyLength: Int { get }
}

/// What decides, right before a served job writes a row, whether it may still be written: a service's store whose
/// rows are leased to it (a row whose lease ran out, or that another worker took over, must not be written by this
/// one). Called on the connections' event loops with the rows about to be written: it must not block.
public protocol HTTP2WriteGate: Sendable {
    /// Of the rows with these lines, those that must not be written now; empty when every one may be.
    func withheld(_ lines: [Int]) -> Set<Int>

    /// Whether nothing at all may be written now (a fleet partition whose lease may have run out; a row written by
    /// this worker that may be another's): asked by each of the job's connections at every flush, right before its
    /// bytes leave (`WriteFenceHandler`), so that frames made before a stall do not leave after it. A gate that only
    /// judges rows as they are taken answers false (the default).
    func forbidsEveryWrite() -> Bool
}

extension HTTP2WriteGate {
    public func forbidsEveryWrite() -> Bool { false }
}

/// The answers of a batch of rows, as a connection records them: what `HTTP2Job.serve` hands its caller as they
/// come, rather than gathering them for the job's end. Rows are named by `TokenRow.line`.
public struct HTTP2Answers: Sendable {
    /// Accepted (200), with the `apns-id` the service answered.
    public var delivered: [HTTP2Delivery]
    /// Refused, with the status and reason, and for a token the service called unregistered, since when
    /// (milliseconds since 1970).
    public var refused: [Refusal]
    /// Without an end in this job: `unsent` (never written, or given back: to send again later) or unanswered and
    /// uncertain (written, and it may have arrived).
    public var unsettled: [UnsettledRow]

    public struct Refusal: Hashable, Sendable {
        public var line: Int
        public var status: Int
        public var reason: String
        public var unregisteredSince: Int64?
    }

    public var isEmpty: Bool { self.delivered.isEmpty && self.refused.isEmpty && self.unsettled.isEmpty }

    init(_ outcomes: RowOutcomes, deliveries: [HTTP2Delivery]) {
        self.delivered = deliveries
        var since: [Int: Int64] = [:]
        for token in outcomes.unregistered { if let timestamp = token.timestamp { since[token.line] = timestamp } }
        self.refused = outcomes.rejectedRows.map {
            Refusal(line: $0.line, status: $0.status, reason: $0.reason, unregisteredSince: since[$0.line])
        }
        self.unsettled = outcomes.unsettledRows
    }

    init(unsettled: [UnsettledRow]) {
        self.delivered = []
        self.refused = []
        self.unsettled = unsettled
    }
}

/// What a served job did, when it ended: its counts, and why it stopped if it did not end by its feed closing.
public struct HTTP2ServeResult: Sendable {
    public var report: JobReport
    public var stopped: HTTP2JobStop?
    public var connectionErrors: [String]
}

/// Adapts a feed to the work queue's source.
private final class FeedSource<Feed: HTTP2RowFeed>: HTTP2RowSource {
    let feed: Feed

    init(_ feed: Feed) { self.feed = feed }

    func nextChunk(maximumRows: Int) throws -> [TokenRow]? {
        self.feed.nextItems(maximumRows: maximumRows)?.map(\.row)
    }

    func nextItems(maximumRows: Int) throws -> [HTTP2WorkItem]? {
        self.feed.nextItems(maximumRows: maximumRows)
    }

    var maximumBodyLength: Int? { self.feed.maximumBodyLength }
}

extension HTTP2Job {
    /// The rows a served job reads ahead from its feed: few, since a row is taken from the store when it is read,
    /// and a request's rows should reach a connection at once rather than wait behind a long read-ahead.
    public static let servedChunkRows = 512

    /// A served job's own headers: none (each row's are whole).
    private static let noHeaders: APNSRequestHeaders = {
        var headers = try! APNSRequestHeaders()  // Nothing to check: every field is nil.
        headers.topic = nil
        return headers
    }()

    /// How long a served job's idle connection waits for a row at most before it looks again
    /// (`HTTP2ConnectionMachine.Configuration`): a bound only, since the queue wakes it when rows come
    /// (`HTTP2WorkQueue.wakeWhenRowsArrive`), so an idle service does not poll.
    public static let servedLookAgain = TimeAmount.seconds(1)

    /// Sends the rows of `feed` as they arrive, each with its own body and headers, over the same connections,
    /// state machines, retries and accounting as `run`; each batch of answers goes to `answers` as it comes.
    ///
    /// The job ends when the feed closes and every row taken is answered, when `stop` is requested (the rows in
    /// flight get its grace), or when the credentials are refused or the give-up fires (`stopped`). Every row the
    /// job took and did not settle goes to `answers` as unsettled before this returns: `unsent` ones (never written)
    /// may be sent again; unanswered ones may have arrived.
    ///
    /// - Parameters:
    ///   - configuration: the client, the retry and uncertainty policies. Its headers and payload are not sent: each
    ///     row carries its own (a row's headers are whole, so the job's would repeat them).
    ///   - gate: asked right before each row is written (a first send or a resend); a row it withholds is never
    ///     written and goes to `answers` as unsent.
    public static func serve(
        configuration: HTTP2JobConfiguration,
        feed: some HTTP2RowFeed,
        answers: @escaping @Sendable (HTTP2Answers) -> Void,
        group: (any EventLoopGroup)? = nil,
        answerLatency: (@Sendable (Int64) -> Void)? = nil,
        gate: (any HTTP2WriteGate)? = nil,
        stop: JobStop? = nil
    ) async throws(HTTP2ClientError) -> HTTP2ServeResult {
        var configuration = configuration
        configuration.headers = Self.noHeaders
        configuration.recordDeliveries = true
        let client = configuration.client
        try client.validate()
        let factory = try HTTP2ConnectionFactory(client)
        var connection = Self.connectionConfiguration(configuration)
        connection.largestBody = feed.maximumBodyLength
        connection.lookAgain = Self.servedLookAgain
        let source = FeedSource(feed)
        let running = HTTP2JobRun(
            configuration: configuration,
            connection: connection,
            factory: factory,
            makeWork: { HTTP2WorkQueue(source: source, chunkRows: Self.servedChunkRows, finished: $0) },
            outcomes: RowOutcomes(onUncertain: configuration.onUncertain, journal: configuration.journal),
            answers: answers,
            rows: Int.max,
            estimatedRows: nil,
            group: group,
            progressInterval: .seconds(1),
            progress: nil,
            answerLatency: answerLatency,
            gate: gate,
            stop: stop
        )
        _ = await running.waitForEnd()
        let job = running.job
        // The rows taken and not settled: given back unsent, or unanswered when the connections closed. The read
        // ahead is waited for (its rows are then in `abandonedItems` too): blocking, off the concurrency pool.
        let work = job.work
        let left = await BlockingWork.run { () -> [UnsettledRow] in
            work.waitForReadAhead()
            return work.abandonedItems.map { item in
                UnsettledRow(
                    token: item.row.token.hexString,
                    file: "",
                    line: item.row.line,
                    outcome: item.unanswered ? .unanswered : .unsent
                )
            }
        }
        if !left.isEmpty { answers(HTTP2Answers(unsettled: left)) }
        return HTTP2ServeResult(
            report: job.recorded.withLockedValue { $0.outcomes.report },
            stopped: work.stopped,
            connectionErrors: job.connectionErrors.withLockedValue { $0 }
        )
    }
}
