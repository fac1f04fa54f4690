import APNSWire
import AsyncHTTPClient
import Crypto
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOSSL
import SalvoCampaigns
import SalvoHTTP2
import SalvoRows
import SalvoServer
import SalvoService
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import SalvoWebhooks
import Testing

let campaignTopic = "com.example.campaigns"

/// A device token of its own for each index, spread over all 32 bytes as real tokens are.
func campaignToken(_ index: Int) -> String {
    Hex.string(Array(SHA256.hash(data: Array("campaign-token-\(index)".utf8))))
}

/// A fresh folder under the test scratch root.
func campaignFolder(_ prefix: String) throws -> String {
    try TestScratch.newFolder(prefix)
}

/// An audience: a header (`token,name`) and a row per index, with `bad` rows whose token is not one.
func audienceCSV(_ indices: Range<Int>, bad: Int = 0) -> String {
    var text = "token,name\n"
    for index in indices { text += "\(campaignToken(index)),person \(index)\n" }
    for index in 0..<bad { text += "not-a-token-\(index),nobody\n" }
    return text
}

/// The simulator's HTTP/2 endpoint with a signing key, and the service's job configuration that sends to it.
struct CampaignSimulator {
    let token: TokenSimulator
    var simulator: Simulator { self.token.simulator }
    var job: HTTP2JobConfiguration { self.token.job }

    static func start(plan: FaultPlan = FaultPlan()) async throws -> CampaignSimulator {
        CampaignSimulator(
            token: try await TokenSimulator.start(
                topic: campaignTopic,
                keyID: "CAMPKEY123",
                teamID: "DEF123GHIJ",
                plan: plan
            )
        )
    }

    /// Writes the signing key and the CA to `folder` for a child `salvo`: the options that reach this simulator.
    func commandLineOptions(in folder: String) throws -> [String] {
        try self.token.commandLineOptions(in: folder)
    }
}

/// The service with its campaigns and its HTTP listener on a free loopback port, on a store folder that outlives
/// it (a restart is `stop` and a new `start` on the same folder).
final class CampaignService: Sendable {
    let store: SQLiteNotificationStore
    let service: NotificationService
    let campaigns: CampaignRunner
    let webhooks: WebhookDispatcher?
    let server: ServiceServer
    let serving: Task<Void, Never>
    let base: String
    let key: String
    let folder: String

    static func start(
        simulator: CampaignSimulator,
        folder: String,
        allowedFiles: String? = nil,
        key: String? = nil,
        webhooks webhookSettings: TestWebhooks? = nil,
        clock: ManualCampaignClock? = nil,
        console: Bool = false,
        uploadRoom: CampaignUploadRoom = .standard,
        query: CampaignQuery? = nil
    ) async throws -> CampaignService {
        let store = try await SQLiteNotificationStore.open(directory: folder)
        var configuration = ServiceConfiguration(job: simulator.job, defaults: .init(topic: campaignTopic))
        let logger = Logger(label: "tests", factory: { _ in SwiftLogNoOpLogHandler() })
        // As `salvo serve` starts them: the webhooks' loops first, their routes in the service's configuration.
        let webhooks = webhookSettings.map {
            WebhookDispatcher.start(
                endpoints: $0.endpoints,
                secret: $0.secret,
                outbox: store,
                configuration: $0.configuration,
                logger: logger
            )
        }
        if let webhooks {
            configuration.webhooks = webhooks.routes
            configuration.webhookEventsWritten = { webhooks.wake() }
        }
        let service = try await NotificationService.start(configuration: configuration, store: store)
        var apiKey = key
        if apiKey == nil {
            let (made, record) = APIKeys.make(name: "campaigns", now: configuration.now())
            try await store.addAPIKey(record)
            apiKey = made
        }
        var now: @Sendable () -> Int64 = configuration.now
        var waitUntil: (@Sendable (Int64) async -> Void)?
        if let clock {
            now = { clock.now }
            waitUntil = { await clock.wait(until: $0) }
        }
        var job = CampaignJob(
            base: configuration.job,
            defaultTopic: campaignTopic,
            folder: CampaignFolder(store: folder),
            allowedFiles: allowedFiles,
            query: query
        )
        job.uploadRoom = uploadRoom
        let campaigns = CampaignRunner(
            store: store,
            job: job,
            template: { service.template(name: $0)?.text },
            now: now,
            waitUntil: waitUntil,
            logger: logger,
            webhooks: webhooks.map { dispatcher in
                CampaignWebhooks(outbox: store, routes: dispatcher.routes, wake: { dispatcher.wake() })
            }
        )
        try await campaigns.start()
        let responder = ServiceResponder(
            service: service,
            campaigns: campaigns,
            webhooks: webhooks,
            console: console ? Console(secureCookie: false) : nil,
            document: [],
            metricsText: { "" },
            logger: logger
        )
        let port = NIOLockedValueBox(0)
        let server = try ServiceServer(responder: responder, host: "127.0.0.1", port: 0, tls: nil, logger: logger) {
            listening in port.withLockedValue { $0 = listening }
        }
        let serving = Task { _ = try? await server.run() }
        try await eventually("the listener is up", timeout: .seconds(20)) { port.withLockedValue { $0 } != 0 }
        return CampaignService(
            store: store,
            service: service,
            campaigns: campaigns,
            webhooks: webhooks,
            server: server,
            serving: serving,
            base: "http://127.0.0.1:\(port.withLockedValue { $0 })",
            key: apiKey!,
            folder: folder
        )
    }

