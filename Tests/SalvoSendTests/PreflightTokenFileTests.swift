import APNSWire
import Foundation
import SalvoBinary
import SalvoHTTP2
import SalvoRows
import SalvoSend
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// `salvo check --provider-token-file` and the push-type rules: what a send with a minted token file, a push type,
/// a topic and a priority would meet, checked without sending.
@Suite(.tags(.network), .runs(.network)) struct PreflightTokenFileTests {
    private func status(_ results: [CheckResult], _ name: String) -> CheckResult.Status? {
        results.first { $0.name == name }?.status
    }

    /// A token file minted `age` seconds before `now`.
    private func tokenFile(age: Int64, now: Int64) throws -> String {
        let folder = TestScratch.root.appendingPathComponent("salvo-ptf-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let key = try DevelopmentSigningKey.ensure(in: folder.path)
        let signer = try JWTSigner(
            pem: try String(contentsOfFile: key.path, encoding: .utf8),
            keyID: DevelopmentSigningKey.keyID,
            teamID: DevelopmentSigningKey.teamID
        )
        let path = folder.appendingPathComponent("provider-token.json").path
        try ProviderTokenFile.write(ProviderTokenFileContents(signer: signer, issuedAt: now - age), to: path)
        return path
    }

    @Test func aFreshTokenPassesAnOldOneWarnsAndAnExpiredOneFails() throws {
        let now = Int64(Date().timeIntervalSince1970)
        let fresh = Preflight.providerTokenFile(try self.tokenFile(age: 10 * 60, now: now), now: now)
        #expect(fresh.status == .ok, "\(fresh)")
        #expect(fresh.detail.contains("key \(DevelopmentSigningKey.keyID), team \(DevelopmentSigningKey.teamID)"))
        #expect(fresh.detail.contains("issued 10 min ago"))

        let old = Preflight.providerTokenFile(try self.tokenFile(age: 57 * 60, now: now), now: now)
        #expect(old.status == .warning, "\(old)")

        let expired = Preflight.providerTokenFile(try self.tokenFile(age: 61 * 60, now: now), now: now)
        #expect(expired.status == .fail)
        #expect(expired.detail.contains("APNs refuses tokens from 60 minutes of age"), "\(expired)")

        let ahead = Preflight.providerTokenFile(try self.tokenFile(age: -20 * 60, now: now), now: now)
        #expect(ahead.status == .fail)
        #expect(ahead.detail.contains("in the future"), "\(ahead)")
    }

    @Test func aFileThatIsNotATokenFileFailsAndStopsTheHandshake() async throws {
        let folder = TestScratch.root.appendingPathComponent("salvo-ptf-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let path = folder.appendingPathComponent("token.json").path
        try Data(#"{"token":"abc"}"#.utf8).write(to: URL(fileURLWithPath: path))
        var request = Preflight.Request(credentials: .providerTokenFile(path))
        request.topic = "com.example.app"
        request.http2 = GatewayAddress(host: "127.0.0.1", port: 9)
        let results = await Preflight.run(request)
        #expect(self.status(results, "provider token") == .fail)
        #expect(results.first { $0.name == "provider token" }?.detail.contains("is not a provider token file") == true)
        #expect(self.status(results, "topic") == .ok)
        #expect(self.status(results, "handshake") == .fail, "not tried: \(results)")

        request.credentials = .providerTokenFile(folder.appendingPathComponent("missing.json").path)
        request.topic = nil
        let missing = Preflight.credentials(request)
        #expect(self.status(missing, "provider token") == .fail)
        #expect(self.status(missing, "topic") == .fail, "a token needs --topic")
    }

    @Test func thePushTypeRulesAreChecked() {
        #expect(Preflight.pushType(.alert, topic: "com.example.app", priority: .immediate).status == .ok)
        let voip = Preflight.pushType(.voip, topic: "com.example.app", priority: .immediate)
        #expect(voip.status == .fail)
        #expect(voip.detail.contains("ending in .voip"), "\(voip)")
        #expect(Preflight.pushType(.voip, topic: "com.example.app.voip", priority: .immediate).status == .ok)
        let background = Preflight.pushType(.background, topic: "com.example.app", priority: .immediate)
        #expect(background.status == .fail)
        #expect(background.detail.contains("BadPriority"), "\(background)")
        #expect(Preflight.pushType(.background, topic: "com.example.app", priority: .powerConsiderate).status == .ok)
        let unknown = Preflight.pushType(APNSPushType(rawValue: "banner"), topic: nil, priority: .immediate)
        #expect(unknown.status == .fail)
    }

    @Test func thePushTypeIsCheckedOnlyForHTTP2() async {
        var request = Preflight.Request(credentials: .providerTokenFile("/nonexistent"))
        request.topic = "com.example.app"
        request.pushType = .voip
        request.handshake = false
        #expect(!(await Preflight.run(request)).contains { $0.name == "push type" }, "binary: no push type")
        request.http2 = GatewayAddress(host: "127.0.0.1", port: 9)
        #expect((await Preflight.run(request)).first { $0.name == "push type" }?.status == .fail)
    }
}
