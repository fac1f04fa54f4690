import APNSWire
import ArgumentParser
import Foundation
import NIOSSL
import SalvoBinary
import SalvoConsole
import SalvoHTTP2
import SalvoIO
import SalvoRows
import SalvoSend

/// `salvo send TOKENS.csv --payload FILE.json --gateway HOST:PORT --cert … --key …`
struct SendCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Send one payload to every token of CSV files (binary provider interface or HTTP/2 API).",
        discussion: """
            Exit status: 0 when every row was valid and delivered; 1 when some row was refused (bad input, \
            rejected by the gateway, expired or uncertain); 64 for wrong arguments; 3 when the job could not \
            run (files, credentials, gateway unreachable) or an output could not be written whole (a full disk, \
            a failed --write-back: the report names it); 130 or 143 after SIGINT or SIGTERM.
            """
    )

    @Argument(help: "CSV files of device tokens; - reads one from standard input (spooled first).")
    var tokens: [String] = []

    @OptionGroup var postgres: PostgresSourceOptions

    @OptionGroup var payloads: PayloadOptions

    @Option(help: "HOST:PORT, or `production` / `sandbox` for Apple's gateways.")
    var gateway: String

    @OptionGroup var certificate: CertificateOptions

    @Option(name: .customLong("protocol"), help: "binary (the binary provider interface) or h2 (the HTTP/2 API).")
    var wireProtocol: WireProtocol = .binary

    @OptionGroup var signingKey: SigningKeyOptions
    @OptionGroup var proxy: ProxyOptions

    @Option(help: "HTTP/2 apns-topic: the app's bundle id (required with --auth-key).")
    var topic: String?

    @Option(help: "HTTP/2 apns-push-type: alert, background, voip, location, complication, …")
    var pushType: String = "alert"

    @Option(name: .customLong("collapse-id"), help: "HTTP/2 apns-collapse-id (at most 64 bytes).")
    var collapseID: String?

    @Option(
        help:
            "Merge the tokens APNs called unregistered (HTTP/2 410) or invalid into this suppression file (as `feedback --into`)."
    )
    var unregistered: String?

    @Option(help: "A suppression file (from `feedback --into` or --unregistered): its tokens are not sent.")
    var suppress: String?

    @Option(
        name: .customLong("registered-at"),
        help: """
            With --suppress: the column (header name or 1-based number) with each device's last registration, UNIX \
            seconds or ISO 8601; a listed token registered after the list's timestamp is sent (Apple's rule).
            """
    )
    var registeredAt: String?

    @Option(
        name: .customLong("token-cache"),
        help: """
            HTTP/2 with --auth-key: the file where every process using the key shares one provider token \
            (default: $XDG_CACHE_HOME/salvo/provider-tokens.json, else ~/.cache/salvo/provider-tokens.json).
            """
    )
    var tokenCache: String?

    @Option(
        name: .customLong("provider-token-file"),
        help: """
            HTTP/2: send the provider token in this file (from `salvo token mint`, e.g. a mounted Kubernetes \
            Secret) instead of minting one; it is read again when it changes (with --topic).
            """
    )
    var providerTokenFile: String?

    @Option(help: "HTTP/2: at most this many notifications per second over all connections (default: no cap).")
    var rate: Int?

    @Option(
        help: """
            Keep the job's journal in this folder: each row's settled outcome and the job's inputs. The same \
            command run again resumes an unfinished job (sending only the rows not settled), and sends nothing \
            for a finished one.
            """
    )
    var journal: String?

    @OptionGroup var journalOptions: JournalOptions

    @Option(
        name: .customLong("max-streams"),
        help: "HTTP/2: at most this many streams in flight per connection (default: as many as the server allows)."
    )
    var maximumStreams: Int?

    @Option(
        name: .customLong("h2-engine"),
        help:
            "HTTP/2: the client's engine, wire (Salvo's own codec) or nio (NIOHTTP2) (default: \(HTTP2ClientConfiguration.defaultEngine.rawValue))."
    )
    var engine: HTTP2Engine?

    @OptionGroup var input: InputOptions
    @OptionGroup var delivery: DeliveryOptions
    @OptionGroup var output: OutputOptions
    @OptionGroup var writeBack: WriteBackOptions
    @OptionGroup var observe: ObservabilityOptions
    @OptionGroup var progressOptions: ProgressOptions

    func validate() throws {
        try self.postgres.validate(tokens: self.tokens, header: self.input.header)
        guard !self.tokens.isEmpty || self.postgres.isGiven else {
            throw ValidationError("name at least one token file (or --from-postgres URL --query SQL)")
        }
        try StandardInputOption.validate(self.tokens)
        try self.writeBack.validate(sourceURL: self.postgres.url)
        guard self.payloads.isGiven else {
            throw ValidationError("give one of --payload, --payload-template and --payload-dir")
        }
        if self.registeredAt != nil && self.suppress == nil {
            throw ValidationError("--registered-at applies the suppression list: give --suppress too")
        }
        if let file = self.providerTokenFile {
            guard self.wireProtocol == .h2 else {
                throw ValidationError(
                    "--provider-token-file needs --protocol h2 (the binary interface takes certificates only)"
                )
            }
            guard self.signingKey.authKey == nil, self.signingKey.keyID == nil, self.signingKey.teamID == nil,
                self.tokenCache == nil
            else {
                throw ValidationError(
                    "--provider-token-file \(file) holds the token: leave out --auth-key, --key-id, --team-id and --token-cache"
                )
            }
            guard !self.certificate.isAnyGiven else {
                throw ValidationError("give --provider-token-file or a certificate, not both")
            }
            guard self.topic != nil else { throw ValidationError("--provider-token-file needs --topic") }
        } else if self.wireProtocol == .h2 && self.signingKey.authKey != nil {
            guard !self.certificate.isAnyGiven else {
                throw ValidationError("give --auth-key or a certificate, not both")
            }
            guard self.signingKey.keyID != nil, self.signingKey.teamID != nil, self.topic != nil else {
                throw ValidationError("--auth-key needs --key-id, --team-id and --topic")
            }
        } else {
            guard self.certificate.isGiven else {
                throw ValidationError(
                    self.wireProtocol == .h2
                        ? "give --auth-key (with --key-id, --team-id, --topic), or --cert and --key, or --pkcs12"
                        : "give --cert and --key, or --pkcs12"
                )
            }
            guard self.wireProtocol == .h2 || self.signingKey.authKey == nil else {
                throw ValidationError("--auth-key needs --protocol h2 (the binary interface takes certificates only)")
            }
        }
        _ = try self.gatewayAddress()
        if self.wireProtocol == .h2 {
            try self.validateHeaderOptions()
            try self.validatePushType()
        }
    }

    func run() async throws {
        try await exitingOnUserError { try await self.send() }
    }

    private func send() async throws {
        // Either job stops in order on a signal: no new rows, 2 s for those in flight, then the record. A second
        // signal stops it at once, and a second later ends the process with the record of its last progress. Watched
        // from the start: a signal while a query's rows or standard input are read (before the job) ends the process
        // at once, nothing sent, rather than by the default action.
        let stop = JobStop(grace: .seconds(2))
        let record = CutShortRecord(stop: stop)
        let signals = SignalStop(stop: stop, record: record, endsBeforeStart: true)
        defer { signals.cancel() }
        let interface: SendRequest.Interface
        var what: String
        let templateFiles = try self.payloads.templates()
        var templates = templateFiles?.templates
        if self.wireProtocol == .h2 && APNSPushType(rawValue: self.pushType) == .liveActivity {
            templates = try self.payloads.liveActivityChecked(
                templates,
                priority: self.delivery.resolvedPriority(for: .liveActivity),
                quiet: self.output.quiet
            )
        }
        let observability = try await self.observe.start(label: "salvo.send")
        if self.wireProtocol == .h2 {
            var configuration = try self.http2Configuration(templates)
            configuration.client.logger = observability.logger
            interface = .http2(configuration)
            what = "\(configuration.payload.byteCount) payload bytes over HTTP/2"
        } else {
            var configuration = try self.binaryConfiguration(templates)
            configuration.logger = observability.logger
            interface = .binary(configuration)
            what = "\(configuration.template.frameByteCount) bytes"
        }
        if let templates {
            let count = templates.templates.count
            what = "a payload per row (\(count) template\(count == 1 ? "" : "s"))"
        }
        var input = self.input.tokenSourceOptions
        input.registeredAt = self.registeredAt.map { Int($0).map(TokenColumn.number) ?? .name($0) }
        // `-`: standard input, spooled whole before the job opens its input or a connection.
        var spools = try StandardInputOption.prepare(
            self.tokens,
            journal: self.journal,
            restart: self.journalOptions.journalRestart
        )
        // `--from-postgres`: the query's rows, snapshotted whole before the job opens its input or a connection.
        if self.postgres.isGiven { input.header = .present }
        let files = try await self.postgres.prepare(
            self.tokens,
            column: input.column,
            journal: self.journal,
            restart: self.journalOptions.journalRestart,
            spools: &spools
        )
        var request = SendRequest(
            files: files,
            input: input,
            interface: interface,
            outputs: self.output.outputs(unregistered: self.unregistered),
            suppress: self.suppress,
            journal: try self.journalOptions.journal(self.journal, settings: self.journalSettings),
            payloads: templates
        )
        request.inputSpools = spools
        request.payloadFiles = templateFiles?.files ?? []
        request.settings = self.journalSettings
        request.writeBack = try self.writeBack.recorder(
            sourceURL: self.postgres.url,
            passwordFile: self.postgres.passwordFile
        )
        // The job hears a stop from here on (a wait for the journal's lock ends with it, and says so).
        stop.begin()
        let result: SendResult
        do {
            result = try await SendConsole.run(
                request,
                what: what,
                display: ProgressDisplay(self.progressOptions.progress, quiet: self.output.quiet),
                metrics: observability.jobMetrics(dimensions: [("protocol", self.wireProtocol.rawValue)]),
                stop: stop,
                record: record,
                quiet: self.output.quiet
            )
        } catch let error as UserError {
            await observability.stop()
            // A job stopped by a signal exits by the signal, even when it also failed while it settled (the record
            // is written either way).
            guard let signal = signals.signal else { throw error }
            printError(error.description)
            throw ExitCode(128 + signal)
        } catch {
            await observability.stop()
            throw error
        }
        await observability.stop()
        if let signal = signals.signal { throw ExitCode(128 + signal) }
        // A job that stopped early (credentials refused, an error that cannot heal) could not run: 3. The cause goes
        // to standard error too, as a binary job's does, so that it shows with --quiet.
        if let stopped = result.stopped {
            printError(stopped)
            throw ExitCode(3)
        }
        // An output that could not be written whole (named above, and in the report): the job's record is not whole.
        if !result.outputFailures.isEmpty { throw ExitCode(3) }
        if !result.isComplete { throw ExitCode(1) }
    }

    /// The options that change what is sent, as written (a relative expiry stays relative between runs).
    private var journalSettings: [String: String] {
        [
            "--format": String(self.delivery.format), "--expiry": self.delivery.expiry ?? "",
            // The templates' contents are the job's `payloadFiles` (a changed file is refused by name).
            "--payload-template": self.payloads.payloadTemplate ?? "",
            "--payload-dir": self.payloads.payloadDir.map { "\($0) (\(self.payloads.languageColumn))" } ?? "",
            "--priority": self.delivery.priority.map { String($0) } ?? "",
            "--topic": self.topic ?? "", "--push-type": self.pushType, "--collapse-id": self.collapseID ?? "",
        ].merging(self.postgres.settings) { _, source in source }
    }

    private func binaryConfiguration(_ templates: PayloadTemplates?) throws -> BinaryJobConfiguration {
        let gateway = try self.gatewayAddress()
        // Every template's structure must suit the frame (priority rules); the first one's is the job's.
        for template in templates?.templates.dropFirst() ?? [] {
            _ = try self.delivery.template(payload: template.probe, file: template.file)
        }
        let shared = try self.payloads.sharedPayload(templates)
        let template = try self.delivery.template(payload: shared.payload, file: shared.file)
        var configuration = try self.delivery.configuration(
            host: gateway.host,
            port: gateway.port,
            serverName: self.certificate.serverName,
            credentials: self.certificate.credentials,
            template: template
        )
        configuration.proxy = try self.proxy.configuration(forHost: gateway.host)
        return configuration
    }

    private func http2Configuration(_ templates: PayloadTemplates?) throws -> HTTP2JobConfiguration {
        let gateway = try self.gatewayAddress()
        let payload = try self.payloads.sharedPayload(templates).payload
        var client = HTTP2ClientConfiguration(
            host: gateway.host,
            port: gateway.port,
            authentication: try self.authentication()
        )
        client.serverName = self.certificate.serverName
        client.proxy = try self.proxy.configuration(forHost: gateway.host)
        self.delivery.applyConnections(to: &client)
        client.reconnect = self.delivery.reconnectPolicy()
        if let streams = self.maximumStreams {
            guard streams >= 1 else { throw UserError("--max-streams needs at least 1 stream, not \(streams)") }
            client.maximumStreamsPerConnection = streams
        }
        if let engine = self.engine { client.engine = engine }
        if let rate = self.rate {
            guard rate >= 1 else { throw UserError("--rate needs at least 1 notification per second, not \(rate)") }
            client.rate = rate
        }
        if let ca = self.certificate.ca { client.trustRoots = try trustRoots(caFile: ca) }
        var configuration = HTTP2JobConfiguration(client: client, headers: try self.requestHeaders(), payload: payload)
        configuration.onUncertain = self.delivery.onUncertain
        return configuration
    }
}

