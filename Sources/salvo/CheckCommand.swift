import APNSWire
import ArgumentParser
import Foundation
import SalvoBinary
import SalvoConsole
import SalvoHTTP2
import SalvoRows
import SalvoSend

/// `salvo check TOKENS.csv --payload FILE --gateway … (--cert/--key | --auth-key …)`: everything `send` would need,
/// checked without sending a notification (a payload per row too: `--payload-template`, `--payload-dir`).
struct CheckCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Check credentials, payload, token files and the gateway without sending a notification.",
        discussion: """
            One line per check: ok, WARNING or FAIL with the reason. Exit status: 0 when a send would start \
            (warnings allowed), 3 when it would not, 64 for wrong arguments.
            """
    )

    @Argument(help: "CSV files of device tokens (optional); - reads one from standard input.")
    var tokens: [String] = []

    @OptionGroup var postgres: PostgresSourceOptions

    /// `send`'s payload options, each optional here: `--payload`, `--payload-template`, or `--payload-dir` with
    /// `--language-column`.
    @OptionGroup var payloads: PayloadOptions

    @Option(help: "HOST:PORT, or `production` / `sandbox` for Apple's gateways.")
    var gateway: String

    @Option(
        name: .customLong("h2-gateway"),
        help: "With --protocol both and a HOST:PORT --gateway: the HTTP/2 gateway's HOST:PORT."
    )
    var http2Gateway: String?

    @OptionGroup var certificate: CertificateOptions

    @Option(name: .customLong("protocol"), help: "binary, h2, or both (the handshake with each gateway).")
    var wireProtocol: CheckProtocol = .binary

    @OptionGroup var signingKey: SigningKeyOptions
    @OptionGroup var proxy: ProxyOptions

    @Option(help: "The topic (bundle id) to send to: checked against the certificate's topics.")
    var topic: String?

    @Option(help: "HTTP/2 apns-push-type (voip payloads may be 5120 bytes).")
    var pushType: String = "alert"

    @Option(help: "The binary command: 2 (2048-byte payloads), 1 or 0 (256 bytes).")
    var format: UInt8 = 2

    @Option(help: "Priority: 10 or 5 (default: 10; 5 for --push-type background, as send).")
    var priority: UInt8?

    @Option(
        name: .customLong("provider-token-file"),
        help: "HTTP/2: the provider token file a send would use (from `salvo token mint`): its token and its age."
    )
    var providerTokenFile: String?

    @Option(
        name: .customLong("token-cache"),
        help: """
            HTTP/2 with --auth-key: the file where every process using the key shares one provider token, as for \
            send (default: $XDG_CACHE_HOME/salvo/provider-tokens.json, else ~/.cache/salvo/provider-tokens.json).
            """
    )
    var tokenCache: String?

    @Option(help: "Seconds the handshake may take.")
    var timeout: Int = 10

    @Flag(help: "Leave out the TLS handshake with the gateway.")
    var noHandshake = false

    @Option(
        name: .customLong("channel-inventory"),
        help: "A broadcast channel inventory CSV to check (columns, ids, policies)."
    )
    var channelInventory: String?

    @Flag(help: "Print the results as JSON.")
    var json = false

    @OptionGroup var input: InputOptions

    func validate() throws {
        try StandardInputOption.validate(self.tokens)
        try self.postgres.validate(tokens: self.tokens, header: self.input.header)
        guard [0, 1, 2].contains(self.format) else {
            throw ValidationError("--format is 0, 1 or 2 (got \(self.format))")
        }
        if let priority = self.priority, priority != 10 && priority != 5 {
            throw ValidationError("--priority is 10 or 5 (got \(priority))")
        }
        guard (1...300).contains(self.timeout) else {
            throw ValidationError("--timeout is 1 to 300 (got \(self.timeout))")
        }
        if self.providerTokenFile != nil {
            guard self.wireProtocol == .h2 else { throw ValidationError("--provider-token-file needs --protocol h2") }
            guard !self.certificate.isAnyGiven, self.signingKey.authKey == nil else {
                throw ValidationError("give --provider-token-file, --auth-key or a certificate: one of them")
            }
        } else if self.signingKey.authKey != nil {
            guard self.wireProtocol == .h2 else { throw ValidationError("--auth-key needs --protocol h2") }
            guard !self.certificate.isAnyGiven else {
                throw ValidationError("give --auth-key or a certificate, not both")
            }
        } else if !self.certificate.isGiven {
            throw ValidationError("give --cert and --key, or --pkcs12 (or --auth-key with --protocol h2)")
        }
        if self.tokenCache != nil && self.signingKey.authKey == nil {
            throw ValidationError("--token-cache goes with --auth-key (the provider token it signs is shared there)")
        }
        if let topic, let problem = APNSHeaderValueRules.topicProblem(topic) { throw ValidationError(problem) }
        try self.signingKey.validateIdentifiers()
        _ = try self.addresses()
    }

    func run() async throws {
        let (binary, http2) = try self.addresses()
        let credentials: Preflight.Request.Credentials =
            if let file = self.providerTokenFile {
                .providerTokenFile(file)
            } else if let authKey = self.signingKey.authKey {
                .signingKey(file: authKey, keyID: self.signingKey.keyID, teamID: self.signingKey.teamID)
            } else {
                .certificate(
                    certificateFile: self.certificate.cert,
                    keyFile: self.certificate.key,
                    pkcs12File: self.certificate.pkcs12,
                    passphrase: self.certificate.passphrase
                )
            }
        var request = Preflight.Request(credentials: credentials)
        if self.signingKey.authKey != nil {
            request.tokenCache =
                self.tokenCache ?? ProviderTokenCache.defaultPath(environment: ProcessInfo.processInfo.environment)
        }
        request.binary = binary
        request.http2 = http2
        request.environment =
            switch self.gateway {
            case "production": .production
            case "sandbox": .development
            default: nil
            }
        request.serverName = self.certificate.serverName
        try await exitingOnUserError {
            request.proxyForBinary = try binary.flatMap { try self.proxy.configuration(forHost: $0.host) }
            request.proxyForHTTP2 = try http2.flatMap { try self.proxy.configuration(forHost: $0.host) }
        }
        request.trustedCAFile = self.certificate.ca
        request.topic = self.topic
        request.payloadFile = self.payloads.payload
        request.payloadTemplate = self.payloads.payloadTemplate
        request.payloadDir = self.payloads.payloadDir
        request.languageColumn = self.payloads.languageColumn
        var limits: [PayloadLimit] = []
        if binary != nil { limits.append(self.format == 2 ? .binary : .legacy) }
        if http2 != nil { limits.append(self.pushType == "voip" ? .http2VoIP : .http2) }
        request.payloadLimits = limits
        let pushType = APNSPushType(rawValue: self.pushType)
        request.priority = NotificationPriority(rawValue: self.priority ?? (pushType == .background ? 5 : 10))
        request.pushType = pushType
        try await exitingOnUserError { request.tokenSpools = try StandardInputOption.prepare(self.tokens) }
        request.tokenFiles = self.tokens
        request.input = self.input.tokenSourceOptions
        if self.postgres.isGiven {
            // The query's rows, as `send --from-postgres` would read them.
            request.input.header = .present
            let column = request.input.column
            try await exitingOnUserError {
                request.tokenFiles = try await self.postgres.prepare(
                    self.tokens,
                    column: column,
                    spools: &request.tokenSpools
                )
            }
        }
        request.handshake = !self.noHandshake
        request.handshakeTimeout = .seconds(self.timeout)
        var results = await Preflight.run(request)
        if let inventory = self.channelInventory { results += channelInventoryChecks(inventory) }
        if self.json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            let output = CheckOutput(wouldStart: results.wouldStart, checks: results)
            print(String(decoding: try encoder.encode(output), as: UTF8.self))
        } else {
            print(Self.table(results))
        }
        if !results.wouldStart { throw ExitCode(3) }
    }

    /// One line per check: the status, the check's name, what was found.
    static func table(_ results: [CheckResult]) -> String {
        let width = results.map(\.name.count).max() ?? 0
        var lines = results.map { result in
            let status =
                switch result.status {
                case .ok: "ok     "
                case .warning: "WARNING"
                case .fail: "FAIL   "
                }
            // The detail may quote a token or suppression file's text: escaped, as every input value shown.
            let detail = TerminalText.escaped(result.detail)
            return "\(status)  \(result.name.padding(toLength: width, withPad: " ", startingAt: 0))  \(detail)"
        }
        let failed = results.filter { $0.status == .fail }.count
        lines.append(failed == 0 ? "a send would start" : "a send would not start: \(failed) check(s) failed")
        return lines.joined(separator: "\n")
    }

    /// The binary and the HTTP/2 gateway to shake hands with, per `--protocol`.
    private func addresses() throws(ValidationError) -> (binary: GatewayAddress?, http2: GatewayAddress?) {
        func parse(
            _ text: String,
            _ service: GatewayAddress.Service,
            _ flag: String
        ) throws(ValidationError)
            -> GatewayAddress
        {
            guard let address = GatewayAddress(parsing: text, for: service) else {
                throw ValidationError("\(flag) is HOST:PORT, production or sandbox (got \(text))")
            }
            return address
        }
        switch self.wireProtocol {
        case .binary:
            return (try parse(self.gateway, .binary, "--gateway"), nil)
        case .h2:
            return (nil, try parse(self.http2Gateway ?? self.gateway, .http2, "--gateway"))
        case .both:
            let named = self.gateway == "production" || self.gateway == "sandbox"
            guard named || self.http2Gateway != nil else {
                throw ValidationError("--protocol both with a HOST:PORT --gateway needs --h2-gateway HOST:PORT")
            }
            return (
                try parse(self.gateway, .binary, "--gateway"),
                try parse(self.http2Gateway ?? self.gateway, .http2, "--h2-gateway")
            )
        }
    }
}

/// `check --json`: the verdict and every check.
struct CheckOutput: Codable {
    var wouldStart: Bool
    var checks: [CheckResult]
}

/// Which interfaces `check` shakes hands with.
enum CheckProtocol: String, ExpressibleByArgument, CaseIterable {
    case binary
    case h2
    case both
}