    private init(
        store: SQLiteNotificationStore,
        service: NotificationService,
        campaigns: CampaignRunner,
        webhooks: WebhookDispatcher?,
        server: ServiceServer,
        serving: Task<Void, Never>,
        base: String,
        key: String,
        folder: String
    ) {
        self.store = store
        self.service = service
        self.campaigns = campaigns
        self.webhooks = webhooks
        self.server = server
        self.serving = serving
        self.base = base
        self.key = key
        self.folder = folder
    }

    /// As `salvo serve` stops on SIGTERM: the campaigns' jobs, the webhooks' loops, the service (which closes the
    /// store), the listener.
    func stop() async {
        await self.campaigns.shutdown()
        await self.webhooks?.shutdown()
        await self.service.shutdown()
        await self.server.stop()
        await self.serving.value
    }

    struct Answer {
        var status: Int
        var headers: [(String, String)]
        var body: [UInt8]

        var json: JSONValue { (try? JSONValue.parse(self.body).value) ?? .null }
        var text: String { String(decoding: self.body, as: UTF8.self) }

        /// The first refused field of a problem answer.
        var field: String? {
            guard case .array(let errors)? = self.json["errors"], case .string(let field)? = errors.first?["field"]
            else { return nil }
            return field
        }
    }

    func call(
        _ method: HTTPMethod,
        _ path: String,
        contentType: String? = nil,
        headers: [(String, String)] = [],
        body: [UInt8]? = nil,
        client: HTTPClient
    ) async throws -> Answer {
        var request = HTTPClientRequest(url: self.base + path)
        request.method = method
        request.headers.add(name: "Authorization", value: "Bearer \(self.key)")
        if let contentType { request.headers.add(name: "Content-Type", value: contentType) }
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body { request.body = .bytes(ByteBuffer(bytes: body)) }
        let response = try await client.execute(request, timeout: .seconds(60))
        let bytes = try await response.body.collect(upTo: 64 << 20)
        return Answer(
            status: Int(response.status.code),
            headers: response.headers.map { ($0.name, $0.value) },
            body: Array(bytes.readableBytesView)
        )
    }

    /// Uploads `csv` as a campaign's audience with `settings` (JSON) in the Salvo-Campaign header.
    func upload(_ csv: String, settings: String, client: HTTPClient) async throws -> Answer {
        try await self.call(
            .POST,
            "/v1/campaigns",
            contentType: "text/csv",
            headers: [("Salvo-Campaign", settings)],
            body: Array(csv.utf8),
            client: client
        )
    }

    func campaign(_ id: String, client: HTTPClient) async throws -> JSONValue {
        try await self.call(.GET, "/v1/campaigns/\(id)", client: client).json
    }

    /// Waits until the campaign's `state` is `state`.
    func waitFor(_ id: String, state: String, client: HTTPClient, seconds: Int64 = 120) async throws {
        try await eventually("campaign \(id) is \(state)", timeout: .seconds(seconds)) {
            try await self.campaign(id, client: client)["state"] == .string(state)
        }
    }
}

extension JSONValue {
    var intValue: Int? {
        if case .number(let literal) = self { Int(literal) } else { nil }
    }

    var stringValue: String? {
        if case .string(let text) = self { text } else { nil }
    }
}

/// The webhooks a test service posts to.
struct TestWebhooks: Sendable {
    var endpoints: [WebhookEndpoint]
    var secret: WebhookSecret
    var configuration: WebhookConfiguration
}

