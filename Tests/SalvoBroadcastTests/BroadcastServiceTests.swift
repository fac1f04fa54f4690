import APNSWire
import Crypto
import Foundation
import NIOConcurrencyHelpers
import NIOSSL
import SalvoBroadcast
import SalvoHTTP2
import SalvoRows
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// The simulator with its HTTP/2 endpoint and broadcasts, and the client's view of both services over real TLS.
struct BroadcastService {
    static let app = CertificateFactory.sharedTopic
    let simulator: Simulator
    var registry: ChannelRegistry { self.simulator.channelRegistry! }

    static func start(
        plan: FaultPlan = FaultPlan(),
        _ adjust: (inout BroadcastConfiguration) -> Void = { _ in }
    ) async throws -> BroadcastService {
        var configuration = SimulatorConfiguration.testing(CertificateFactory.shared, plan: plan)
        configuration.http2 = HTTP2EndpointConfiguration()
        var broadcast = BroadcastConfiguration(enabledApps: [Self.app])
        broadcast.subscribers = 3
        adjust(&broadcast)
        configuration.broadcast = broadcast
        return BroadcastService(simulator: try await Simulator.start(configuration))
    }

    /// The channel management endpoint (or with `push` the broadcast one), with the app's client certificate.
    func endpoint(push: Bool, topic: String = Self.app) throws -> HTTP2Endpoint {
        let identity = try CertificateFactory.shared.client(topic: topic)
        var endpoint = HTTP2Endpoint(
            host: "127.0.0.1",
            port: push ? self.simulator.http2Port! : self.simulator.channelManagementPort!,
            serverName: "localhost",
            authentication: .certificate(chain: [try identity.certificate], key: try identity.key)
        )
        endpoint.trustRoots = CertificateFactory.shared.trustRoots
        endpoint.requestTimeout = .seconds(10)
        return endpoint
    }

    /// Creates a channel of `policy` for each of `names` (eight creates at once) over a connection of its own, with
    /// its inventory at `inventory`; how many were created.
    func createChannels(
        _ names: [String],
        policy: MessageStoragePolicy,
        inventory: String
    ) async throws -> Int {
        let client = try await self.channels()
        var creation = ChannelCreation(
            bundleID: Self.app,
            environment: .development,
            policy: policy,
            names: names,
            inventoryPath: inventory
        )
        creation.concurrency = 8
        let created = try await creation.run(client: client).created
        await client.exchanger.close()
        return created
    }

    func channels(bundleID: String = Self.app, topic: String = Self.app) async throws -> ChannelClient {
        ChannelClient(
            exchanger: try await HTTP2Exchanger.connect(try self.endpoint(push: false, topic: topic)),
            bundleID: bundleID
        )
    }
}

