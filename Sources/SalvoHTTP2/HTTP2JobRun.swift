import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import SalvoRows

/// The running part of a job, whichever its rows' source (a bulk job's token source, a service's feed): the
/// connection pool started on the job's event loops, the progress ticker, the give-up watchdog and the stop, and
/// the wait for the job's end. What a job does with its rows before and after is its own (`HTTP2Job.run`,
/// `HTTP2Job.serve`).
final class HTTP2JobRun: Sendable {
    let job: HTTP2JobContext
    let pool: HTTP2ConnectionPool
    let start: ContinuousClock.Instant
    let startDeadline: NIODeadline
    private let ownGroup: MultiThreadedEventLoopGroup?
    private let ended: EventLoopPromise<Void>
    private let end: @Sendable () -> Void
    private let ticker: RepeatedTask?
    private let watchdog: RepeatedTask?
    private let stop: JobStop?

    /// Starts the job's connections.
    ///
    /// - Parameters:
    ///   - work: the job's rows; `finished` is the promise the queue succeeds when the job is finished.
    ///   - rows: the job's rows when known (the connection sizer's bound), else `Int.max`.
    ///   - progress: called every `progressInterval` with the job context and the time since the start.
    init(
        configuration: HTTP2JobConfiguration,
        connection: HTTP2ConnectionMachine.Configuration,
        factory: HTTP2ConnectionFactory,
        makeWork: (EventLoopPromise<Void>) -> HTTP2WorkQueue,
        outcomes: RowOutcomes,
        answers: (@Sendable (HTTP2Answers) -> Void)?,
        rows: Int,
        estimatedRows: (@Sendable () -> Int)?,
        group: (any EventLoopGroup)?,
        progressInterval: Duration,
        progress: (@Sendable (HTTP2JobContext, ContinuousClock.Instant) -> Void)?,
        answerLatency: (@Sendable (Int64) -> Void)?,
        gate: (any HTTP2WriteGate)? = nil,
        stop: JobStop?
    ) {
        let client = configuration.client
        let threads = min(client.maximumConnections ?? client.connections, System.coreCount)
        let ownGroup: MultiThreadedEventLoopGroup? =
            group == nil ? MultiThreadedEventLoopGroup(numberOfThreads: threads) : nil
        let loops: any EventLoopGroup = group ?? ownGroup!
        self.ownGroup = ownGroup
        self.start = ContinuousClock.now
        self.startDeadline = .uptimeNanoseconds(client.clock.now)
        let finished = loops.next().makePromise(of: Void.self)
        let job = HTTP2JobContext(
            work: makeWork(finished),
            template: HTTP2RequestTemplate(
                authority: client.authority,
                scheme: client.scheme,
                headers: configuration.headers,
                payload: configuration.payload
            ),
            token: client.authentication.providerToken,
            rate: client.rate.map { HTTP2RateLimiter(perSecond: $0, now: .uptimeNanoseconds(client.clock.now)) },
            connectionConfiguration: connection,
            outcomes: outcomes,
            answers: answers,
            answerLatency: answerLatency,
            gate: gate,
            reconnect: client.reconnect,
            logger: client.logger,
            clock: client.clock
        )
        self.job = job
        self.pool = HTTP2ConnectionPool(
            configuration: client,
            factory: factory,
            job: job,
            group: loops,
            rows: rows,
            estimatedRows: estimatedRows
        )
        let start = self.start
        self.ticker = progress.map { callback in
            loops.next().scheduleRepeatedTask(
                initialDelay: TimeAmount(progressInterval),
                delay: TimeAmount(progressInterval)
            ) { _ in callback(job, start) }
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
        self.ended = ended
        self.end = end
        finished.futureResult.whenComplete { _ in end() }
        // The give-up: a job that has gone `--give-up-seconds` without an answer stops, however its connections
        // stall (`HTTP2ProgressWatch`), and ends at once: nothing in flight is coming back.
        self.watchdog =
            client.reconnect.giveUpAfter > .zero
            ? loops.next().scheduleRepeatedTask(initialDelay: .milliseconds(100), delay: .milliseconds(100)) { _ in
                guard !job.work.isDone, let stall = job.stall(now: job.now(), host: client.host, port: client.port)
                else { return }
                client.logger.error("giving up", metadata: ["cause": "\(stall.message)"])
                job.work.stop(stall)
                end()
            } : nil
        self.stop = stop
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
        self.pool.start()
    }

    /// Waits for the job's end (every row answered, the give-up, or the stop's grace), then closes its connections
    /// (which gives back the rows still in flight) and shuts down the loops it made.
    ///
    /// - Returns: when the job ended (its last answer, or the stop), before the connections closed.
    func waitForEnd() async -> ContinuousClock.Instant {
        // The promise is only ever succeeded.
        try? await self.ended.futureResult.get()
        // No signal acts on the loops from here on: they are shut down below.
        self.stop?.detach()
        self.ticker?.cancel()
        self.watchdog?.cancel()
        // The job's time ends with its last answer (or the stop): closing the connections (TLS close_notify, a
        // round trip away) delivers nothing. Closing gives back the rows still in flight (they count as not sent).
        // Every connection closes at once, and the wait for the server's goodbyes is bounded (`HTTP2JobEnding`).
        let endedAt = ContinuousClock.now
        await self.pool.stop()
        try? await self.ownGroup?.shutdownGracefully()
        return endedAt
    }

    /// Ends the job now, as a give-up does: nothing more is sent, the rows in flight are left.
    func endNow(_ stop: HTTP2JobStop) {
        self.job.work.stop(stop)
        self.end()
    }
}
