import APNSWire
import ArgumentParser
import CoreMetrics
import Foundation
import Logging
import NIOConcurrencyHelpers
import Prometheus
import SalvoCampaigns
import SalvoConsole
import SalvoData
import SalvoDevelopment
import SalvoHTTP2
import SalvoObservability
import SalvoPostgres
import SalvoRows
import SalvoServer
import SalvoService
import SalvoServiceStores
import SalvoSimulator
import SalvoWebhooks

/// `salvo serve`: the service. Takes notifications over HTTP, keeps them in its store, sends them with the HTTP/2
/// job `send` runs, and answers what became of each (docs/service.md).
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract:
            "Run Salvo as a service: an HTTP API that takes notifications, keeps them durably and sends each once.",
        subcommands: [ServeRunCommand.self, ServeKeysCommand.self, ServeMigrateCommand.self],
        defaultSubcommand: ServeRunCommand.self
    )
}

/// `salvo serve [run]`: the service itself.
struct ServeRunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Serve the API (the default: `salvo serve --demo` is `salvo serve run --demo`)."
    )

    @Option(help: "HOST:PORT the API listens on (port 0: any free port).")
    var listen = "127.0.0.1:8080"

    @Option(
        help: ArgumentHelp(
            "The service's store: a folder (created if missing; default salvo-store, with --demo a throwaway one), or "
                + "a PostgreSQL URL postgres://USER@HOST:PORT/DATABASE?sslmode=MODE shared by a fleet (made by "
                + "`salvo serve migrate`).",
            valueName: "folder-or-url"
        )
    )
    var store: String?

    @Option(
        name: .customLong("postgres-password-file"),
        help: "With a PostgreSQL store: the file whose first line is the password (else the URL's, or PGPASSWORD)."
    )
    var passwordFile: String?

    @Option(
        name: .customLong("worker-id"),
        help: "With a PostgreSQL store: this process's id on the rows it claims (default HOST-PID-RANDOM)."
    )
    var workerID: String?

    @Option(
        name: .customLong("lease-seconds"),
        help: ArgumentHelp(
            "With a PostgreSQL store: how long a row this worker claimed is its own before another worker may take it "
                + "over (renewed every third of it while the worker runs), 3 to 86400.",
            valueName: "seconds"
        )
    )
    var leaseSeconds: Int?

    @Option(
        name: .customLong("campaign-lease-seconds"),
        help: ArgumentHelp(
            "With a PostgreSQL store: how long a campaign partition this worker claimed is its own without a "
                + "checkpoint (one every 0.3 s while it sends) before another worker may take it over, 3 to 86400 "
                + "(default 10).",
            valueName: "seconds"
        )
    )
    var campaignLeaseSeconds: Int?

    @Option(
        name: .customLong("campaign-partition-rows"),
        help: ArgumentHelp(
            "With a PostgreSQL store: the rows of each partition a campaign's audience is cut into for the fleet's "
                + "workers to claim, 100 to 10000000 (default 10000).",
            valueName: "rows"
        )
    )
    var campaignPartitionRows: Int?

    @Option(
        name: .customLong("local-folder"),
        help: ArgumentHelp(
            "With a PostgreSQL store: this process's own files, the sending job's marks and the campaigns' files "
                + "(default salvo-local)."
        )
    )
    var localFolder: String?

    @Option(name: .customLong("tls-cert"), help: "The listener's certificate chain (PEM), for HTTPS.")
    var tlsCert: String?

    @Option(name: .customLong("tls-key"), help: "The listener's private key (PEM), with --tls-cert.")
    var tlsKey: String?

    @Option(help: "The gateway: production, sandbox, or HOST:PORT.")
    var gateway = "production"

    @OptionGroup var certificate: CertificateOptions
    @OptionGroup var signingKey: SigningKeyOptions
    @OptionGroup var proxy: ProxyOptions

    @Option(
        name: .customLong("provider-token-file"),
        help: """
            Send the provider token in this file (from `salvo token mint`, e.g. a mounted Kubernetes Secret) \
            instead of minting one: a fleet's workers then share one token, as APNs wants a key's token renewed at \
            most every 20 minutes; it is read again when it changes.
            """
    )
    var providerTokenFile: String?

    @Option(help: "The topic (bundle id) of a notification that names none.")
    var topic: String?

    @Option(help: "Notifications not yet final beyond which a request is answered 429.")
    var queueLimit = 1_000_000

    @Option(help: "Rows whose request got no answer: resend (at least once) or report (at most once).")
    var onUncertain: OnUncertain = .resend

    @Option(help: "Seconds the rows in flight may take to be answered after SIGTERM.")
    var shutdownGrace = 10

    @Option(help: "HTTP/2 connections to the gateway, 1 to 64.")
    var connections = 2

    @Option(
        name: .customLong("campaign-files"),
        help: "The folder whose CSV files a campaign may name as its audience (default: none; uploads only)."
    )
    var campaignFiles: String?

    @Option(
        name: .customLong("campaign-upload-limit"),
        help: ArgumentHelp(
            "The largest audience a campaign may upload, in MiB (413 beyond); an upload the store's disk has no room "
                + "for (twice the audience, and 64 MiB left free) is refused 507.",
            valueName: "MiB"
        )
    )
    var campaignUploadLimit = 4096

    @Option(
        name: .customLong("campaign-postgres"),
        help: ArgumentHelp(
            "The PostgreSQL database whose queries a campaign may name as its audience (default: none).",
            discussion: """
                postgres://USER@HOST:PORT/DATABASE?sslmode=MODE, the service's own: a caller names only the query. \
                The password from --campaign-postgres-password-file, the URL or PGPASSWORD (never shown). The \
                queries run in read-only sessions; a role that may only read the audience's tables is best.
                """,
            valueName: "url"
        )
    )
    var campaignPostgres: String?

    @Option(
        name: .customLong("campaign-postgres-password-file"),
        help: "With --campaign-postgres: the file whose first line is the database's password."
    )
    var campaignPostgresPasswordFile: String?

    @Option(
        name: .customLong("webhook"),
        help: ArgumentHelp(
            "A receiver of events, 'URL [events=gone,refused,outcome,campaign]' (every kind when left out); repeatable.",
            valueName: "URL [events=…]"
        )
    )
    var webhooks: [String] = []

    @Option(
        name: .customLong("webhook-secret-file"),
        help: "The file of the secret the webhooks' bodies are signed with (HMAC-SHA256; at least 16 bytes)."
    )
    var webhookSecretFile: String?

    @Option(
        name: .customLong("webhook-retention-days"),
        help: "Days delivered and dead webhook events stay in the outbox (a receiver keeps their ids as long)."
    )
    var webhookRetentionDays = 7

    @Flag(
        name: .customLong("no-console"),
        help: "No console: / and /console/ answer 404 (the console is read-only HTML behind the API's keys)."
    )
    var noConsole = false

    @Flag(help: "Run against an embedded simulator with a demo API key (printed), to try the API.")
    var demo = false

    @Option(help: "With --demo: write the demo API key to this file.")
    var demoKeyFile: String?

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: Logger.Level = .info

    @Option(name: .customLong("log-format"), help: "text or json (one object per line), on standard error.")
    var logFormat: LogFormat = .json

    func validate() throws {
        if (self.tlsCert == nil) != (self.tlsKey == nil) {
            throw ValidationError("--tls-cert and --tls-key go together")
        }
        guard ServeListen(self.listen) != nil else {
            throw ValidationError("--listen is HOST:PORT (got \(self.listen))")
        }
        guard self.queueLimit >= 1 else { throw ValidationError("--queue-limit is at least 1") }
        guard (1...64).contains(self.connections) else { throw ValidationError("--connections is 1 to 64") }
        if let folder = self.campaignFiles {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: folder, isDirectory: &isDirectory), isDirectory.boolValue
            else {
                throw ValidationError("--campaign-files \(folder) is not a folder")
            }
        }
        guard (1...(1 << 30)).contains(self.campaignUploadLimit) else {
            throw ValidationError("--campaign-upload-limit is 1 to 1073741824 MiB")
        }
        guard (1...3650).contains(self.webhookRetentionDays) else {
            throw ValidationError("--webhook-retention-days is 1 to 3650")
        }
        if let url = self.campaignPostgres {
            do {
                // The password file is read when the service starts; here only the URL's form is judged.
                _ = try PostgresLocation(url: url, environment: ["USER": "-"], option: "--campaign-postgres")
            } catch {
                throw ValidationError(error.message)
            }
        } else if self.campaignPostgresPasswordFile != nil {
            throw ValidationError("--campaign-postgres-password-file goes with --campaign-postgres")
        }
        guard self.shutdownGrace >= 0 else { throw ValidationError("--shutdown-grace is 0 or more seconds") }
        if let file = self.providerTokenFile {
            guard self.signingKey.authKey == nil, self.signingKey.keyID == nil, self.signingKey.teamID == nil else {
                throw ValidationError(
                    "--provider-token-file \(file) holds the token: leave out --auth-key, --key-id and --team-id"
                )
            }
            guard !self.certificate.isAnyGiven, !self.demo else {
                throw ValidationError("give --provider-token-file, a certificate or --demo: one of them")
            }
        } else if !self.demo {
            guard self.certificate.isGiven || self.signingKey.authKey != nil else {
                throw ValidationError(
                    "the gateway credentials: --auth-key with --key-id and --team-id, --provider-token-file, or --cert "
                        + "and --key (or --demo)"
                )
            }
            if self.signingKey.authKey != nil, self.signingKey.keyID == nil || self.signingKey.teamID == nil {
                throw ValidationError("--auth-key needs --key-id and --team-id")
            }
            try self.signingKey.validateIdentifiers()
        }
        if let topic, let problem = APNSHeaderValueRules.topicProblem(topic) { throw ValidationError(problem) }
        _ = try self.webhookSettings()
        if let id = self.workerID, !WorkerID.isValid(id) {
            throw ValidationError("--worker-id is 1 to 128 visible ASCII characters")
        }
        let location = try self.storeLocation()
        if case .folder = location {
            if self.workerID != nil { throw ValidationError("--worker-id goes with a PostgreSQL store") }
            if self.localFolder != nil { throw ValidationError("--local-folder goes with a PostgreSQL store") }
            if self.leaseSeconds != nil { throw ValidationError("--lease-seconds goes with a PostgreSQL store") }
            if self.campaignLeaseSeconds != nil {
                throw ValidationError("--campaign-lease-seconds goes with a PostgreSQL store")
            }
            if self.campaignPartitionRows != nil {
                throw ValidationError("--campaign-partition-rows goes with a PostgreSQL store")
            }
        }
        if let lease = self.leaseSeconds, !(3...86_400).contains(lease) {
            throw ValidationError("--lease-seconds is 3 to 86400 (seconds), not \(lease)")
        }
        if let lease = self.campaignLeaseSeconds, !(3...86_400).contains(lease) {
            throw ValidationError("--campaign-lease-seconds is 3 to 86400 (seconds), not \(lease)")
        }
        if let rows = self.campaignPartitionRows, !(100...10_000_000).contains(rows) {
            throw ValidationError("--campaign-partition-rows is 100 to 10000000, not \(rows)")
        }
    }

    /// `--store` read: a folder, or a PostgreSQL URL (its password never shown).
    private func storeLocation(demoFolder: String? = nil) throws -> ServiceStoreLocation {
        do {
            return try ServiceStoreLocation(
                self.store ?? demoFolder.map { $0 + "/store" } ?? "salvo-store",
                passwordFile: self.passwordFile
            )
        } catch {
            throw ValidationError(error.message)
        }
    }

    /// The `--webhook` endpoints and their secret; none when no `--webhook` is given.
    /// - Throws: `ValidationError` naming the option at fault.
    private func webhookSettings() throws -> (endpoints: [WebhookEndpoint], secret: WebhookSecret)? {
        guard !self.webhooks.isEmpty else {
            if self.webhookSecretFile != nil { throw ValidationError("--webhook-secret-file goes with --webhook") }
            return nil
        }
        var endpoints: [WebhookEndpoint] = []
        do throws(WebhookOptionError) {
            for text in self.webhooks {
                let endpoint = try WebhookEndpoint.parse(text)
                guard !endpoints.contains(where: { $0.url == endpoint.url }) else {
                    throw WebhookOptionError("--webhook \(endpoint.url) is given twice")
                }
                endpoints.append(endpoint)
            }
            guard let path = self.webhookSecretFile else {
                throw WebhookOptionError("--webhook needs --webhook-secret-file: every delivery is signed")
            }
            return (endpoints, try WebhookSecret.load(path: path))
        } catch {
            throw ValidationError(error.message)
        }
    }

    func run() async throws {
        // A service that cannot run (its store, its port, its credentials) exits 3, as a job that could not run.
        try await exitingOnUserError { try await self.serve() }
    }

    private func serve() async throws {
        Observability.bootstrapLogging(format: self.logFormat, level: self.logLevel)
        let logger = Logger(label: "salvo.serve")
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        let listen = ServeListen(self.listen)!

        var simulator: Simulator?
        var folder: String?
        let job: HTTP2JobConfiguration
        var topic = self.topic
        if self.demo {
            let demo = try await ServeDemo.start()
            simulator = demo.simulator
            folder = demo.folder
            job = demo.job
            topic = topic ?? ServeDemo.topic
        } else {
            job = try self.jobConfiguration()
        }
        defer { if let folder { try? FileManager.default.removeItem(atPath: folder) } }
        let location = try self.storeLocation(demoFolder: folder)
        // The process's own files (the job's marks, the campaigns' folders): beside the SQLite file, or in a folder of
        // its own beside a shared database.
        let storeFolder: String
        switch location {
        case .folder(let path): storeFolder = path
        case .postgres: storeFolder = self.localFolder ?? "salvo-local"
        }
        let workerID = self.workerID ?? WorkerID.make()
        let store: any ServiceStore
        do {
            if case .postgres = location { try Self.makeFolder(storeFolder) }
            store = try await location.open(workerID: workerID, lease: .seconds(self.leaseSeconds ?? 120))
        } catch {
            throw UserError(error.message)
        }
        var configuration = ServiceConfiguration(job: job, defaults: .init(topic: topic))
        configuration.queueLimit = self.queueLimit
        configuration.shutdownGrace = .seconds(self.shutdownGrace)
        // The webhooks' loops first: the service's first cycles may already write events for them.
        let webhooks = try self.webhookSettings().map { settings in
            var delivery = WebhookConfiguration()
            delivery.retention = Int64(self.webhookRetentionDays) * 86_400_000
            return WebhookDispatcher.start(
                endpoints: settings.endpoints,
                secret: settings.secret,
                outbox: store,
                configuration: delivery,
                logger: logger
            )
        }
        if let webhooks {
            configuration.webhooks = webhooks.routes
            configuration.webhookEventsWritten = { webhooks.wake() }
        }
        let service: NotificationService
        do {
            service = try await NotificationService.start(
                configuration: configuration,
                store: store,
                marks: try ServiceMarks(directory: storeFolder),
                logger: logger
            )
        } catch {
            await webhooks?.shutdown()
            throw UserError(error.message)
        }
        if case .postgres = location, self.signingKey.authKey != nil {
            // Every worker of a fleet would mint its own tokens from one key: APNs answers TooManyProviderTokenUpdates
            // to a key whose token changes more than once in 20 minutes.
            logger.warning(
                "a worker of a fleet minting its own provider tokens",
                metadata: ["instead": "one token for every worker: --provider-token-file (salvo token mint)"]
            )
        }
        let recovery = service.recovery
        if recovery.uncertain + recovery.neverWritten + recovery.answered > 0 {
            logger.warning(
                "rows were being sent when the service stopped",
                metadata: [
                    "written_unanswered": "\(recovery.uncertain)", "never_written": "\(recovery.neverWritten)",
                    "answered": "\(recovery.answered)", "on_uncertain": "\(self.onUncertain.rawValue)",
                ]
            )
        }
        // Campaigns: `send --journal` jobs over the same gateway and credentials, their records in the same store.
        var campaignQuery: CampaignQuery?
        if let url = self.campaignPostgres {
            do {
                campaignQuery = CampaignQuery(
                    location: try PostgresLocation(
                        url: url,
                        passwordFile: self.campaignPostgresPasswordFile,
                        option: "--campaign-postgres"
                    )
                )
            } catch {
                await webhooks?.shutdown()
                await service.shutdown()
                throw UserError(error.message)
            }
            logger.info("campaigns may name queries", metadata: ["database": "\(campaignQuery!.location.redacted)"])
        }
        var campaignJob = CampaignJob(
            base: configuration.job,
            defaultTopic: topic,
            folder: CampaignFolder(store: storeFolder),
            allowedFiles: self.campaignFiles,
            query: campaignQuery
        )
        campaignJob.uploadRoom.limit = self.campaignUploadLimit << 20
        var fleet = CampaignFleet()
        if let seconds = self.campaignLeaseSeconds { fleet.lease = Int64(seconds) * 1000 }
        if let rows = self.campaignPartitionRows { fleet.partitionRows = rows }
        let campaigns = CampaignRunner(
            store: store,
            job: campaignJob,
            template: { name in service.template(name: name)?.text },
            now: configuration.now,
            logger: logger,
            webhooks: webhooks.map { dispatcher in
                CampaignWebhooks(outbox: store, routes: dispatcher.routes, wake: { dispatcher.wake() })
            },
            fleet: fleet
        )
        do {
            try await campaigns.start()
        } catch {
            await webhooks?.shutdown()
            await service.shutdown()
            throw UserError(error.message)
        }
        var demoKey: String?
        if self.demo {
            let (key, record) = APIKeys.make(name: "demo", now: ServiceClock.milliseconds())
            do {
                try await store.addAPIKey(record)
            } catch {
                throw UserError(error.message)
            }
            demoKey = key
            if let file = self.demoKeyFile { try Data((key + "\n").utf8).write(to: URL(fileURLWithPath: file)) }
        }
        guard
            let document = SalvoData.path("openapi/salvo-v1.json").flatMap({ FileManager.default.contents(atPath: $0) })
        else {
            throw UserError("the OpenAPI document (openapi/salvo-v1.json) is not shipped with this build")
        }
        let responder = ServiceResponder(
            service: service,
            campaigns: campaigns,
            webhooks: webhooks,
            console: self.noConsole ? nil : Console(secureCookie: self.tlsCert != nil),
            document: Array(document),
            metricsText: { String(decoding: registry.emitToBuffer(), as: UTF8.self) },
            logger: logger
        )
        let key = demoKey
        let withConsole = !self.noConsole
        let scheme = self.tlsCert == nil ? "http" : "https"
        let tls = self.tlsCert.map { ServiceServer.TLSFiles(certificate: $0, key: self.tlsKey!) }
        let server = try ServiceServer(
            responder: responder,
            host: listen.host,
            port: listen.port,
            tls: tls,
            logger: logger
        ) { port in
            let base = "\(scheme)://\(listen.host):\(port)"
            switch location {
            case .folder(let path): print("salvo serve: listening on \(base) (store \(path)/salvo.sqlite)")
            case .postgres(let url): print("salvo serve: listening on \(base) (store \(url), worker \(workerID))")
            }
            if withConsole { print("console: \(base)/ (sign in with an API key)") }
            if let demoKey = key {
                print("demo API key: \(demoKey)")
                print(
                    """
                    try: curl -s \(base)/v1/notifications -H 'Authorization: Bearer \(demoKey)' \
                    -H 'Content-Type: application/json' \
                    -d '{"notifications":[{"token":"\(String(repeating: "ab", count: 32))",\
                    "payload":{"aps":{"alert":"hello"}}}]}'
                    """
                )
            }
        }
        let serving = Task { try await server.run() }
        let signals = Task {
            // SIGTERM or SIGINT: stop taking requests (503), let the rows in flight settle, keep the rest; then the
            // listener closes, and connections a client keeps busy are cut after a bounded wait.
            await ServeSignals.wait()
            logger.notice("shutting down", metadata: ["grace_seconds": "\(self.shutdownGrace)"])
            // The campaigns' jobs first (each stops cleanly, its campaign left running for the next start), while
            // the store is still open for their records.
            await campaigns.shutdown()
            // The webhooks' loops before the store closes; what they had not delivered stays in the outbox.
            await webhooks?.shutdown()
            await service.shutdown()
            await server.stop()
            try? await Task.sleep(for: .seconds(5))
            serving.cancel()
        }
        do {
            try await serving.value
        } catch {
            // Cut after the bounded wait of a shutdown, or the listener failed (its port taken, its certificate).
            let cut = service.isStopping
            signals.cancel()
            await campaigns.shutdown()
            await webhooks?.shutdown()
            await service.shutdown()
            try? await simulator?.shutdown()
            if cut { return }
            throw UserError("--listen \(self.listen): \(error)")
        }
        signals.cancel()
        try? await simulator?.shutdown()
    }

    /// Makes the process's own folder beside a shared store.
    private static func makeFolder(_ path: String) throws(StoreFailure) {
        do {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        } catch {
            throw StoreFailure("--local-folder \(path): cannot create the folder: \(error.localizedDescription)")
        }
    }

    private func jobConfiguration() throws -> HTTP2JobConfiguration {
        guard let gateway = GatewayAddress(parsing: self.gateway, for: .http2) else {
            throw ValidationError("--gateway is HOST:PORT, production or sandbox (got \(self.gateway))")
        }
        var client = HTTP2ClientConfiguration(
            host: gateway.host,
            port: gateway.port,
            authentication: try http2Authentication(
                certificate: self.certificate,
                signingKey: self.signingKey,
                providerTokenFile: self.providerTokenFile,
                tokenCache: nil
            )
        )
        client.serverName = self.certificate.serverName
        client.proxy = try self.proxy.configuration(forHost: gateway.host)
        client.connections = self.connections
        client.maximumConnections = nil
        if let ca = self.certificate.ca { client.trustRoots = try trustRoots(caFile: ca) }
        var configuration = HTTP2JobConfiguration(
            client: client,
            headers: try APNSRequestHeaders(topic: self.topic),
            payload: try Payload(json: #"{"aps":{}}"#)
        )
        configuration.onUncertain = self.onUncertain
        return configuration
    }
}

