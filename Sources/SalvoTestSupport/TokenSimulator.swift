import APNSWire
import Crypto
import Foundation
import NIOSSL
import SalvoHTTP2
import SalvoSimulator

/// The simulator's HTTP/2 endpoint over TLS, taking provider tokens signed by a key made for it and naming one topic,
/// and a job configuration (2 connections, `{"aps":{}}`) that reaches it: what the service's and the campaigns'
/// tests send through, in process or from a child `salvo` given the key and the CA.
public struct TokenSimulator {
    public let simulator: Simulator
    public let job: HTTP2JobConfiguration
    /// The signing key the simulator trusts (a child reads it from a .p8 file).
    public let signingKey: P256.Signing.PrivateKey
    /// The CA of the simulator's certificate (PEM).
    public let caPEM: String
    public let topic: String
    public let keyID: String
    public let teamID: String

    public static func start(
        topic: String,
        keyID: String,
        teamID: String,
        plan: FaultPlan = FaultPlan(),
        maximumTokens: Int = 1 << 16
    ) async throws -> TokenSimulator {
        let certificates = try CertificateFactory()
        let key = P256.Signing.PrivateKey()
        var configuration = SimulatorConfiguration(tls: .init(certificates))
        configuration.plan = plan
        configuration.maximumTokens = maximumTokens
        configuration.http2 = HTTP2EndpointConfiguration(
            providerKeys: [
                .init(
                    keyID: keyID,
                    teamID: teamID,
                    publicKey: Array(key.publicKey.rawRepresentation),
                    topics: [topic],
                    environment: .any
                )
            ]
        )
        let simulator = try await Simulator.start(configuration)
        var client = HTTP2ClientConfiguration(
            host: "127.0.0.1",
            port: simulator.http2Port!,
            authentication: .token(try ProviderToken(signer: JWTSigner(privateKey: key, keyID: keyID, teamID: teamID)))
        )
        client.serverName = "localhost"
        client.connections = 2
        client.trustRoots = .certificates([
            try NIOSSLCertificate(bytes: Array(certificates.ca.certificatePEM.utf8), format: .pem)
        ])
        let job = HTTP2JobConfiguration(
            client: client,
            headers: try APNSRequestHeaders(topic: topic),
            payload: try Payload(json: #"{"aps":{}}"#)
        )
        return TokenSimulator(
            simulator: simulator,
            job: job,
            signingKey: key,
            caPEM: certificates.ca.certificatePEM,
            topic: topic,
            keyID: keyID,
            teamID: teamID
        )
    }

    /// Writes the signing key and the CA to `folder` for a child `salvo`: the options that reach this simulator.
    public func commandLineOptions(in folder: String) throws -> [String] {
        let keyFile = folder + "/AuthKey.p8"
        try Data(self.signingKey.pemRepresentation.utf8).write(to: URL(fileURLWithPath: keyFile))
        let caFile = folder + "/ca.pem"
        try Data(self.caPEM.utf8).write(to: URL(fileURLWithPath: caFile))
        return [
            "--gateway", "127.0.0.1:\(self.simulator.http2Port!)", "--auth-key", keyFile, "--key-id", self.keyID,
            "--team-id", self.teamID, "--ca", caFile, "--server-name", "localhost", "--topic", self.topic,
        ]
    }
}