/// CA certificates (PEM) to trust for an HTTP/2 gateway.
func trustRoots(caFile: String) throws -> NIOSSLTrustRoots {
    do {
        return .certificates(try NIOSSLCertificate.fromPEMFile(caFile))
    } catch {
        throw UserError("\(caFile): cannot read PEM CA certificates: \(error)")
    }
}

extension SendCommand {
    fileprivate func gatewayAddress() throws(ValidationError) -> GatewayAddress {
        guard let address = GatewayAddress(parsing: self.gateway, for: self.wireProtocol == .h2 ? .http2 : .binary)
        else {
            throw ValidationError("--gateway is HOST:PORT, production or sandbox (got \(self.gateway))")
        }
        return address
    }

    fileprivate func authentication() throws(UserError) -> APNSAuthentication {
        try http2Authentication(
            certificate: self.certificate,
            signingKey: self.signingKey,
            providerTokenFile: self.providerTokenFile,
            tokenCache: self.tokenCache
        )
    }

    /// Refuses header values APNs would refuse for every row, before connecting: an empty `--topic` or one with a line break or control character (also in `--collapse-id`, which would split
    /// the header), a `--key-id` or `--team-id` that is not 10 letters and digits.
    fileprivate func validateHeaderOptions() throws(ValidationError) {
        if let topic, let problem = APNSHeaderValueRules.topicProblem(topic) { throw ValidationError(problem) }
        if let collapseID, let problem = APNSHeaderValueRules.collapseIDProblem(collapseID) {
            throw ValidationError(problem)
        }
        try self.signingKey.validateIdentifiers()
    }

