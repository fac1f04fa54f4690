import APNSWire
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import SalvoRows

/// Runs a bulk send over the HTTP/2 provider API: every valid row of a token source gets one request, and the
/// result says what became of each.
///
/// Rows flow from the source through a shared work queue to a pool of connections; retryable answers come back
/// to the queue after their backoff; the job ends when every row has its answer, or stops early when the
/// credentials are refused (`HTTP2JobResult.stopped`).
public enum HTTP2Job {
    /// Sends `configuration.payload` to every row of `source`.
    ///
    /// - Parameters:
    ///   - source: a token source whose `validate()` has returned `summary`.
    ///   - summary: what validation found (counts for the report).
    ///   - group: the event loops to run on; a group of `min(connections, cores)` threads (with
    ///     `maximumConnections`, `min(maximumConnections, cores)`) is made (and shut down) when nil.
    ///   - progressInterval: how often `progress` is called while the job runs.
    ///   - progress: the counts so far, for progress lines and metrics.
    ///   - answerLatency: takes one request-to-answer time per batch of answers (nanoseconds; the latency metric).
    ///   - stop: lets the caller stop the job (a signal): no new rows are sent, the streams in flight have the
    ///     stop's grace to answer (none after a second request), then the job ends with `stopped` set and the
    ///     rows without an answer counted in `notSent`.
    /// - Throws: `HTTP2ClientError` for a configuration that cannot work (a payload over the push type's limit, a
    ///   topic or priority the push type does not take, unreadable credentials); APNs' answers are in the result,
    ///   never thrown.
    public static func run(
        configuration: HTTP2JobConfiguration,
        source: TokenSource,
        summary: TokenSource.Summary,
        group: (any EventLoopGroup)? = nil,
        progressInterval: Duration = .milliseconds(500),
        progress: (@Sendable (JobProgress) -> Void)? = nil,
        answerLatency: (@Sendable (Int64) -> Void)? = nil,
        stop: JobStop? = nil
    ) async throws(HTTP2ClientError) -> HTTP2JobResult {
        let client = configuration.client
        try client.validate()
        let limit = (configuration.headers.pushType ?? .alert).payloadLimit
        do {
            try configuration.payload.check(limit: limit)
        } catch {
            throw HTTP2ClientError(.configuration, "\(error.message)")
        }
        try Self.checkPushType(configuration.headers)
        let factory = try HTTP2ConnectionFactory(client)

        var report = JobReport()
        report.mode = "HTTP/2"
        report.gateway = "\(client.host):\(client.port)"
        report.connections = client.connections
        report.validRows = summary.validRows
        report.invalidInput = summary.rejects.count
        report.inputRows = summary.inputRows
        report.onUncertain = configuration.onUncertain.rawValue
        guard summary.validRows > 0 || !summary.isFinal else { return HTTP2JobResult(report: report) }

        var connection = Self.connectionConfiguration(configuration)
        connection.largestBody = source.maximumBodyLength ?? configuration.payload.byteCount
        // An input read while it is sent: its rows as estimated from what was read so far.
        var estimatedRows: (@Sendable () -> Int)?
        if !summary.isFinal { estimatedRows = { source.estimatedValidRows } }
        var tick: (@Sendable (HTTP2JobContext, ContinuousClock.Instant) -> Void)?
        if let progress {
            tick = { job, start in
                let validRows = summary.isFinal ? summary.validRows : source.estimatedValidRows
                progress(Self.progress(job, validRows: validRows, since: start))
            }
        }
        let running = HTTP2JobRun(
            configuration: configuration,
            connection: connection,
            factory: factory,
            makeWork: { (finished: EventLoopPromise<Void>) -> HTTP2WorkQueue in
                HTTP2WorkQueue(source: source, finished: finished)
            },
            outcomes: RowOutcomes(
                onUncertain: configuration.onUncertain,
                files: source.files,
                journal: configuration.journal
            ),
            answers: Optional<@Sendable (HTTP2Answers) -> Void>.none,
            rows: summary.isFinal ? summary.validRows : Int.max,
            estimatedRows: estimatedRows,
            group: group,
            progressInterval: progressInterval,
            progress: tick,
            answerLatency: answerLatency,
            gate: configuration.gate,
            stop: stop
        )
        let endedAt = await running.waitForEnd()
        let elapsed = endedAt - running.start
        let job = running.job
        let pool = running.pool
        let startDeadline = running.startDeadline

        // Rows never answered because the job stopped: sent and unanswered, given back, never handed out, or
        // never read. The chunk being read ahead is waited for, and the rows no connection took are read on to the
        // end of the input: blocking work, off the concurrency pool.
        let inputRows = report.inputRows
        let unsettledTail = configuration.unsettledTail
        let work = job.work
        let (recorded, finalReport) = await BlockingWork.run { [recorded = job.recorded] in
            var recorded = recorded.withLockedValue { $0 }
            work.waitForReadAhead()
            for item in work.abandonedItems {
                recorded.outcomes.leave(item.row, item.unanswered ? .unanswered : .unsent)
            }
            let finalReport = recorded.outcomes.finishJob(
                source: source,
                summary: summary,
                inputRows: inputRows,
                chunkRows: 4096,
                unsettledTail: unsettledTail,
                seconds: Self.seconds(elapsed),
                stopped: work.stopped?.message
            )
            return (recorded, finalReport)
        }
        var result = HTTP2JobResult(outcomes: recorded.outcomes, deliveries: recorded.deliveries)
        result.report = finalReport
        result.report.mode = report.mode
        result.report.gateway = report.gateway
        result.report.connections = pool.connections
        result.report.maximumConnections = client.maximumConnections
        result.report.connectionsReason = pool.sizingReason
        result.report.roundTripMilliseconds = recorded.roundTrip.map { Double($0.nanoseconds) / 1e6 }
        result.report.written = job.work.counts.taken
        result.stopped = job.work.stopped
        result.connectionErrors = job.connectionErrors.withLockedValue { $0 }
        result.firstHandshakeSeconds = recorded.firstHandshakeAt.map { Self.seconds($0 - startDeadline) }
        result.firstRequestSeconds = recorded.firstRequests.sorted().map { Self.seconds($0 - startDeadline) }
        result.flightCuts = recorded.flightCuts
        result.smallestFlightWindow = recorded.smallestFlightWindow
        result.notSent = finalReport.notSent
        result.closingSeconds = Self.seconds(ContinuousClock.now - endedAt)
        return result
    }

