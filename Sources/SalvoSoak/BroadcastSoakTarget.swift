import APNSWire
import Foundation
import NIOSSL
import SalvoBroadcast
import SalvoDevelopment
import SalvoHTTP2
import SalvoRows
import SalvoSimulator

/// What one broadcast round did, before the process around it is added (`SoakRunner` samples it).
struct BroadcastRoundOutcome: Sendable {
    var channels: Int
    var report: JobReport
    /// Rows the job left unsettled (uncertain or not sent): their channels may miss their update.
    var unsettled: Int
    var counts: SoakRound.BroadcastCounts
    var problems: [String]
}

/// The broadcast rounds of a soak: each round a fresh simulator with its broadcast side on (the plan's `broadcast`
/// faults in force), channels created through the channel management endpoint (`ChannelCreation`, its journal and
/// inventory in the round's folder), one templated update broadcast per channel (`BroadcastJob`, with its journal),
/// the registry's verdict that every channel got its update exactly once, then every channel of the round deleted
/// and the registry shown to hold none live: a publisher that runs for days must give its channels back, or the
/// app's 10,000 run out.
///
/// A broadcast is sent at most once (a Live Activity update seen twice is worse than one missed), so a channel
/// whose row the job listed as unsettled may miss its update; any other channel without it, or any update the
/// registry holds twice, fails the round.
final class BroadcastSoakTarget: @unchecked Sendable {
    // @unchecked: the soak runs its rounds one after another, and nothing here changes after `init`.
    let plan: FaultPlan
    private let certificates: CertificateFactory
    private let signingKey: DevelopmentSigningKey
    private let token: ProviderToken
    private let trustRoots: NIOSSLTrustRoots
    private let folder: String
    /// Simulated subscribers of each channel (the fan-out the verdict counts).
    static let subscribers = 10
    /// Creates and deletes in flight at once.
    static let concurrency = 16

