import APNSWire
import Foundation
import NIOConcurrencyHelpers
import NIOSSL
import SalvoBinary
import SalvoDevelopment
import SalvoHTTP2
import SalvoObservability
import SalvoRows
import SalvoSend
import SalvoSimulator

/// Runs a soak: round after round, a fresh simulator under the plan, fresh tokens, one bulk send as a user would
/// make it (library defaults), the report checked against the ledger; the process sampled while each round runs
/// and after it. A fresh simulator per round keeps its ledger out of the sender's memory trend and makes every
/// round's verdict its own.
public enum SoakRunner {
    /// What the caller sees while a soak runs.
    public struct Observers: Sendable {
        /// Each round's job snapshots (twice a second).
        public var progress: (@Sendable (_ round: Int, JobProgress) -> Void)?
        /// Each round when it ends.
        public var round: (@Sendable (SoakRound) -> Void)?
        /// Each round's job, for its metrics.
        public var metrics: JobMetrics?

        public init(
            progress: (@Sendable (_ round: Int, JobProgress) -> Void)? = nil,
            round: (@Sendable (SoakRound) -> Void)? = nil,
            metrics: JobMetrics? = nil
        ) {
            self.progress = progress
            self.round = round
            self.metrics = metrics
        }
    }

    public static let topic = "com.example.salvo.soak"

    /// Runs rounds until the duration has passed, then judges them (`SoakRules`).
    ///
    /// - Throws: `JobError` when a round cannot run at all (its job could not start); a round whose rows went
    ///   wrong is a failure in the report, not an error.
    public static func run(
        _ configuration: SoakConfiguration,
        observers: Observers = Observers()
    ) async throws
        -> SoakReport
    {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "salvo-soak-\(getpid())-\(UInt32.random(in: 0 ... .max))"
        ).path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        if configuration.interface == .broadcast {
            return try await Self.runBroadcast(configuration, folder: folder, observers: observers)
        }
        let payload = try Payload(json: #"{"aps":{"alert":"soak"},"round":0}"#)
        let target: any SoakTarget
        if let external = configuration.external {
            target = try await ExternalSoakTarget(configuration, external: external, payload: payload)
        } else {
            target = try EmbeddedSoakTarget(configuration, folder: folder, payload: payload)
        }
        let tokensPerRound =
            configuration.tokens
            ?? SoakConfiguration.defaultTokens(interface: configuration.interface, plan: target.plan)

        return try await Self.rounds(
            configuration,
            plan: configuration.external == nil ? configuration.planName : target.plan.name,
            tokensPerRound: tokensPerRound,
            connections: configuration.connections,
            onUncertain: configuration.onUncertain,
            observers: observers
        ) { index, start in
            let tokenFile = folder + "/tokens-\(index).csv"
            let tokens = try Self.writeTokens(
                tokensPerRound,
                // Seeds 2^32 apart: `TokenGenerator` streams of nearby seeds overlap (seed + 4 is the same stream one
                // token later), and every round should meet new tokens.
                seed: configuration.seed &+ (UInt64(index) << 32),
                environment: target.plan.environment,
                to: tokenFile
            )
            let interface = try await target.beginRound(tokens: tokensPerRound)
            let roundStart = ContinuousClock.now
            let sampler = Sampler(interval: configuration.sampleInterval)
            let result: SendResult
            do {
                let send = try await BulkSend.prepare(SendRequest(files: [tokenFile], interface: interface))
                let progress = observers.progress
                result = try await send.run(
                    progress: progress.map { callback in { @Sendable snapshot in callback(index, snapshot) } },
                    metrics: observers.metrics
                )
            } catch {
                sampler.stop()
                try? await target.endRound()
                throw error
            }
            sampler.stop()
            let verdict: Verdict
            do {
                verdict = try await target.verdict(expected: tokens)
            } catch {
                try? await target.endRound()
                throw error
            }
            try await target.endRound()
            try? FileManager.default.removeItem(atPath: tokenFile)
            let seconds = Self.seconds(ContinuousClock.now - roundStart)
            let after = ProcessSample.now()
            let reconciliation = Reconciliation(report: result.report, verdict: verdict)
            var problems = reconciliation.disagreements
            if let error = result.error { problems.append("the job stopped: \(error.message)") }
            let report = result.report
            return SoakRound(
                index: index,
                startedAt: Self.seconds(roundStart - start),
                seconds: seconds,
                rows: tokens.count,
                delivered: report.delivered,
                rejected: report.rejectedTotal,
                uncertain: report.uncertain,
                uncertainEvents: report.uncertainEvents,
                resent: report.resent,
                reconnects: report.reconnects,
                connectsPerSecond: seconds > 0 ? Double(report.reconnects + report.connections) / seconds : 0,
                throughput: seconds > 0 ? Double(report.delivered + report.rejectedTotal) / seconds : 0,
                lost: reconciliation.lost,
                duplicated: reconciliation.duplicated,
                invalidDelivered: verdict.invalidButDelivered,
                problems: problems,
                after: after,
                peakResidentBytes: max(sampler.peak, after.residentBytes)
            )
        }
    }