    /// Refuses a `--push-type` that APNs would refuse for every row with this `--topic` or `--priority`
    /// (`APNSPushType.problem`): an unknown push type, a topic without the push type's suffix (voip:
    /// `<bundle id>.voip`, …), a priority the push type does not take (background: 5; pushtotalk: 10).
    fileprivate func validatePushType() throws(ValidationError) {
        let pushType = APNSPushType(rawValue: self.pushType)
        if let problem = pushType.problem(
            topic: self.topic,
            priority: self.delivery.resolvedPriority(for: pushType),
            priorityIsDefault: self.delivery.priority == nil,
            naming: .options
        ) {
            throw ValidationError(problem.message)
        }
    }

    fileprivate func requestHeaders() throws -> APNSRequestHeaders {
        let expiration = try self.delivery.http2Expiration()
        do {
            return try APNSRequestHeaders(
                pushType: APNSPushType(rawValue: self.pushType),
                expiration: expiration,
                priority: self.delivery.resolvedPriority(for: APNSPushType(rawValue: self.pushType)),
                topic: self.topic,
                collapseID: self.collapseID
            )
        } catch {
            throw UserError("the request headers would be refused: \(error)")
        }
    }
}

/// Which provider protocol `send` speaks.
enum WireProtocol: String, ExpressibleByArgument, CaseIterable {
    case binary
    case h2
}