    init(_ configuration: SoakConfiguration, folder: String) throws {
        self.plan = configuration.plan
        self.folder = folder
        self.certificates = try CertificateFactory()
        let paths = try self.certificates.write(to: folder + "/certificates", topic: SoakRunner.topic)
        self.signingKey = try DevelopmentSigningKey.ensure(in: paths.folder)
        self.token = try ProviderToken(
            signer: try JWTSigner(
                p8File: self.signingKey.path,
                keyID: DevelopmentSigningKey.keyID,
                teamID: DevelopmentSigningKey.teamID
            )
        )
        self.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(paths.ca))
    }

    /// The update each channel gets: its name in the content state, the send time as its timestamp.
    static func template(round: Int) -> String {
        #"{"aps":{"timestamp":"{{$now}}","event":"update","content-state":{"channel":"{{name}}","round":\#(round)}}}"#
    }

    /// Runs round `index` over `count` new channels.
    ///
    /// - Throws: when the round cannot run at all (the simulator does not start, an endpoint cannot be reached, the
    ///   job cannot start); what went wrong with its channels or updates is in the outcome's problems.
    func round(
        index: Int,
        channels count: Int,
        progress: (@Sendable (JobProgress) -> Void)?
    ) async throws -> BroadcastRoundOutcome {
        let roundFolder = self.folder + "/round-\(index)"
        try FileManager.default.createDirectory(atPath: roundFolder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: roundFolder) }
        var configuration = SimulatorConfiguration(tls: .init(self.certificates))
        // Channel ids and the faults' draws follow the plan's seed: round N takes seed + N, so that every round meets
        // other channels and other refusals, and a soak is still repeatable.
        configuration.plan = self.plan
        configuration.plan.seed = self.plan.seed &+ UInt64(index)
        configuration.http2 = HTTP2EndpointConfiguration(providerKeys: [self.signingKey.providerKey])
        var broadcast = BroadcastConfiguration(enabledApps: [SoakRunner.topic])
        broadcast.subscribers = Self.subscribers
        configuration.broadcast = broadcast
        let simulator = try await Simulator.start(configuration)
        do {
            let outcome = try await self.round(index: index, count: count, folder: roundFolder, simulator, progress)
            try await simulator.shutdown()
            return outcome
        } catch {
            try? await simulator.shutdown()
            throw error
        }
    }

    private func endpoint(_ port: Int) -> HTTP2Endpoint {
        var endpoint = HTTP2Endpoint(
            host: "127.0.0.1",
            port: port,
            serverName: "localhost",
            authentication: .token(self.token)
        )
        endpoint.trustRoots = self.trustRoots
        return endpoint
    }

    private func round(
        index: Int,
        count: Int,
        folder: String,
        _ simulator: Simulator,
        _ progress: (@Sendable (JobProgress) -> Void)?
    ) async throws -> BroadcastRoundOutcome {
        let registry = simulator.channelRegistry!
        let client = ChannelClient(
            exchanger: try await HTTP2Exchanger.connect(self.endpoint(simulator.channelManagementPort!)),
            bundleID: SoakRunner.topic
        )
        // On a throw the connection ends with the simulator's shutdown.
        var problems: [String] = []

        // Both storage policies, round after round: their budgets and fan-out differ.
        var creation = ChannelCreation(
            bundleID: SoakRunner.topic,
            environment: .development,
            policy: index.isMultiple(of: 2) ? .mostRecent : .none,
            names: (1...count).map { "soak-\(index)-\($0)" },
            inventoryPath: folder + "/inventory.csv"
        )
        creation.journalDirectory = folder + "/create-journal"
        creation.concurrency = Self.concurrency
        let created = try await creation.run(client: client)
        if !created.isComplete {
            let why = created.stopped ?? created.failures.first.map { "\($0.name): \($0.failure)" } ?? "unresolved"
            problems.append("\(created.created) of \(count) channels created (\(why))")
        }
        let ids = try ChannelInventory.read(folder + "/inventory.csv").entries.map(\.channelID)

        let template = folder + "/update.json"
        try Data(Self.template(round: index).utf8).write(to: URL(fileURLWithPath: template))
        var options = BroadcastJob.Options(
            inputPath: folder + "/inventory.csv",
            templateFile: template,
            bundleID: SoakRunner.topic
        )
        options.journalDirectory = folder + "/broadcast-journal"
        options.window = 32
        var job = BroadcastJob(options: options)
        job.progress = progress
        let push = self.endpoint(simulator.http2Port!)
        let result = try await job.run { try await HTTP2Exchanger.connect(push) }

        let expected = Dictionary(ids.map { ($0, 1) }, uniquingKeysWith: +)
        let verdict = registry.verdict(expected: expected, listLimit: max(100, expected.count))
        problems += Self.problems(verdict, result: result)

        let undeleted = await Self.delete(ids, client: client)
        await client.exchanger.close()
        let live = registry.channels(app: SoakRunner.topic).count
        if !undeleted.isEmpty || live > 0 {
            problems.append(
                "\(live) channel(s) still live after the round's deletes (\(undeleted.count) delete(s) failed"
                    + (undeleted.first.map { ", e.g. \($0)" } ?? "") + ")"
            )
        }
        let snapshot = registry.snapshot()
        let retried = ["TooManyRequests", "ServiceUnavailable", "InternalServerError"].reduce(0) {
            $0 + snapshot.broadcastRefusals[$1, default: 0]
        }
        return BroadcastRoundOutcome(
            channels: count,
            report: result.report,
            unsettled: result.unsettled.count,
            counts: SoakRound.BroadcastCounts(
                channelsCreated: created.created,
                channelsDeleted: snapshot.channelsDeleted,
                updatesAccepted: verdict.broadcastsAccepted,
                retriedAnswers: retried,
                missing: verdict.channelsMissingUpdates,
                duplicates: verdict.duplicates
            ),
            problems: problems
        )
    }

    /// What the verdict and the job's result say went wrong: an update lost (a channel without it whose row the job
    /// did not list as unsettled), one held twice, one on a channel not in the round, a rejected row, a stopped job.
    static func problems(_ verdict: BroadcastVerdict, result: BroadcastJob.Result) -> [String] {
        var problems: [String] = []
        let unsettled = Set(result.unsettled.map(\.channel))
        let lost = verdict.missingChannelIDs.filter { !unsettled.contains($0) }
        if !lost.isEmpty {
            problems.append(
                "\(lost.count) update(s) lost: the channel never got it and the job did not list it unsettled "
                    + "(e.g. \(lost[0])); \(verdict.channelsMissingUpdates) channel(s) without their update, "
                    + "\(unsettled.count) row(s) unsettled"
            )
        }
        if verdict.duplicates > 0 {
            problems.append(
                "\(verdict.duplicates) update(s) duplicated on \(verdict.channelsWithDuplicates) channel(s) "
                    + "(e.g. \(verdict.duplicateChannelIDs.first ?? "?"))"
            )
        }
        if verdict.unexpectedChannels > 0 {
            problems.append("\(verdict.unexpectedChannels) channel(s) outside the round got updates")
        }
        if result.report.rejectedTotal > 0 {
            let reasons = result.report.rejected.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }
            problems.append("\(result.report.rejectedTotal) update(s) rejected: \(reasons.joined(separator: ", "))")
        }
        if let stopped = result.report.stopped { problems.append("the job stopped: \(stopped)") }
        problems += result.outputFailures
        return problems
    }

    /// Deletes `ids`, a few at once; the ids whose delete failed.
    private static func delete(_ ids: [String], client: ChannelClient) async -> [String] {
        await withTaskGroup(of: String?.self) { group in
            var failed: [String] = []
            var next = 0
            var running = 0
            while next < ids.count || running > 0 {
                while next < ids.count && running < Self.concurrency {
                    let id = ids[next]
                    next += 1
                    running += 1
                    group.addTask {
                        if case .failure = await client.delete(id) { return id }
                        return nil
                    }
                }
                guard let done = await group.next() else { break }
                running -= 1
                if let id = done { failed.append(id) }
            }
            return failed
        }
    }
}
