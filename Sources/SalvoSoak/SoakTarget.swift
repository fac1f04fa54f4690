import APNSWire
import Foundation
import NIOSSL
import SalvoBinary
import SalvoDevelopment
import SalvoHTTP2
import SalvoObservability
import SalvoRows
import SalvoSend
import SalvoSimulator

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Where a soak's rounds go, and how each is judged: a fresh embedded simulator per round, or a running
/// `salvo simulate` reached by address whose ledger is reset and judged through its control endpoint.
protocol SoakTarget: Sendable {
    /// The plan the gateway follows (the environment of the tokens to make, the default round size).
    var plan: FaultPlan { get }
    /// Readies a round of `tokens` tokens and returns the interface to send it over.
    func beginRound(tokens: Int) async throws -> SendRequest.Interface
    /// The ledger's verdict on the round, judged against `expected`.
    func verdict(expected: [DeviceToken]) async throws -> Verdict
    /// Ends the round (an embedded simulator shuts down).
    func endRound() async throws
}

/// Credentials and payload a soak sends with.
struct SoakCredentials: Sendable {
    var caFile: String
    var clientFile: String
    var clientKeyFile: String
    /// The provider token of HTTP/2 rounds (nil for binary ones: a running simulator without its HTTP/2 API has
    /// no signing key).
    var token: ProviderToken?
    var topic: String
    var payload: Payload

    func interface(
        _ kind: SoakConfiguration.Interface,
        host: String,
        port: Int,
        serverName: String,
        configuration: SoakConfiguration
    ) throws -> SendRequest.Interface {
        switch kind {
        case .binary:
            var job = BinaryJobConfiguration(
                host: host,
                port: port,
                credentials: GatewayCredentials(
                    identity: .pem(certificateChainFile: self.clientFile, privateKeyFile: self.clientKeyFile),
                    trustedCAFile: self.caFile
                ),
                template: try FrameTemplate(command: .framed, payload: self.payload),
                connections: configuration.connections
            )
            job.onUncertain = configuration.onUncertain
            return .binary(job)
        case .broadcast:
            throw JobError(.configuration, "broadcast rounds send to channels, not device tokens (BroadcastSoakTarget)")
        case .h2:
            guard let token = self.token else {
                throw JobError(.configuration, "HTTP/2 rounds need the simulator's signing key (simulate --h2-port)")
            }
            var client = HTTP2ClientConfiguration(host: host, port: port, authentication: .token(token))
            client.serverName = serverName
            client.connections = configuration.connections
            client.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(self.caFile))
            let headers = try APNSRequestHeaders(pushType: .alert, topic: self.topic)
            var job = HTTP2JobConfiguration(client: client, headers: headers, payload: self.payload)
            job.onUncertain = configuration.onUncertain
            return .http2(job)
        }
    }
}

/// A fresh simulator per round, in this process, with development certificates made for the soak.
final class EmbeddedSoakTarget: SoakTarget, @unchecked Sendable {
    // @unchecked: the soak runs its rounds one after another; `simulator` is set and cleared between them.
    let plan: FaultPlan
    private let configuration: SoakConfiguration
    private let certificates: CertificateFactory
    private let signingKey: DevelopmentSigningKey
    private let credentials: SoakCredentials
    private var simulator: Simulator?

    init(_ configuration: SoakConfiguration, folder: String, payload: Payload) throws {
        self.plan = configuration.plan
        self.configuration = configuration
        self.certificates = try CertificateFactory()
        let paths = try self.certificates.write(to: folder + "/certificates", topic: SoakRunner.topic)
        self.signingKey = try DevelopmentSigningKey.ensure(in: paths.folder)
        // One provider token for the whole soak, as the token cache would give every run.
        let token = try ProviderToken(
            signer: try JWTSigner(
                p8File: self.signingKey.path,
                keyID: DevelopmentSigningKey.keyID,
                teamID: DevelopmentSigningKey.teamID
            )
        )
        self.credentials = SoakCredentials(
            caFile: paths.ca,
            clientFile: paths.client,
            clientKeyFile: paths.clientKey,
            token: token,
            topic: SoakRunner.topic,
            payload: payload
        )
    }

