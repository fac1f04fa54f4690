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

        let threads = min(client.maximumConnections ?? client.connections, System.coreCount)
        let ownGroup: MultiThreadedEventLoopGroup? =
            group == nil ? MultiThreadedEventLoopGroup(numberOfThreads: threads) : nil
        let loops: any EventLoopGroup = group ?? ownGroup!
        let start = ContinuousClock.now
        let startDeadline = NIODeadline.now()
        let finished = loops.next().makePromise(of: Void.self)
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
        connection.largestBody = source.maximumBodyLength ?? configuration.payload.byteCount
        let job = HTTP2JobContext(
            work: HTTP2WorkQueue(source: source, finished: finished),
            template: HTTP2RequestTemplate(
                authority: client.authority,
                scheme: client.scheme,
                headers: configuration.headers,
                payload: configuration.payload
            ),
            token: client.authentication.providerToken,
            rate: client.rate.map { HTTP2RateLimiter(perSecond: $0, now: .now()) },
            connectionConfiguration: connection,
            outcomes: RowOutcomes(
                onUncertain: configuration.onUncertain,
                files: source.files,
                journal: configuration.journal
            ),
            answerLatency: answerLatency,
            reconnect: client.reconnect,
            logger: client.logger
        )
        // An input read while it is sent: its rows as estimated from what was read so far.
        var estimatedRows: (@Sendable () -> Int)?
        if !summary.isFinal { estimatedRows = { source.estimatedValidRows } }
        let pool = HTTP2ConnectionPool(
            configuration: client,
            factory: factory,
            job: job,
            group: loops,
            rows: summary.isFinal ? summary.validRows : Int.max,
            estimatedRows: estimatedRows
        )
        pool.start()
        let ticker = progress.map { callback in
            loops.next().scheduleRepeatedTask(
                initialDelay: TimeAmount(progressInterval),
                delay: TimeAmount(progressInterval)
            ) { _ in
                let validRows = summary.isFinal ? summary.validRows : source.estimatedValidRows
                callback(Self.progress(job, validRows: validRows, since: start))
            }
        }
        // The job ends when every row has its answer, or when a stop's grace runs out.
        let ended = loops.next().makePromise(of: Void.self)
        let endedOnce = NIOLockedValueBox(false)
        let end: @Sendable () -> Void = {
            if endedOnce.withLockedValue({ done in
                defer { done = true }
                return !done
            }) {
                ended.succeed()
            }
        }
        finished.futureResult.whenComplete { _ in end() }
        // The give-up: a job that has gone `--give-up-seconds` without an answer stops, however its connections
        // stall (`HTTP2ProgressWatch`), and ends at once: nothing in flight is coming back.
        let watchdog: RepeatedTask? =
            client.reconnect.giveUpAfter > .zero
            ? loops.next().scheduleRepeatedTask(initialDelay: .milliseconds(100), delay: .milliseconds(100)) { _ in
                guard !job.work.isDone, let stall = job.stall(now: .now(), host: client.host, port: client.port)
                else { return }
                client.logger.error("giving up", metadata: ["cause": "\(stall.message)"])
                job.work.stop(stall)
                end()
            } : nil
        if let stop {
            let loop = loops.next()
            let grace = stop.grace
            stop.install { [weak stop] immediate in
                job.work.stop(HTTP2JobStop(reason: nil, message: stop?.reason ?? "interrupted"))
                if immediate {
                    end()
                } else {
                    loop.scheduleTask(in: TimeAmount(grace)) { end() }
                }
            }
        }
        // The promise is only ever succeeded.
        try? await ended.futureResult.get()
        // No signal acts on the loops from here on: they are shut down below.
        stop?.detach()
        ticker?.cancel()
        watchdog?.cancel()
        // The job's time ends with its last answer (or the stop): closing the connections (TLS close_notify, a
        // round trip away) delivers nothing. Closing gives back the rows still in flight (they count as not sent).
        // Every connection closes at once, and the wait for the server's goodbyes is bounded (`HTTP2JobEnding`).
        let endedAt = ContinuousClock.now
        let elapsed = endedAt - start
        await pool.stop()
        try? await ownGroup?.shutdownGracefully()

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

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) * 1e-18
    }

    private static func seconds(_ amount: TimeAmount) -> Double { Double(amount.nanoseconds) / 1e9 }

    /// The counts so far: what the connections recorded, and the rows they hold.
    private static func progress(
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