/// Channels created, broadcast to and deleted over real TLS against the simulator, and each documented refusal seen
/// with Apple's reason.
@Suite(.tags(.network), .runs(.network), .serialized, .timeLimit(.minutes(3)))
struct BroadcastServiceTests {
    static let template = #"""
        {"aps":{"timestamp":"{{$now}}","event":"update","content-state":{"game":"{{name}}","home":2,"away":1}}}
        """#

    @Test func aThousandChannelsGetOneUpdateEachAndAreDeleted() async throws {
        let service = try await BroadcastService.start()
        let folder = try scratchFolder("broadcast-1000")
        let client = try await service.channels()
        var creation = ChannelCreation(
            bundleID: BroadcastService.app,
            environment: .development,
            policy: .none,
            names: (1...1000).map { "game-\($0)" },
            inventoryPath: folder + "/inventory.csv"
        )
        creation.journalDirectory = folder + "/create-journal"
        creation.concurrency = 16
        let created = try await creation.run(client: client)
        #expect(created.created == 1000 && created.isComplete, "\(created.failures.prefix(3))")
        let inventory = try ChannelInventory.read(folder + "/inventory.csv")
        #expect(inventory.entries.map(\.name) == (1...1000).map { "game-\($0)" })
        #expect(Set(inventory.entries.map(\.channelID)) == Set(service.registry.channels(app: BroadcastService.app)))
        #expect(service.registry.snapshot().channelsCreated == 1000)

        // Run again: every name has its channel, nothing is created.
        let again = try await creation.run(client: client)
        #expect(again.created == 0 && again.alreadyCreated == 1000)
        #expect(service.registry.snapshot().channelsCreated == 1000)

        try Data(Self.template.utf8).write(to: URL(fileURLWithPath: folder + "/update.json"))
        var options = BroadcastJob.Options(
            inputPath: folder + "/inventory.csv",
            templateFile: folder + "/update.json",
            bundleID: BroadcastService.app
        )
        options.journalDirectory = folder + "/broadcast-journal"
        options.reportPath = folder + "/report.json"
        options.rejectsPath = folder + "/rejects.csv"
        options.unsettledPath = folder + "/unsettled.csv"
        let endpoint = try service.endpoint(push: true)
        let job = BroadcastJob(options: options)
        let sent = try await job.run { try await HTTP2Exchanger.connect(endpoint) }
        #expect(sent.report.confirmed == 1000)
        #expect(sent.rejects.isEmpty && sent.unsettled.isEmpty)
        let expected = Dictionary(uniqueKeysWithValues: inventory.entries.map { ($0.channelID, 1) })
        let verdict = service.registry.verdict(expected: expected)
        #expect(verdict.passed, "\(verdict.summary)")
        #expect(verdict.broadcastsAccepted == 1000)
        // Each update carries its row: the game's name.
        let record = service.registry.records(channel: inventory.entries[6].channelID)
        #expect(record.count == 1 && record.first?.event == "update")

        // A second run of the job while another holds its journal is refused before it sends anything.
        do {
            let held = try JournalLock.acquire(folder + "/broadcast-journal")
            let refusal = await #expect(throws: JobError.self) {
                try await job.run { try await HTTP2Exchanger.connect(endpoint) }
            }
            #expect(refusal?.message.contains("held by another run") == true)
            #expect(service.registry.verdict(expected: expected).broadcastsAccepted == 1000)
            withExtendedLifetime(held) {}
        }

        // The same job again: the journal has every row settled; nothing is sent.
        let rerun = try await job.run { try await HTTP2Exchanger.connect(endpoint) }
        #expect(rerun.report.confirmed == 1000 && rerun.report.resumed?.settledBefore == 1000)
        #expect(service.registry.verdict(expected: expected).broadcastsAccepted == 1000)

        for entry in inventory.entries {
            if case .failure(let failure) = await client.delete(entry.channelID) { Issue.record("\(failure)") }
        }
        #expect(service.registry.channels(app: BroadcastService.app).isEmpty)
        await client.exchanger.close()
        try await service.simulator.shutdown()
    }

    @Test func everyRefusalIsReportedWithApplesReason() async throws {
        let service = try await BroadcastService.start { $0.channelLimit = 3 }
        let folder = try scratchFolder("broadcast-reasons")
        let client = try await service.channels()

        // The limit: three channels, then 400 CannotCreateChannelConfig for the fourth, and the run stops.
        var creation = ChannelCreation(
            bundleID: BroadcastService.app,
            environment: .development,
            policy: .none,
            names: ["a", "b", "c"],
            inventoryPath: folder + "/inventory.csv"
        )
        creation.concurrency = 1
        #expect(try await creation.run(client: client).created == 3)
        switch await client.create(policy: .none) {
        case .refused(let failure): #expect(failure.status == 400 && failure.reason == "CannotCreateChannelConfig")
        default: Issue.record("a fourth channel was not refused")
        }
        // A job whose create meets the limit stops with Apple's reason, and its inventory keeps what succeeded.
        var more = creation
        more.names = ["a", "b", "c", "d", "e"]
        let stopped = try await more.run(client: client)
        #expect(stopped.created == 0 && stopped.alreadyCreated == 3)
        #expect(stopped.failures.map(\.failure.reason) == ["CannotCreateChannelConfig"])
        #expect(stopped.stopped?.contains("CannotCreateChannelConfig") == true, "\(stopped.stopped ?? "")")
        #expect(try ChannelInventory.read(folder + "/inventory.csv").entries.count == 3)
        // The limit is checked before creating (here the simulator's 3): nothing is sent for a job that cannot fit.
        more.limit = 3
        let refusals = service.registry.snapshot().channelRefusals
        let refused = try await more.run(client: client)
        #expect(refused.created == 0 && refused.failures.isEmpty)
        #expect(refused.stopped?.contains("only 0 left") == true, "\(refused.stopped ?? "")")
        #expect(service.registry.snapshot().channelRefusals == refusals)

        // Unknown and malformed channels, an app without broadcast, a certificate for another app.
        switch await client.delete("dW5rbm93bg==") {
        case .failure(let failure): #expect(failure.reason == "ChannelNotRegistered")
        case .success: Issue.record("an unknown channel was deleted")
        }
        switch await client.read("not base64!") {
        case .failure(let failure): #expect(failure.reason.contains("BadChannelId") && failure.status == nil)
        case .success: Issue.record("a malformed id was read")
        }
        let other = try await service.channels(bundleID: "com.example.other", topic: "com.example.other")
        if case .refused(let failure) = await other.create(policy: .none) {
            #expect(failure.reason == "FeatureNotEnabled")
        } else {
            Issue.record("an app without broadcast created a channel")
        }
        await other.exchanger.close()
        let mismatch = try await service.channels(bundleID: "com.example.other")
        if case .failure(let failure) = await mismatch.list() {
            #expect(failure.status == 403 && failure.reason == "TopicMismatch")
        } else {
            Issue.record("a certificate for another app listed its channels")
        }
        await mismatch.exchanger.close()

        // Broadcast refusals: a channel unknown to APNs, and a nonzero expiration on a no-storage channel whose
        // row claims storage (so the client's own check lets it through and APNs answers).
        let inventory = try ChannelInventory.read(folder + "/inventory.csv")
        let ids = inventory.entries.map(\.channelID)
        try Data(
            """
            name,channel_id,policy
            a,\(ids[0]),most-recent
            b,\(ids[1]),none
            ghost,Z2hvc3Q=,most-recent