    func beginRound(tokens: Int) async throws -> SendRequest.Interface {
        var simulatorConfiguration = SimulatorConfiguration(tls: .init(self.certificates))
        simulatorConfiguration.plan = self.plan
        simulatorConfiguration.maximumTokens = max(1 << 16, tokens * 2)
        simulatorConfiguration.expectedTokens = tokens
        if self.configuration.interface == .h2 {
            simulatorConfiguration.http2 = HTTP2EndpointConfiguration(providerKeys: [self.signingKey.providerKey])
        }
        let simulator = try await Simulator.start(simulatorConfiguration)
        self.simulator = simulator
        let port = self.configuration.interface == .h2 ? simulator.http2Port! : simulator.gatewayPort
        return try self.credentials.interface(
            self.configuration.interface,
            host: "127.0.0.1",
            port: port,
            serverName: "localhost",
            configuration: self.configuration
        )
    }

    func verdict(expected: [DeviceToken]) async throws -> Verdict {
        self.simulator!.verdict(expected: ExpectedTokens(expected))
    }

    func endRound() async throws {
        try await self.simulator?.shutdown()
        self.simulator = nil
    }
}

/// A running `salvo simulate` (`--control-port`), reached by address: its ledger is reset before each round and
/// judged after it; the credentials are the ones it wrote in its certificate folder.
struct ExternalSoakTarget: SoakTarget {
    let plan: FaultPlan
    private let configuration: SoakConfiguration
    private let external: SoakConfiguration.External
    private let credentials: SoakCredentials

    init(_ configuration: SoakConfiguration, external: SoakConfiguration.External, payload: Payload) async throws {
        self.configuration = configuration
        self.external = external
        let folder = external.certificates
        let key = folder + "/AuthKey_\(DevelopmentSigningKey.keyID).p8"
        let token =
            configuration.interface == .h2
            ? try ProviderToken(
                signer: try JWTSigner(
                    p8File: key,
                    keyID: DevelopmentSigningKey.keyID,
                    teamID: DevelopmentSigningKey.teamID
                )
            ) : nil
        self.credentials = SoakCredentials(
            caFile: folder + "/ca.pem",
            clientFile: folder + "/client.pem",
            clientKeyFile: folder + "/client-key.pem",
            token: token,
            topic: external.topic,
            payload: payload
        )
        let data = try await Self.request(external, "GET", "/plan")
        self.plan = try FaultPlan.decode(data)
    }

    func beginRound(tokens: Int) async throws -> SendRequest.Interface {
        _ = try await Self.request(self.external, "POST", "/reset")
        return try self.credentials.interface(
            self.configuration.interface,
            host: self.external.host,
            port: self.external.port,
            serverName: self.external.serverName,
            configuration: self.configuration
        )
    }

    func verdict(expected: [DeviceToken]) async throws -> Verdict {
        var body = "token\n"
        body.reserveCapacity(65 * expected.count + 6)
        for token in expected {
            body += token.hexString
            body += "\n"
        }
        let data = try await Self.request(self.external, "POST", "/verdict", body: Data(body.utf8))
        return try JSONDecoder().decode(Verdict.self, from: data)
    }

    func endRound() async throws {}

    /// One request to the control endpoint, with its bearer token; an answer other than 2xx is an error that
    /// names it.
    static func request(
        _ external: SoakConfiguration.External,
        _ method: String,
        _ path: String,
        body: Data? = nil
    ) async throws -> Data {
        var request = URLRequest(url: external.control.appendingPathComponent(String(path.dropFirst())))
        request.httpMethod = method
        request.httpBody = body
        request.setValue("Bearer " + external.controlToken.text, forHTTPHeaderField: "Authorization")
        request.timeoutInterval = 60
        let (data, response) = try await URLSession.shared.data(for: request)
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        guard (200..<300).contains(status) else {
            throw JobError(
                .unreachable,
                "\(method) \(request.url?.absoluteString ?? path): \(status) \(String(decoding: data.prefix(200), as: UTF8.self))"
            )
        }
        return data
    }
}