/// `salvo serve migrate`: makes or upgrades a PostgreSQL store's tables to this salvo's schema. Idempotent; two
/// processes migrating at once take turns.
struct ServeMigrateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Create or upgrade a PostgreSQL store's tables (versioned; running it again changes nothing)."
    )

    @Option(help: "The PostgreSQL store: postgres://USER@HOST:PORT/DATABASE?sslmode=MODE.")
    var store: String

    @Option(
        name: .customLong("postgres-password-file"),
        help: "The file whose first line is the password (else the URL's, or PGPASSWORD)."
    )
    var passwordFile: String?

    func run() async throws {
        try await exitingOnUserError {
            let location: ServiceStoreLocation
            do {
                location = try ServiceStoreLocation(self.store, passwordFile: self.passwordFile)
            } catch let failure as StoreFailure {
                throw UserError(failure.message)
            }
            guard case .postgres(let postgres) = location else {
                throw UserError(
                    "--store \(self.store): migrate takes a PostgreSQL URL (a folder's SQLite store upgrades itself)"
                )
            }
            let migration: PostgresStoreSchema.Migration
            do {
                migration = try await PostgresNotificationStore.migrate(location: postgres)
            } catch let failure as StoreFailure {
                throw UserError(failure.message)
            }
            if migration.from == migration.to {
                print("salvo serve migrate: \(postgres.redacted): schema version \(migration.to), nothing to do")
            } else {
                print(
                    "salvo serve migrate: \(postgres.redacted): schema version \(migration.from) -> \(migration.to)"
                )
            }
        }
    }
}