            """.utf8
        ).write(to: URL(fileURLWithPath: folder + "/rows.csv"))
        try Data(Self.template.utf8).write(to: URL(fileURLWithPath: folder + "/update.json"))
        var options = BroadcastJob.Options(
            inputPath: folder + "/rows.csv",
            templateFile: folder + "/update.json",
            bundleID: BroadcastService.app
        )
        options.expiration = Int64(Date().timeIntervalSince1970) + 600
        options.rejectsPath = folder + "/rejects.csv"
        let endpoint = try service.endpoint(push: true)
        let result = try await BroadcastJob(options: options).run { try await HTTP2Exchanger.connect(endpoint) }
        let reasons = Dictionary(uniqueKeysWithValues: result.rejects.map { ($0.line, $0.reason) })
        #expect(reasons[2] == "BadExpirationDate", "\(reasons)")
        #expect(reasons[3]?.hasPrefix("BadExpirationDate (not sent)") == true, "\(reasons)")
        #expect(reasons[4] == "ChannelNotRegistered", "\(reasons)")
        #expect(result.report.confirmed == 0)
        let rejects = try String(contentsOfFile: folder + "/rejects.csv", encoding: .utf8)
        #expect(rejects.contains("4,Z2hvc3Q=,400,ChannelNotRegistered"))
        #expect(service.registry.records().isEmpty)
        await client.exchanger.close()
        try await service.simulator.shutdown()
    }

    /// An app-wide refusal (a certificate for another app: 403 TopicMismatch; an app without broadcast: 400
    /// FeatureNotEnabled) stops the job at once: at most its window of requests went out, no row is counted
    /// refused, every row is left unsent in the journal, and a rerun once the cause is fixed sends each one once.
    /// (Before, every row was sent, refused and journaled as rejected, so the rerun sent nothing.)
    @Test func anAppWideRefusalStopsTheJobAndARerunSendsItsRows() async throws {
        let service = try await BroadcastService.start()
        let folder = try scratchFolder("broadcast-app-refused")
        let names = (1...40).map { "game-\($0)" }
        #expect(try await service.createChannels(names, policy: .none, inventory: folder + "/inventory.csv") == 40)
        try Data(Self.template.utf8).write(to: URL(fileURLWithPath: folder + "/update.json"))

        // An app without broadcast: its own certificate, FeatureNotEnabled (a plain list of ids: the inventory is
        // the app's, and refused for another).
        let ids = try ChannelInventory.read(folder + "/inventory.csv").entries.map { "\($0.channelID),\($0.name)" }
        try Data(("channel_id,name\n" + ids.joined(separator: "\n") + "\n").utf8)
            .write(to: URL(fileURLWithPath: folder + "/ids.csv"))
        var other = BroadcastJob.Options(
            inputPath: folder + "/ids.csv",
            templateFile: folder + "/update.json",
            bundleID: "com.example.other"
        )
        other.window = 4
        let otherEndpoint = try service.endpoint(push: true, topic: "com.example.other")
        let notEnabled = try await BroadcastJob(options: other).run {
            try await HTTP2Exchanger.connect(otherEndpoint)
        }
        #expect(notEnabled.report.stopped?.contains("FeatureNotEnabled") == true, "\(notEnabled.report)")
        #expect(notEnabled.report.rejectedTotal == 0 && notEnabled.rejects.isEmpty)
        #expect(notEnabled.report.notSent == 40 && notEnabled.unsettled.count == 40)
        #expect((service.registry.snapshot().broadcastRefusals["FeatureNotEnabled"] ?? 0) <= 4)

        // The app's rows with a certificate for another app: TopicMismatch, journaled.
        var options = BroadcastJob.Options(
            inputPath: folder + "/inventory.csv",
            templateFile: folder + "/update.json",
            bundleID: BroadcastService.app
        )
        options.window = 4
        options.journalDirectory = folder + "/journal"
        options.unsettledPath = folder + "/unsettled.csv"
        let wrong = try service.endpoint(push: true, topic: "com.example.other")
        let refused = try await BroadcastJob(options: options).run { try await HTTP2Exchanger.connect(wrong) }
        #expect(refused.report.stopped?.contains("TopicMismatch") == true, "\(refused.report)")
        #expect(refused.report.rejectedTotal == 0 && refused.rejects.isEmpty)
        #expect(refused.report.notSent == 40 && refused.unsettled.count == 40)
        let listed = try String(contentsOfFile: folder + "/unsettled.csv", encoding: .utf8)
        #expect(listed.split(separator: "\n").count == 41, "a header and every row")
        #expect((service.registry.snapshot().broadcastRefusals["TopicMismatch"] ?? 0) <= 4)
        #expect(service.registry.records().isEmpty)

        // The cause fixed (the app's certificate), the same job again: every row once.
        let right = try service.endpoint(push: true)
        let rerun = try await BroadcastJob(options: options).run { try await HTTP2Exchanger.connect(right) }
        #expect(rerun.report.confirmed == 40 && rerun.report.notSent == 0, "\(rerun.report)")
        let inventory = try ChannelInventory.read(folder + "/inventory.csv")
        let expected = Dictionary(uniqueKeysWithValues: inventory.entries.map { ($0.channelID, 1) })
        let verdict = service.registry.verdict(expected: expected)
        #expect(verdict.passed && verdict.broadcastsAccepted == 40, "\(verdict.summary)")
        try await service.simulator.shutdown()
    }

    /// The broadcast's backoff runs on the job's clock: broadcasts refused with 429 (three in ten) are sent again after
    /// pauses of up to a minute (the retry policy here), which a clock the pauses move passes in no real time, and every
    /// channel still gets its update once.
    @Test func refusedBroadcastsWaitTheirBackoffOnTheJobsClock() async throws {
        var plan = FaultPlan()
        plan.broadcast = BroadcastFaults(tooManyRequestsRate: 0.3)
        let service = try await BroadcastService.start(plan: plan)
        let folder = try scratchFolder("broadcast-backoff")
        let names = (1...40).map { "backoff-\($0)" }
        #expect(try await service.createChannels(names, policy: .none, inventory: folder + "/inventory.csv") == 40)
        try Data(Self.template.utf8).write(to: URL(fileURLWithPath: folder + "/update.json"))
        var options = BroadcastJob.Options(
            inputPath: folder + "/inventory.csv",
            templateFile: folder + "/update.json",
            bundleID: BroadcastService.app
        )
        options.window = 4
        options.retry = HTTP2RetryPolicy(
            initialDelay: .seconds(10),
            maximumDelay: .seconds(60),
            maximumAttempts: 30,
            maximumRetryAfter: .seconds(60)
        )
        let clock = ManualJobClock(sleepsMoveIt: true)
        var job = BroadcastJob(options: options)
        job.clock = clock
        let endpoint = try service.endpoint(push: true)
        let result = try await job.run { try await HTTP2Exchanger.connect(endpoint) }
        #expect(result.report.confirmed == 40 && result.report.notSent == 0, "\(result.report)")
        #expect((service.registry.snapshot().broadcastRefusals["TooManyRequests"] ?? 0) > 0, "some were refused")
        #expect(clock.elapsed >= .seconds(1), "the pauses ran on the job's clock: \(clock.elapsed)")
        let inventory = try ChannelInventory.read(folder + "/inventory.csv")
        let expected = Dictionary(uniqueKeysWithValues: inventory.entries.map { ($0.channelID, 1) })
        let verdict = service.registry.verdict(expected: expected)
        #expect(verdict.passed && verdict.broadcastsAccepted == 40, "\(verdict.summary)")
        try await service.simulator.shutdown()
    }

    /// A channel listed twice is broadcast once (the later row refused, naming the first line); a policy that is
    /// neither `none` nor `most-recent` refuses its row before it is sent; a field with a line break is quoted in
    /// the rejects file, so that it reads back as one row a refusal.
    @Test func aChannelListedTwiceGoesOnceAndABadPolicyIsRefused() async throws {
        let service = try await BroadcastService.start()
        let folder = try scratchFolder("broadcast-duplicates")
        #expect(
            try await service.createChannels(["a", "b"], policy: .mostRecent, inventory: folder + "/inventory.csv") == 2
        )
        let ids = try ChannelInventory.read(folder + "/inventory.csv").entries.map(\.channelID)
        try Data(
            ("name,channel_id,policy\r\n" + "a,\(ids[0]),most-recent\r\n" + "again,\(ids[0]),most-recent\r\n"
                + "b,\(ids[1]),bogus\r\n" + "c,\"two\r\nlines\",most-recent\r\n").utf8
        ).write(to: URL(fileURLWithPath: folder + "/rows.csv"))
        try Data(Self.template.utf8).write(to: URL(fileURLWithPath: folder + "/update.json"))
        var options = BroadcastJob.Options(
            inputPath: folder + "/rows.csv",
            templateFile: folder + "/update.json",
            bundleID: BroadcastService.app
        )
        options.rejectsPath = folder + "/rejects.csv"
        let endpoint = try service.endpoint(push: true)
        let result = try await BroadcastJob(options: options).run { try await HTTP2Exchanger.connect(endpoint) }
        #expect(result.report.confirmed == 1, "\(result.report)")
        let reasons = Dictionary(uniqueKeysWithValues: result.rejects.map { ($0.line, $0.reason) })
        #expect(
            reasons[3]?.hasPrefix("DuplicateChannel (not sent): the channel is also on line 2") == true,
            "\(reasons)"
        )
        #expect(reasons[4]?.hasPrefix("BadPolicy (not sent): policy 'bogus'") == true, "\(reasons)")
        #expect(reasons.count == 3, "\(reasons)")
        let written = try CSVTable.read(folder + "/rejects.csv")
        #expect(written.rows.count == 3, "one row a refusal: \(written.rows)")
        #expect(written.rows.contains { $0.fields[1] == "two\r\nlines" }, "\(written.rows)")
        let verdict = service.registry.verdict(expected: [ids[0]: 1])
        #expect(verdict.broadcastsAccepted == 1, "\(verdict.summary)")
        try await service.simulator.shutdown()
    }

    @Test func aProviderTokenManagesChannelsAndBroadcasts() async throws {
        let key = P256.Signing.PrivateKey()
        var configuration = SimulatorConfiguration.testing(CertificateFactory.shared)
        configuration.http2 = HTTP2EndpointConfiguration(providerKeys: [
            .init(
                keyID: "ABC123DEFG",
                teamID: "DEF123GHIJ",
                publicKey: Array(key.publicKey.rawRepresentation),
                topics: [BroadcastService.app]
            )
        ])
        configuration.broadcast = BroadcastConfiguration(enabledApps: [BroadcastService.app])
        let simulator = try await Simulator.start(configuration)
        let token = APNSAuthentication.token(
            try ProviderToken(signer: try JWTSigner(privateKey: key, keyID: "ABC123DEFG", teamID: "DEF123GHIJ"))
        )
        func endpoint(_ port: Int) -> HTTP2Endpoint {
            var endpoint = HTTP2Endpoint(host: "127.0.0.1", port: port, serverName: "localhost", authentication: token)
            endpoint.trustRoots = CertificateFactory.shared.trustRoots
            return endpoint
        }
        let client = ChannelClient(
            exchanger: try await HTTP2Exchanger.connect(endpoint(simulator.channelManagementPort!)),
            bundleID: BroadcastService.app
        )
        guard case .created(let id) = await client.create(policy: .mostRecent) else {
            Issue.record("no channel was created with a provider token")
            return
        }
        #expect(try await client.read(id).get() == .mostRecent)
        #expect(try await client.list().get() == [id])
        let push = try await HTTP2Exchanger.connect(endpoint(simulator.http2Port!))
        let builder = try BroadcastRequestBuilder(
            bundleID: BroadcastService.app,
            template: try PayloadTemplate(json: Array(Self.template.utf8), file: "update.json"),
            header: ["name"],
            expiration: Int64(Date().timeIntervalSince1970) + 3600,
            priority: 5
        )
        let request = try builder.request(fields: ["final"], channelID: id, policy: .mostRecent, now: 1_790_000_000)
            .get()
        guard case .answered(let response) = await push.exchange(request) else {
            Issue.record("the broadcast got no answer")
            return
        }
        #expect(response.status == 200)
        #expect(simulator.channelRegistry!.records(channel: id).map(\.priority) == [5])
        // A token for the app does not cover another app's channels.
        let other = ChannelClient(exchanger: client.exchanger, bundleID: "com.example.other")
        #expect(other.api.bundleID == "com.example.other")
        if case .failure(let failure) = await other.list() {
            #expect(failure.status == 403 && failure.reason == "TopicMismatch", "\(failure)")
        } else {
            Issue.record("a token for one app listed another's channels")
        }
        await push.close()
        await client.exchanger.close()
        try await simulator.shutdown()
    }

    @Test func anExpiredProviderTokenIsRenewedOnceAndTheRequestSentAgain() async throws {
        let key = P256.Signing.PrivateKey()
        var configuration = SimulatorConfiguration.testing(CertificateFactory.shared)
        configuration.http2 = HTTP2EndpointConfiguration(providerKeys: [
            .init(keyID: "ABC123DEFG", teamID: "DEF123GHIJ", publicKey: Array(key.publicKey.rawRepresentation))
        ])
        configuration.broadcast = BroadcastConfiguration(enabledApps: [BroadcastService.app])
        let simulator = try await Simulator.start(configuration)
        // The first token is minted two hours in the past (a clock that was behind); later ones now.
        let calls = NIOLockedValueBox(0)
        let token = try ProviderToken(
            signer: try JWTSigner(privateKey: key, keyID: "ABC123DEFG", teamID: "DEF123GHIJ"),
            clock: {
                let now = Int64(Date().timeIntervalSince1970)
                return calls.withLockedValue { count in
                    count += 1
                    return count == 1 ? now - 7200 : now
                }
            }
        )
        var endpoint = HTTP2Endpoint(
            host: "127.0.0.1",
            port: simulator.channelManagementPort!,
            serverName: "localhost",
            authentication: .token(token)
        )
        endpoint.trustRoots = CertificateFactory.shared.trustRoots
        let client = ChannelClient(
            exchanger: try await HTTP2Exchanger.connect(endpoint),
            bundleID: BroadcastService.app
        )
        #expect(try await client.list().get() == [])
        #expect(token.mintCount == 2)
        await client.exchanger.close()
        try await simulator.shutdown()
    }
}
