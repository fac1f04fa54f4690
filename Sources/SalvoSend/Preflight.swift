import APNSWire
import Foundation
import NIOSSL
import SalvoBinary
import SalvoHTTP2
import SalvoProxy
import SalvoRows
import X509

/// `salvo check`: everything a send would need, checked without sending a notification. The checks are pure
/// functions of the files' contents (`CredentialCheck`, `Preflight.payload`, `Preflight.tokens`); the handshake is
/// the one step that touches the network, and only when asked.
public enum Preflight {
    /// What to check.
    public struct Request: Sendable {
        /// How the send would authenticate.
        public enum Credentials: Sendable {
            /// A client certificate and key (PEM, the key encrypted when `passphrase` is given) or PKCS#12.
            case certificate(certificateFile: String?, keyFile: String?, pkcs12File: String?, passphrase: String?)
            /// An ES256 signing key (HTTP/2 token authentication).
            case signingKey(file: String, keyID: String?, teamID: String?)
            /// A provider token file (`salvo token mint`, HTTP/2 token authentication).
            case providerTokenFile(String)
        }

        /// Which interfaces the send would use.
        public var binary: GatewayAddress?
        public var http2: GatewayAddress?
        /// The environment of Apple's gateway the address names (nil for `HOST:PORT`).
        public var environment: APNSCertificate.Environment?
        public var serverName: String?
        /// The proxy a connection to either gateway goes through (nil: direct).
        public var proxyForBinary: ProxyConfiguration?
        public var proxyForHTTP2: ProxyConfiguration?
        public var trustedCAFile: String?
        public var credentials: Credentials
        /// With a signing key: the file where the processes using the key share one provider token (`send
        /// --token-cache`), so that a check reuses the token a send signed rather than signing another.
        public var tokenCache: String?
        public var topic: String?
        public var payloadFile: String?
        /// A payload per row, as `send` takes it: one template (`--payload-template`), or a folder of them with the
        /// column that picks one (`--payload-dir`, `--language-column`).
        public var payloadTemplate: String?
        public var payloadDir: String?
        public var languageColumn = "lang"
        /// The payload limits to check against (one per interface).
        public var payloadLimits: [PayloadLimit] = []
        public var priority: NotificationPriority = .immediate
        /// HTTP/2: the `apns-push-type` the send would use, checked against `topic` and `priority` (nil: not
        /// checked).
        public var pushType: APNSPushType?
        public var tokenFiles: [String] = []
        /// The files that hold the token inputs named otherwise (`-`, `postgres`).
        public var tokenSpools = InputSpools()
        public var input = TokenSource.Options()
        /// Rows of each token file a send reads before its first connection (`SendRequest.firstChunkRows`).
        public var firstChunkRows = TokenSource.defaultFirstChunkRows
        /// Whether to shake hands with the gateways.
        public var handshake = true
        public var handshakeTimeout: Duration = .seconds(10)
        public var now = Date()

        public init(credentials: Credentials) {
            self.credentials = credentials
        }
    }

    /// Runs every check in order; the handshakes last, and only when the credentials loaded.
    public static func run(_ request: Request) async -> [CheckResult] {
        var results = Self.credentials(request)
        let credentialsLoaded = !results.contains {
            ($0.name == "credentials" || $0.name == "provider token") && $0.status == .fail
        }
        if request.http2 != nil, let pushType = request.pushType {
            results.append(Self.pushType(pushType, topic: request.topic, priority: request.priority))
        }
        let now = Int64(request.now.timeIntervalSince1970)
        if let file = request.payloadFile {
            results += Self.payload(file: file, limits: request.payloadLimits, priority: request.priority)
            if Self.sendsLiveActivities(request) {
                results += Self.liveActivity(file: file, priority: request.priority, now: now)
            }
        }
        var payloads: RowPayloads?
        if request.payloadTemplate != nil || request.payloadDir != nil {
            let (checks, templates) = Self.templates(request)
            results += checks
            var rows = templates?.templates
            if let loaded = rows, Self.sendsLiveActivities(request) {
                let checked = Self.liveActivity(templates: loaded, priority: request.priority, now: now)
                results += checked.results
                rows = checked.templates
            }
            // Rows are measured against the smallest limit of the interfaces checked.
            if let rows, let limit = request.payloadLimits.min(by: { $0.bytes < $1.bytes }) {
                payloads = RowPayloads(templates: rows, limit: limit)
            }
        }
        if !request.tokenFiles.isEmpty {
            results += Self.tokens(
                files: request.tokenFiles,
                spools: request.tokenSpools,
                options: request.input,
                payloads: payloads,
                firstChunkRows: request.firstChunkRows
            )
        }
        guard request.handshake else { return results }
        guard credentialsLoaded else {
            results.append(.fail("handshake", "not tried: the credentials do not load"))
            return results
        }
        if let gateway = request.binary {
            results.append(await Self.binaryHandshake(request, gateway: gateway))
        }
        if let gateway = request.http2 {
            results += await Self.http2Handshake(request, gateway: gateway)
        }
        return results
    }