/// `--listen HOST:PORT`.
struct ServeListen {
    var host: String
    var port: Int

    init?(_ text: String) {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]),
            (0...65535).contains(port)
        else { return nil }
        var host = String(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { return nil }
        self.host = host
        self.port = port
    }
}

/// The first SIGTERM or SIGINT.
enum ServeSignals {
    static func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let once = NIOLockedValueBox(false)
            var sources: [DispatchSourceSignal] = []
            for number in [SIGTERM, SIGINT] {
                signal(number, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
                source.setEventHandler {
                    if once.withLockedValue({ done in
                        defer { done = true }
                        return !done
                    }) {
                        continuation.resume()
                    }
                }
                source.resume()
                sources.append(source)
            }
            // The sources live as long as the process: the handler may fire at any time.
            ServeSignals.sources = sources
        }
    }

    /// Set once, by the one wait of the process.
    nonisolated(unsafe) private static var sources: [any DispatchSourceSignal] = []
}

/// `serve --demo`: an embedded simulator with certificates and a signing key made for this run.
enum ServeDemo {
    static let topic = "com.example.salvo.demo"

    struct Started {
        var simulator: Simulator
        var folder: String
        var job: HTTP2JobConfiguration
    }

    static func start(plan: FaultPlan? = nil, expectedTokens: Int? = nil) async throws -> Started {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("salvo-serve-\(getpid())").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let certificates = try CertificateFactory()
        let paths = try certificates.write(to: folder + "/certificates", topic: Self.topic)
        var simulatorConfiguration = SimulatorConfiguration(tls: .init(certificates))
        // Room for a million distinct tokens (the table's size is fixed when it starts).
        simulatorConfiguration.maximumTokens = 1 << 20
        if let plan { simulatorConfiguration.plan = plan }
        if let expectedTokens {
            simulatorConfiguration.expectedTokens = expectedTokens
            simulatorConfiguration.maximumTokens = max(1 << 16, expectedTokens * 2)
        }
        let signingKey = try DevelopmentSigningKey.ensure(in: paths.folder)
        simulatorConfiguration.http2 = HTTP2EndpointConfiguration(providerKeys: [signingKey.providerKey])
        let simulator = try await Simulator.start(simulatorConfiguration)
        let signer = try JWTSigner(
            p8File: signingKey.path,
            keyID: DevelopmentSigningKey.keyID,
            teamID: DevelopmentSigningKey.teamID
        )
        var client = HTTP2ClientConfiguration(
            host: "127.0.0.1",
            port: simulator.http2Port!,
            authentication: .token(try ProviderToken(signer: signer))
        )
        client.serverName = "localhost"
        client.connections = 2
        client.trustRoots = try trustRoots(caFile: paths.ca)
        let job = HTTP2JobConfiguration(
            client: client,
            headers: try APNSRequestHeaders(topic: Self.topic),
            payload: try Payload(json: #"{"aps":{}}"#)
        )
        return Started(simulator: simulator, folder: folder, job: job)
    }
}
