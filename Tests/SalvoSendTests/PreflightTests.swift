import APNSWire
import Foundation
import SalvoBinary
import SalvoRows
import SalvoSend
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// `salvo check`'s checks as functions of the files they read: certificates from the factory, written to a fresh
/// folder; the handshakes against the simulator over real TLS on 127.0.0.1.
@Suite(.tags(.network), .runs(.network)) struct PreflightTests {
    /// A folder with `client.pem`/`client-key.pem` made from `identity` (and `key`, another key, when given).
    private func write(_ identity: CertificateFactory.Identity, keyPEM: String? = nil) throws -> (String, String) {
        let folder = TestScratch.root.appendingPathComponent("salvo-check-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let certificate = folder.appendingPathComponent("client.pem").path
        let key = folder.appendingPathComponent("client-key.pem").path
        try identity.certificatePEM.write(toFile: certificate, atomically: true, encoding: .utf8)
        try (keyPEM ?? identity.privateKeyPEM).write(toFile: key, atomically: true, encoding: .utf8)
        return (certificate, key)
    }

    private func request(
        _ files: (String, String),
        topic: String? = "com.example.app",
        environment: APNSCertificate.Environment? = .development
    ) -> Preflight.Request {
        var request = Preflight.Request(
            credentials: .certificate(certificateFile: files.0, keyFile: files.1, pkcs12File: nil, passphrase: nil)
        )
        request.topic = topic
        request.environment = environment
        request.handshake = false
        return request
    }

    private func status(_ results: [CheckResult], _ name: String) -> CheckResult.Status? {
        results.first { $0.name == name }?.status
    }

    @Test func goodCredentialsPassEveryCheck() throws {
        let files = try self.write(try CertificateFactory.shared.client(topic: "com.example.app"))
        let results = Preflight.credentials(self.request(files))
        #expect(results.allSatisfy { $0.status == .ok }, "\(results)")
        #expect(results.map(\.name) == ["credentials", "key", "expiry", "environment", "topic"])
        #expect(results.wouldStart)
    }

    @Test func aKeyOfAnotherCertificateFails() throws {
        let other = try CertificateFactory.shared.client(topic: "com.example.app")
        let files = try self.write(
            try CertificateFactory.shared.client(topic: "com.example.app"),
            keyPEM: other.privateKeyPEM
        )
        let results = Preflight.credentials(self.request(files))
        #expect(self.status(results, "key") == .fail, "\(results)")
        #expect(results.first { $0.name == "key" }?.detail.contains("does not belong to the certificate") == true)
        #expect(!results.wouldStart)
    }

    @Test func anExpiredCertificateFails() throws {
        let files = try self.write(try CertificateFactory.shared.client(topic: "com.example.app", expired: true))
        let results = Preflight.credentials(self.request(files))
        #expect(self.status(results, "expiry") == .fail, "\(results)")
        #expect(results.first { $0.name == "expiry" }?.detail.contains("expired on") == true)
        #expect(!results.wouldStart)
    }

    @Test func aCertificateAboutToExpireIsAWarning() throws {
        let identity = try CertificateFactory.shared.client(
            topic: "com.example.app",
            validUntil: Date().addingTimeInterval(10 * 86400 + 3600)
        )
        let results = Preflight.credentials(self.request(try self.write(identity)))
        let expiry = try #require(results.first { $0.name == "expiry" })
        #expect(expiry.status == .warning, "\(results)")
        #expect(expiry.detail.contains("in 10 day(s)"), "\(expiry.detail)")
        #expect(results.wouldStart, "a warning does not stop a send")
    }

    @Test func aTopicTheCertificateDoesNotNameFails() throws {
        let files = try self.write(try CertificateFactory.shared.client(topic: "com.example.app"))
        let wrong = Preflight.credentials(self.request(files, topic: "com.example.other"))
        let topic = try #require(wrong.first { $0.name == "topic" })
        #expect(topic.status == .fail)
        #expect(
            topic.detail.contains("com.example.app, com.example.app.voip, com.example.app.complication"),
            "\(topic)"
        )
        // The topics extension's other entries are allowed too.
        let voip = Preflight.credentials(self.request(files, topic: "com.example.app.voip"))
        #expect(self.status(voip, "topic") == .ok, "\(voip)")
    }

    @Test func aDevelopmentCertificateForTheProductionGatewayFails() throws {
        let files = try self.write(try CertificateFactory.shared.client(topic: "com.example.app"))
        let results = Preflight.credentials(self.request(files, environment: .production))
        #expect(self.status(results, "environment") == .fail, "\(results)")
        let universal = try self.write(
            try CertificateFactory.shared.client(topic: "com.example.app", environment: .universal)
        )
        #expect(
            self.status(Preflight.credentials(self.request(universal, environment: .production)), "environment") == .ok
        )
    }

    @Test func aBadSigningKeyAndBadIdentifiersFail() throws {
        let folder = TestScratch.root.appendingPathComponent("salvo-check-\(UUID().uuidString)")
        let bad = folder.appendingPathComponent("AuthKey_BAD.p8").path
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        // A certificate's key is not a .p8 file.
        try CertificateFactory.shared.ca.certificatePEM.write(toFile: bad, atomically: true, encoding: .utf8)
        var request = Preflight.Request(credentials: .signingKey(file: bad, keyID: "ABC123", teamID: "DEF123GHIJ"))
        request.topic = "com.example.app"
        let results = Preflight.credentials(request)
        #expect(self.status(results, "signing key") == .fail, "\(results)")
        #expect(self.status(results, "--key-id") == .fail)
        #expect(self.status(results, "--team-id") == .ok)

        let good = try DevelopmentSigningKey.ensure(in: folder.path)
        request.credentials = .signingKey(file: good.path, keyID: DevelopmentSigningKey.keyID, teamID: "SALVOTEAM1")
        #expect(Preflight.credentials(request).allSatisfy { $0.status == .ok })
    }

    @Test func badTokenRowsAreNamedWithTheirLinesAndAFileWithoutValidRowsFails() throws {
        let folder = TestScratch.root.appendingPathComponent("salvo-check-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let good = String(repeating: "ab", count: 32)
        let mixed = folder.appendingPathComponent("mixed.csv").path
        try "token\n\(good)\nnot-a-token\n\(good)\n".write(toFile: mixed, atomically: true, encoding: .utf8)
        let results = Preflight.tokens(files: [mixed], options: TokenSource.Options())
        #expect(self.status(results, "tokens") == .ok, "\(results)")
        let bad = try #require(results.first { $0.name == "bad rows" })
        #expect(bad.status == .warning)
        #expect(bad.detail.contains("\(mixed):3"), "\(bad.detail)")
        #expect(self.status(results, "duplicates") == .warning)

        let wrong = folder.appendingPathComponent("wrong.csv").path
        try "token\nxyz\n".write(toFile: wrong, atomically: true, encoding: .utf8)
        let none = Preflight.tokens(files: [wrong], options: TokenSource.Options())
        #expect(self.status(none, "tokens") == .fail, "\(none)")
        let missing = Preflight.tokens(files: [folder.appendingPathComponent("absent.csv").path], options: .init())
        #expect(!missing.wouldStart)
    }

    @Test func thePayloadIsCheckedAgainstEachInterfacesLimit() throws {
        let large = Array(#"{"aps":{"alert":""#.utf8) + [UInt8](repeating: 0x61, count: 300) + Array(#""}}"#.utf8)
        let results = Preflight.payload(bytes: large, file: "p.json", limits: [.legacy, .http2], priority: .immediate)
        #expect(results.map(\.status) == [.fail, .ok], "\(results)")
        let broken = Preflight.payload(bytes: Array("{".utf8), file: "p.json", limits: [.binary], priority: .immediate)
        #expect(!broken.wouldStart)
    }

    @Test func theHandshakesPassAgainstTheSimulatorAndFailAgainstAClosedPort() async throws {
        let paths = CertificateFactory.sharedFolder
        var configuration = SimulatorConfiguration.testing(CertificateFactory.shared)
        configuration.http2 = HTTP2EndpointConfiguration()
        let simulator = try await Simulator.start(configuration)
        var request = Preflight.Request(
            credentials: .certificate(
                certificateFile: paths.client,
                keyFile: paths.clientKey,
                pkcs12File: nil,
                passphrase: nil
            )
        )
        request.trustedCAFile = paths.ca
        request.topic = CertificateFactory.sharedTopic
        request.binary = GatewayAddress(host: "127.0.0.1", port: simulator.gatewayPort)
        request.http2 = GatewayAddress(host: "127.0.0.1", port: simulator.http2Port ?? 0)
        request.serverName = "localhost"
        let passed = await Preflight.run(request)
        #expect(self.status(passed, "handshake binary") == .ok, "\(passed)")
        #expect(self.status(passed, "handshake h2") == .ok, "\(passed)")
        #expect(passed.first { $0.name == "handshake h2" }?.detail.contains("ALPN h2") == true)
        let ledger = simulator.ledger.snapshot()
        #expect(ledger.accepted == 0 && ledger.bytesReceived == 0, "nothing was sent: \(ledger)")
        #expect(ledger.connectionsAccepted >= 1, "the binary gateway saw the handshake")
        try await simulator.shutdown()

        // The port the simulator listened on is closed now.
        request.handshakeTimeout = .seconds(5)
        let refused = await Preflight.run(request)
        #expect(self.status(refused, "handshake binary") == .fail, "\(refused)")
        #expect(self.status(refused, "handshake h2") == .fail, "\(refused)")
        #expect(!refused.wouldStart)
    }

    @Test func aClientCertificateTheGatewayRefusesFailsTheHandshake() async throws {
        let paths = CertificateFactory.sharedFolder
        let simulator = try await Simulator.start(.testing(CertificateFactory.shared))
        var request = Preflight.Request(
            credentials: .certificate(
                certificateFile: paths.foreignClient,
                keyFile: paths.foreignClientKey,
                pkcs12File: nil,
                passphrase: nil
            )
        )
        request.trustedCAFile = paths.ca
        request.binary = GatewayAddress(host: "127.0.0.1", port: simulator.gatewayPort)
        let results = await Preflight.run(request)
        try await simulator.shutdown()
        #expect(self.status(results, "handshake binary") == .fail, "\(results)")
    }
}