    /// The credentials' checks: certificate and key, dates, environment and topic; or the signing key, key id,
    /// team id and topic.
    public static func credentials(_ request: Request) -> [CheckResult] {
        switch request.credentials {
        case .certificate(let certificateFile, let keyFile, let pkcs12File, let passphrase):
            let loaded: (certificate: Certificate, key: Certificate.PrivateKey)
            do {
                loaded = try CredentialFiles.load(
                    certificateFile: certificateFile,
                    keyFile: keyFile,
                    pkcs12File: pkcs12File,
                    passphrase: passphrase
                )
            } catch {
                return [.fail("credentials", error.description)]
            }
            let file = pkcs12File ?? certificateFile ?? ""
            return [.ok("credentials", "\(file): read")]
                + CredentialCheck.certificate(
                    loaded.certificate,
                    key: loaded.key,
                    file: file,
                    now: request.now,
                    gateway: request.environment,
                    topic: request.topic
                )
        case .signingKey(let file, let keyID, let teamID):
            var results: [CheckResult]
            do {
                let pem = try String(contentsOfFile: file, encoding: .utf8)
                results = [.ok("credentials", "\(file): read"), CredentialCheck.signingKey(pem: pem, file: file)]
            } catch {
                results = [.fail("credentials", "\(file): cannot read the signing key: \(error.localizedDescription)")]
            }
            results.append(CredentialCheck.identifier(flag: "--key-id", value: keyID))
            results.append(CredentialCheck.identifier(flag: "--team-id", value: teamID))
            results.append(Self.tokenTopic(request.topic, what: "a signing key"))
            return results
        case .providerTokenFile(let path):
            return [
                Self.providerTokenFile(path, now: Int64(request.now.timeIntervalSince1970)),
                Self.tokenTopic(request.topic, what: "a provider token"),
            ]
        }
    }

    /// The topic of a send authenticated by a token: needed, and any of the team's apps.
    private static func tokenTopic(_ topic: String?, what: String) -> CheckResult {
        if let topic, !topic.isEmpty {
            return .ok("topic", "--topic \(topic) (\(what) may send to any of the team's apps)")
        }
        return .fail("topic", "--topic is needed with \(what): give the app's bundle id")
    }

    /// A provider token file as `send --provider-token-file` reads it: a token file whose fields agree with its
    /// token, issued less than an hour before `now` (UNIX seconds) and not ahead of it beyond clock skew; a
    /// warning from 55 minutes of age.
    public static func providerTokenFile(_ path: String, now: Int64) -> CheckResult {
        let name = "provider token"
        guard let data = FileManager.default.contents(atPath: path) else {
            return .fail(name, "\(path): cannot read the provider token file (does it exist, and may it be read?)")
        }
        let contents: ProviderTokenFileContents
        do {
            contents = try ProviderTokenFileContents(parsing: [UInt8](data), path: path)
            _ = try ProviderTokenFile(path: path, clock: { now })
        } catch {
            return .fail(name, error.message)
        }
        let age = max(0, now - contents.issuedAt)
        let which = "a token of key \(contents.keyID), team \(contents.teamID), issued \(age / 60) min ago"
        if age >= ProviderTokenFileMonitor.warningAge {
            return .warning(
                name,
                "\(path): \(which): APNs refuses it from 60 minutes of age; a send takes a newer one only when the "
                    + "file is replaced (salvo token mint)"
            )
        }
        return .ok(name, "\(path): \(which) (APNs takes it until 60 minutes)")
    }