    /// What each connection's state machine needs, from the job's configuration.
    static func connectionConfiguration(_ configuration: HTTP2JobConfiguration) -> HTTP2ConnectionMachine.Configuration
    {
        let client = configuration.client
        var connection = HTTP2ConnectionMachine.Configuration(
            maximumStreams: client.maximumStreamsPerConnection ?? Int.max,
            requestTimeout: TimeAmount(client.requestTimeout),
            pingInterval: TimeAmount(client.pingInterval),
            pingTimeout: TimeAmount(client.pingTimeout),
            retry: configuration.retry,
            recordDeliveries: configuration.recordDeliveries
        )
        // SETTINGS come right after TLS from a live server: as long as a connect may take.
        connection.settingsTimeout = TimeAmount(client.connectTimeout)
        return connection
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) * 1e-18
    }

    static func seconds(_ amount: TimeAmount) -> Double { Double(amount.nanoseconds) / 1e9 }

    /// The counts so far: what the connections recorded, and the rows they hold.
    static func progress(
        _ job: HTTP2JobContext,
        validRows: Int,
        since start: ContinuousClock.Instant
    )
        -> JobProgress
    {
        let elapsed = ContinuousClock.now - start
        var snapshot = JobProgress(
            validRows: validRows,
            seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18,
            report: job.recorded.withLockedValue { $0.outcomes.report }
        )
        let counts = job.work.counts
        snapshot.inFlight = counts.outstanding
        snapshot.report.written = counts.taken
        snapshot.connections = job.openConnections.withLockedValue { $0 }
        return snapshot
    }

    /// Refuses headers every request would be refused for (`APNSPushType.problem`): a topic without the push type's
    /// suffix, a priority the push type does not take. Without a topic (a certificate names it) only the priority is
    /// checked.
    static func checkPushType(_ headers: APNSRequestHeaders) throws(HTTP2ClientError) {
        guard let pushType = headers.pushType,
            let problem = pushType.problem(
                topic: headers.topic,
                priority: headers.priority,
                priorityIsDefault: headers.priority == nil,
                naming: .headers
            )
        else { return }
        throw HTTP2ClientError(.configuration, problem.message)
    }
}
