import APNSWire
import Dispatch
import NIOConcurrencyHelpers
internal import SalvoIO
import SalvoRows

/// The outcome of a job: the report, and the rows the gateway refused.
public struct JobResult: Sendable {
    public var report: JobReport
    public var rejectedRows: [RejectedRow]
    /// Tokens the gateway refused as invalid (status 8), for the suppression list.
    public var unregistered: [UnregisteredToken] = []
    /// Every valid row the job did not settle (uncertain and not resent, or unsent or unanswered when it stopped).
    public var unsettledRows: [UnsettledRow] = []
    /// The error that stopped the job before every row was settled (the report says how far it got).
    public var error: JobError?
}

/// A bulk send over the binary interface: N shards, each with its own queue, connection, buffers and sent
/// window, drawing rows from one token source; their reports merge at the end.
public enum BinaryJob {
    /// A snapshot of a running job, for progress lines and metrics.
    public typealias Progress = JobProgress

    /// How long the other connections have to settle their rows in flight once the input has failed.
    static let inputFailureGrace: Duration = .seconds(5)

    /// Runs a job to the end.
    ///
    /// - Parameters:
    ///   - source: validated (`validate()` returned `summary`), or opened (`open()`: `summary` is not final, and the
    ///     report takes the source's once every row has been read).
    ///   - progress: called about every `progressInterval` on a private queue while the job runs.
    ///   - stop: lets the caller stop the job (a signal): it drains, then returns what it settled.
    /// - Throws: only when the job cannot start (credentials unreadable, a transport refused here). A job that
    ///   cannot go on (credentials refused, gateway unreachable after every retry, input unreadable) returns its
    ///   result with `error` set and the rows it did not settle in `report.notSent`.
    public static func run(
        configuration: BinaryJobConfiguration,
        source: TokenSource,
        summary: TokenSource.Summary,
        inputRows: Int,
        progressInterval: Duration = .milliseconds(500),
        progress: (@Sendable (Progress) -> Void)? = nil,
        stop: JobStop? = nil
    ) async throws(JobError) -> JobResult {
        precondition(configuration.connections >= 1 && configuration.connections <= 64, "1 to 64 connections")
        let capacity = max(1024, configuration.windowRows / configuration.connections)
        let tls = try configuration.credentials.makeContext()
        let clock = configuration.clock
        let pacer = ConnectPacer(
            floor: configuration.reconnect.minimumInterval.nanoseconds,
            ceiling: configuration.reconnect.maximumDelay.nanoseconds,
            now: clock.now,
            opening: configuration.connections
        )
        let shards: [Shard]
        do {
            shards = try (0..<configuration.connections).map { index in
                try Shard(
                    index: index,
                    configuration: configuration,
                    tls: tls,
                    source: source,
                    pacer: pacer,
                    windowCapacity: capacity
                )
            }
        } catch {
            // The transport cannot be set up here (io_uring refused): no connection could be made.
            throw JobError(.configuration, "\(error)")
        }
        let started = clock.now
        let seconds = { @Sendable in Double(clock.now &- started) / 1e9 }

        let ticker = progress.map { callback in
            let timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "salvo.progress"))
            let interval = Int(
                progressInterval.components.seconds * 1000 + progressInterval.components.attoseconds
                    / 1_000_000_000_000_000
            )
            timer.schedule(deadline: .now() + .milliseconds(interval), repeating: .milliseconds(interval))
            timer.setEventHandler {
                let validRows = summary.isFinal ? summary.validRows : source.estimatedValidRows
                var snapshot = Progress(validRows: validRows, seconds: seconds())
                for shard in shards {
                    shard.queue.sync {
                        snapshot.report.merge(shard.machine.outcomes.report)
                        snapshot.inFlight += shard.machine.window.count
                        if case .open = shard.machine.state { snapshot.connections += 1 }
                    }
                }
                callback(snapshot)
            }
            timer.resume()
            return timer
        }
        defer { ticker?.cancel() }

        let failure = NIOLockedValueBox<JobError?>(nil)
        stop?.install { immediate in
            for shard in shards {
                if immediate { shard.stop() } else { shard.drain(grace: stop?.grace ?? .zero) }
            }
        }
        await withTaskGroup(of: Void.self) { group in
            for shard in shards {
                group.addTask {
                    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                        shard.start { result in
                            if case .failure(let error) = result {
                                let first = failure.withLockedValue { current -> Bool in
                                    guard current == nil else { return false }
                                    current = error
                                    return true
                                }
                                if first {
                                    for other in shards where other !== shard {
                                        // An input that fails leaves the connections sound: the others settle what
                                        // they have in flight (bounded), so what the gateway took is counted.
                                        if error.code == .input {
                                            other.drain(grace: Self.inputFailureGrace)
                                        } else {
                                            other.stop()
                                        }
                                    }
                                }
                            }
                            continuation.resume()
                        }
                    }
                }
            }
        }
        // The shards are done: a signal from here on has nothing to stop.
        stop?.detach()
        let error = failure.withLockedValue { $0 }
        let stopped = error?.message ?? stop?.reason
        let jobSeconds = seconds()
        // Each shard's outcomes are read on its queue, and the rows no connection took are read on to the end of the
        // input (spilled to the unsettled file): blocking work, off the concurrency pool.
        return await BlockingWork.run {
            var outcomes = RowOutcomes(
                onUncertain: configuration.onUncertain,
                files: source.files,
                journal: configuration.journal
            )
            for shard in shards {
                shard.queue.sync { outcomes.merge(shard.machine.outcomes) }
            }
            var report = outcomes.finishJob(
                source: source,
                summary: summary,
                inputRows: inputRows,
                chunkRows: configuration.chunkRows,
                unsettledTail: configuration.unsettledTail,
                seconds: jobSeconds,
                stopped: stopped
            )
            var rejectedRows = outcomes.rejectedRows
            report.mode = configuration.modeName + " over " + (shards.first?.transportKind.description ?? "?")
            report.gateway = "\(configuration.host):\(configuration.port)"
            report.connections = configuration.connections
            rejectedRows.sort { $0.line < $1.line }
            return JobResult(
                report: report,
                rejectedRows: rejectedRows,
                unregistered: outcomes.unregistered,
                unsettledRows: outcomes.unsettledRows,
                error: error
            )
        }
    }
}