    /// The push type's rules (`APNSPushType.problem`): a known push type, the topic suffix it needs (voip:
    /// `<bundle id>.voip`, …), the priorities it takes (background: 5; pushtotalk: 10).
    public static func pushType(
        _ pushType: APNSPushType,
        topic: String?,
        priority: NotificationPriority
    ) -> CheckResult {
        let name = "push type"
        if let problem = pushType.problem(topic: topic, priority: priority, naming: .options) {
            return .fail(name, problem.message)
        }
        let to = topic.map { " to --topic \($0)" } ?? ""
        return .ok(name, "apns-push-type \(pushType)\(to) at priority \(priority.rawValue)")
    }

    /// The payload file: strict JSON with an `aps` object, within each limit, and fit for the priority.
    public static func payload(file: String, limits: [PayloadLimit], priority: NotificationPriority) -> [CheckResult] {
        guard let data = FileManager.default.contents(atPath: file) else {
            return [.fail("payload", "\(file): cannot read the file (does it exist, and may it be read?)")]
        }
        return Self.payload(bytes: [UInt8](data), file: file, limits: limits, priority: priority)
    }

    /// `payload(file:…)` on bytes already read (as `salvo payload check` checks them).
    public static func payload(
        bytes: [UInt8],
        file: String,
        limits: [PayloadLimit],
        priority: NotificationPriority
    ) -> [CheckResult] {
        let payload: Payload
        do {
            payload = try Payload(jsonBytes: bytes)
            try payload.check(priority: priority)
        } catch {
            return [.fail("payload", "\(file): \(error.message)")]
        }
        var results: [CheckResult] = []
        for limit in limits {
            do {
                try payload.check(limit: limit)
                results.append(.ok("payload", "\(file): \(payload.byteCount) bytes compact, within \(limit)"))
            } catch {
                results.append(.fail("payload", "\(file): \(error.message)"))
            }
        }
        return results
    }

    /// At most this many bad rows are named in the table (the count is always whole).
    public static let namedRejects = 5

    /// The token files as a send reads them: first each file's header and first `firstChunkRows` rows, as `send`
    /// reads them before its first connection (`TokenSource.open`: a file whose first rows hold no token is refused
    /// there, so it fails here), then every row (`TokenSource.validate`): rows, bad rows with their lines,
    /// duplicates; with `payloads`, the columns the templates name and each row's rendering (a row that cannot be
    /// rendered, or renders over the limit, is a bad row).
    public static func tokens(
        files: [String],
        spools: InputSpools = InputSpools(),
        options: TokenSource.Options,
        payloads: RowPayloads? = nil,
        firstChunkRows: Int = TokenSource.defaultFirstChunkRows
    ) -> [CheckResult] {
        let summary: TokenSource.Summary
        do {
            let opened = TokenSource(
                files: files,
                spools: spools,
                options: options,
                payloads: payloads,
                firstChunkRows: firstChunkRows
            )
            if let small = try opened.open() {
                summary = small
            } else {
                summary = try TokenSource(files: files, spools: spools, options: options, payloads: payloads).validate()
            }
        } catch {
            return [.fail("tokens", "\(error.description) (a send refuses this before its first connection)")]
        }
        var results: [CheckResult] = []
        if summary.validRows == 0 {
            results.append(.fail("tokens", "no valid token in \(summary.inputRows) row(s): a send would send nothing"))
        } else {
            results.append(
                .ok(
                    "tokens",
                    "\(summary.validRows) valid row(s) of \(summary.inputRows); a token within the first "
                        + "\(firstChunkRows) rows of \(files.count == 1 ? "the file" : "each file"), as send needs"
                )
            )
        }
        if let payloads, summary.largestPayload > 0 {
            results.append(
                .ok(
                    "rendered",
                    "the rows' payloads render to at most \(summary.largestPayload) bytes, within \(payloads.limit)"
                )
            )
        }
        if !summary.rejects.isEmpty {
            let named = summary.rejects.prefix(Self.namedRejects).map { reject in
                "\(reject.file):\(reject.line) \(TerminalText.escaped(reject.value)): \(reject.reason)"
            }
            let more = summary.rejects.count > Self.namedRejects ? "; …" : ""
            results.append(
                .warning(
                    "bad rows",
                    "\(summary.rejects.count) bad row(s), reported and not sent: \(named.joined(separator: "; "))\(more)"
                )
            )
        }
        if summary.duplicates > 0 {
            results.append(
                .warning(
                    "duplicates",
                    "\(summary.duplicates) row(s) repeat an earlier token and would be sent again (--dedupe refuses them)"
                )
            )
        }
        return results
    }