    /// Broadcast rounds (`BroadcastSoakTarget`): channels per round in place of tokens, one connection per service,
    /// at most once.
    private static func runBroadcast(
        _ configuration: SoakConfiguration,
        folder: String,
        observers: Observers
    ) async throws -> SoakReport {
        guard configuration.external == nil else {
            throw JobError(.configuration, "broadcast rounds run against the embedded simulator only (no --gateway)")
        }
        let channels =
            configuration.tokens ?? SoakConfiguration.defaultTokens(interface: .broadcast, plan: configuration.plan)
        guard (1...10_000).contains(channels) else {
            throw JobError(
                .configuration,
                "a broadcast round takes 1 to 10000 channels (an app's limit), not \(channels)"
            )
        }
        let target = try BroadcastSoakTarget(configuration, folder: folder)
        return try await Self.rounds(
            configuration,
            plan: configuration.planName,
            tokensPerRound: channels,
            connections: 1,
            onUncertain: .report,
            observers: observers
        ) { index, start in
            let roundStart = ContinuousClock.now
            let sampler = Sampler(interval: configuration.sampleInterval)
            let outcome: BroadcastRoundOutcome
            do {
                let progress = observers.progress
                outcome = try await target.round(
                    index: index,
                    channels: channels,
                    progress: progress.map { callback in { @Sendable snapshot in callback(index, snapshot) } }
                )
            } catch {
                sampler.stop()
                throw error
            }
            sampler.stop()
            let seconds = Self.seconds(ContinuousClock.now - roundStart)
            let after = ProcessSample.now()
            let report = outcome.report
            return SoakRound(
                index: index,
                startedAt: Self.seconds(roundStart - start),
                seconds: seconds,
                rows: outcome.channels,
                delivered: report.confirmed,
                rejected: report.rejectedTotal,
                uncertain: outcome.unsettled,
                uncertainEvents: report.uncertain,
                resent: outcome.counts.retriedAnswers,
                reconnects: report.reconnects,
                connectsPerSecond: seconds > 0 ? Double(report.reconnects + report.connections) / seconds : 0,
                throughput: seconds > 0 ? Double(report.confirmed + report.rejectedTotal) / seconds : 0,
                lost: outcome.counts.missing,
                duplicated: outcome.counts.duplicates,
                invalidDelivered: 0,
                problems: outcome.problems,
                after: after,
                peakResidentBytes: max(sampler.peak, after.residentBytes),
                broadcast: outcome.counts
            )
        }
    }

    /// Runs rounds (`round(index, start of the soak)`) until the duration has passed or the rounds are done, tells
    /// the observers of each, and judges them.
    private static func rounds(
        _ configuration: SoakConfiguration,
        plan: String,
        tokensPerRound: Int,
        connections: Int,
        onUncertain: OnUncertain,
        observers: Observers,
        round: (_ index: Int, _ start: ContinuousClock.Instant) async throws -> SoakRound
    ) async throws -> SoakReport {
        let start = ContinuousClock.now
        let deadline = start + configuration.duration
        var rounds: [SoakRound] = []
        while ContinuousClock.now < deadline && rounds.count < (configuration.maximumRounds ?? Int.max) {
            let next = try await round(rounds.count + 1, start)
            rounds.append(next)
            observers.round?(next)
        }
        return SoakReport(
            interface: configuration.interface.rawValue,
            plan: plan,
            tokensPerRound: tokensPerRound,
            connections: connections,
            onUncertain: onUncertain.rawValue,
            seconds: Self.seconds(ContinuousClock.now - start),
            rounds: rounds,
            failures: SoakRules.failures(rounds),
            rules: SoakRules.descriptions
        )
    }

    /// Writes `count` generated tokens as a token file and returns them: tokens of the plan's environment, as an
    /// app's list for one environment would hold (the simulator tells the environments apart by the first byte).
    private static func writeTokens(
        _ count: Int,
        seed: UInt64,
        environment: FaultPlan.Environment,
        to path: String
    ) throws -> [DeviceToken] {
        var generator = TokenGenerator(seed: seed)
        var tokens: [DeviceToken] = []
        tokens.reserveCapacity(count)
        var text = "token\n"
        text.reserveCapacity(65 * count + 6)
        for _ in 0..<count {
            var token = generator.next()
            if environment != .any {
                var bytes = token.bytes
                bytes[0] = environment == .sandbox ? bytes[0] & 0xFE : bytes[0] | 1
                token = try DeviceToken(bytes: bytes)
            }
            tokens.append(token)
            text += token.hexString
            text += "\n"
        }
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return tokens
    }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) * 1e-18
    }
}

/// Samples the process on a timer of its own until stopped, keeping the most resident memory seen (from the
/// moment it starts). (`@unchecked`: the timer source is only started and cancelled, both thread-safe.)
final class Sampler: @unchecked Sendable {
    private let timer: any DispatchSourceTimer
    private let highest: NIOLockedValueBox<Int>

    /// The most resident memory seen so far.
    var peak: Int { self.highest.withLockedValue { $0 } }

    init(interval: Duration) {
        let highest = NIOLockedValueBox(ProcessSample.now().residentBytes)
        self.highest = highest
        let timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "salvo.soak.sampler"))
        let milliseconds = Int(
            interval.components.seconds * 1000 + interval.components.attoseconds / 1_000_000_000_000_000
        )
        timer.schedule(deadline: .now() + .milliseconds(milliseconds), repeating: .milliseconds(max(10, milliseconds)))
        timer.setEventHandler {
            let sample = ProcessSample.now()
            highest.withLockedValue { $0 = max($0, sample.residentBytes) }
        }
        timer.resume()
        self.timer = timer
    }

    func stop() {
        self.timer.cancel()
    }
}