/// The counts two reports must agree on (the runs' times and connections aside).
struct ReportCounts: Equatable, CustomStringConvertible {
    var inputRows, invalidInput, validRows, confirmed, presumed, expired, uncertain, notSent: Int
    var rejected: [String: Int]

    init(_ report: JobReport) {
        self.inputRows = report.inputRows
        self.invalidInput = report.invalidInput
        self.validRows = report.validRows
        self.confirmed = report.confirmed
        self.presumed = report.presumed
        self.expired = report.expired
        self.uncertain = report.uncertain
        self.notSent = report.notSent
        self.rejected = report.rejected
    }

    var description: String {
        "input \(self.inputRows), invalid \(self.invalidInput), valid \(self.validRows), confirmed \(self.confirmed), "
            + "presumed \(self.presumed), rejected \(self.rejected), expired \(self.expired), uncertain "
            + "\(self.uncertain), not sent \(self.notSent)"
    }
}

/// Runs `body` with an HTTP client, shut down however `body` ends (a client dropped running stops the process).
func withCampaignClient<T>(_ body: (HTTPClient) async throws -> T) async throws -> T {
    let client = HTTPClient(eventLoopGroupProvider: .singleton)
    let value: T
    do {
        value = try await body(client)
    } catch {
        try? await client.shutdown()
        throw error
    }
    try await client.shutdown()
    return value
}

/// The API of a `salvo serve` child process, as its kill tests call it: each call's status, JSON (or null) and bytes;
/// the wait for the service to answer after a start; and a campaign paused once two thirds of its rows are in the
/// ledger, its report read (the journal's second run, after the kill), resumed and waited for to its end.
struct ServeAPI {
    let base: String
    let key: String
    let client: HTTPClient

    func call(
        _ method: HTTPMethod,
        _ path: String,
        contentType: String? = nil,
        headers: [(String, String)] = [],
        body: String? = nil
    ) async throws -> (Int, JSONValue, [UInt8]) {
        var request = HTTPClientRequest(url: self.base + path)
        request.method = method
        request.headers.add(name: "Authorization", value: "Bearer \(self.key)")
        if let contentType { request.headers.add(name: "Content-Type", value: contentType) }
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body { request.body = .bytes(ByteBuffer(string: body)) }
        let response = try await self.client.execute(request, timeout: .seconds(30))
        let bytes = Array(try await response.body.collect(upTo: 16 << 20).readableBytesView)
        return (Int(response.status.code), (try? JSONValue.parse(bytes).value) ?? .null, bytes)
    }

    /// Waits (60 s at most) until the service answers.
    func up() async throws {
        try await eventually("the service answers", timeout: .seconds(60)) {
            (try? await self.call(.GET, "/v1/campaigns"))?.0 == 200
        }
    }

    /// Pauses campaign `id` once the simulator's ledger holds two thirds of `rows`, checks the pause and that its report is
    /// the journal's second run, resumes it and waits for it to finish: the rows the kill left uncertain, and the
    /// final report.
    func pauseAtTwoThirdsAndFinish(
        _ id: String,
        rows: Int,
        simulator: Simulator
    ) async throws -> (inherited: Int, final: JobReport) {
        try await eventually("two thirds delivered", timeout: .seconds(60), every: .milliseconds(5)) {
            simulator.ledger.snapshot().accepted >= 2 * rows / 3
        }
        let (pausedStatus, paused, _) = try await self.call(.POST, "/v1/campaigns/\(id)/pause")
        #expect(pausedStatus == 200 && paused["state"] == .string("paused"), "\(paused)")
        let (_, _, reportBytes) = try await self.call(.GET, "/v1/campaigns/\(id)/report")
        let afterKill = try JSONDecoder().decode(JobReport.self, from: Data(reportBytes))
        #expect(afterKill.resumed?.run == 2, "\(afterKill.summary)")
        let inherited = afterKill.resumed?.inheritedUncertain ?? 0

        let (resumedStatus, _, _) = try await self.call(.POST, "/v1/campaigns/\(id)/resume")
        #expect(resumedStatus == 200)
        try await eventually("the campaign finished", timeout: .seconds(120)) {
            (try? await self.call(.GET, "/v1/campaigns/\(id)"))?.1["state"] == .string("finished")
        }
        let (_, _, finalBytes) = try await self.call(.GET, "/v1/campaigns/\(id)/report")
        return (inherited, try JSONDecoder().decode(JobReport.self, from: Data(finalBytes)))
    }
}