    private static func binaryHandshake(_ request: Request, gateway: GatewayAddress) async -> CheckResult {
        guard case .certificate(let certificateFile, let keyFile, let pkcs12File, let passphrase) = request.credentials
        else {
            return .fail("handshake binary", "the binary interface takes a client certificate, not a signing key")
        }
        let identity: GatewayCredentials.Identity =
            if let pkcs12File { .pkcs12(file: pkcs12File, passphrase: passphrase) } else {
                .pem(certificateChainFile: certificateFile ?? "", privateKeyFile: keyFile ?? "", passphrase: passphrase)
            }
        do {
            let text = try await GatewayHandshake.binary(
                gateway: gateway,
                serverName: request.serverName,
                credentials: GatewayCredentials(identity: identity, trustedCAFile: request.trustedCAFile),
                timeout: request.handshakeTimeout,
                proxy: request.proxyForBinary
            )
            return .ok("handshake binary", text)
        } catch {
            return .fail("handshake binary", error.message)
        }
    }

    private static func http2Handshake(_ request: Request, gateway: GatewayAddress) async -> [CheckResult] {
        do {
            let authentication: APNSAuthentication
            switch request.credentials {
            case .certificate(let certificateFile, let keyFile, let pkcs12File, let passphrase):
                if let pkcs12File {
                    authentication = try .pkcs12(file: pkcs12File, passphrase: passphrase ?? "")
                } else {
                    authentication = try .certificate(
                        pemFile: certificateFile ?? "",
                        keyFile: keyFile ?? "",
                        passphrase: passphrase
                    )
                }
            case .signingKey(let file, let keyID, let teamID):
                let signer = try JWTSigner(p8File: file, keyID: keyID ?? "", teamID: teamID ?? "")
                let cache = try request.tokenCache.map(ProviderTokenCache.init(path:))
                authentication = .token(try ProviderToken(signer: signer, cache: cache))
            case .providerTokenFile(let path):
                authentication = .token(ProviderToken(file: try ProviderTokenFile(path: path)))
            }
            var configuration = HTTP2ClientConfiguration(
                host: gateway.host,
                port: gateway.port,
                authentication: authentication
            )
            configuration.serverName = request.serverName
            configuration.proxy = request.proxyForHTTP2
            if let ca = request.trustedCAFile {
                do {
                    configuration.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(ca))
                } catch {
                    return [.fail("handshake h2", "\(ca): cannot read PEM CA certificates: \(error)")]
                }
            }
            let text = try await HTTP2Handshake.check(configuration, timeout: request.handshakeTimeout)
            // Through a proxy, its line comes first: reached, authenticated, tunnel open, before the TLS handshake.
            let lines = text.split(separator: "\n", maxSplits: 1).map(String.init)
            if lines.count == 2 { return [.ok("proxy h2", lines[0]), .ok("handshake h2", lines[1])] }
            return [.ok("handshake h2", text)]
        } catch {
            let message = Self.message(error)
            // A proxy that refused or could not be reached is its own line: Apple was never reached.
            if let proxy = request.proxyForHTTP2, message.contains("the proxy \(proxy)") {
                return [.fail("proxy h2", message)]
            }
            return [.fail("handshake h2", message)]
        }
    }

    private static func message(_ error: any Error) -> String {
        (error as? HTTP2ClientError)?.message ?? "\(error)"
    }
}
