import APNSWire
import Crypto
import Foundation
import NIOSSL
import SalvoRows
import SalvoTestSupport
import SalvoTestTraits
import Testing

@testable import SalvoHTTP2
@testable import SalvoSimulator

/// The HTTP/2 client against the simulator's HTTP/2 endpoint: two independent stacks, one ledger.
@Suite(.tags(.network), .runs(.network), .serialized, .timeLimit(.minutes(1)))
struct SimulatorEndpointTests {
    static let keyID = "ABC123DEFG"
    static let teamID = "DEF123GHIJ"

    struct Setup {
        let simulator: Simulator
        let certificates: CertificateFactory
        let signer: JWTSigner

        var trustRoots: NIOSSLTrustRoots {
            .certificates([try! NIOSSLCertificate(bytes: Array(self.certificates.ca.certificatePEM.utf8), format: .pem)]
            )
        }

        func job(
            engine: HTTP2Engine = HTTP2ClientConfiguration.defaultEngine,
            authentication: APNSAuthentication,
            connections: Int = 2
        ) -> HTTP2JobConfiguration {
            var configuration = jobConfigurationForTests(
                engine: engine,
                port: self.simulator.http2Port!,
                authentication: authentication,
                connections: connections,
                trustRoots: self.trustRoots
            )
            configuration.client.serverName = "localhost"
            return configuration
        }

        func token() throws -> APNSAuthentication { .token(try ProviderToken(signer: self.signer)) }

        func certificate(topic: String) throws -> APNSAuthentication {
            let identity = try self.certificates.client(topic: topic)
            return .certificate(
                chain: [try NIOSSLCertificate(bytes: Array(identity.certificatePEM.utf8), format: .pem)],
                key: try NIOSSLPrivateKey(bytes: Array(identity.privateKeyPEM.utf8), format: .pem)
            )
        }
    }

    static func start(
        faults: HTTP2EndpointConfiguration.Faults = .init(),
        plan: FaultPlan = FaultPlan()
    ) async throws -> Setup {
        let certificates = try CertificateFactory()
        let key = P256.Signing.PrivateKey()
        let signer = try JWTSigner(privateKey: key, keyID: keyID, teamID: teamID)
        var configuration = SimulatorConfiguration(tls: .init(certificates))
        configuration.plan = plan
        configuration.maximumTokens = 100_000
        var http2 = HTTP2EndpointConfiguration(
            providerKeys: [
                .init(
                    keyID: keyID,
                    teamID: teamID,
                    publicKey: Array(key.publicKey.rawRepresentation),
                    topics: [testTopic]
                )
            ]
        )
        http2.faults = faults
        http2.cleartextPort = 0
        configuration.http2 = http2
        let simulator = try await Simulator.start(configuration)
        return Setup(simulator: simulator, certificates: certificates, signer: signer)
    }

    @Test(arguments: HTTP2Engine.allCases) func tokenAndCertificateJobsAreDeliveredExactlyOnce(
        engine: HTTP2Engine
    ) async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let setup = try await Self.start()
        let file = try TokenFile(count: 200, seed: 21, in: folder)
        let byToken = try await HTTP2Job.run(
            configuration: setup.job(engine: engine, authentication: try setup.token()),
            source: file.source,
            summary: file.summary
        )
        #expect(byToken.report.confirmed == 200)
        #expect(byToken.stopped == nil)
        let verdict = setup.simulator.verdict(expected: ExpectedTokens(file.tokens))
        #expect(verdict.passed, "\(verdict.summary)")

        let second = try TokenFile(count: 100, seed: 22, in: folder)
        let byCertificate = try await HTTP2Job.run(
            configuration: setup.job(engine: engine, authentication: try setup.certificate(topic: testTopic)),
            source: second.source,
            summary: second.summary
        )
        #expect(byCertificate.report.confirmed == 100)
        let both = setup.simulator.verdict(expected: ExpectedTokens(file.tokens + second.tokens))
        #expect(both.passed, "\(both.summary)")
        try await setup.simulator.shutdown()
    }

    @Test(arguments: HTTP2Engine.allCases) func theRealClientIsServedInCleartextAndOverTLSWithoutALPN(
        engine: HTTP2Engine
    ) async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let setup = try await Self.start()
        let cleartextFile = try TokenFile(count: 150, seed: 26, in: folder)
        var cleartext = setup.job(engine: engine, authentication: try setup.token())
        cleartext.client.port = setup.simulator.http2CleartextPort!
        cleartext.client.cleartext = true
        let overCleartext = try await HTTP2Job.run(
            configuration: cleartext,
            source: cleartextFile.source,
            summary: cleartextFile.summary
        )
        #expect(overCleartext.stopped == nil && overCleartext.report.confirmed == 150)

        let plainTLSFile = try TokenFile(count: 150, seed: 27, in: folder)
        var withoutALPN = setup.job(engine: engine, authentication: try setup.certificate(topic: testTopic))
        withoutALPN.client.offersALPN = false
        let overTLS = try await HTTP2Job.run(
            configuration: withoutALPN,
            source: plainTLSFile.source,
            summary: plainTLSFile.summary
        )
        #expect(overTLS.stopped == nil && overTLS.report.confirmed == 150)
        let verdict = setup.simulator.verdict(expected: ExpectedTokens(cleartextFile.tokens + plainTLSFile.tokens))
        #expect(verdict.passed, "\(verdict.summary)")
        #expect(verdict.deliveredOnce == 300)
        try await setup.simulator.shutdown()
    }

    @Test(arguments: HTTP2Engine.allCases) func faultsAreRetriedAndUninstalledTokensReported(
        engine: HTTP2Engine
    ) async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try TokenFile(count: 300, seed: 23, in: folder)
        var plan = FaultPlan()
        plan.seed = 7
        let gone = Array(file.tokens.prefix(3))
        plan.uninstalled = [.init(topic: testTopic, tokens: gone.map(\.hexString), timestamp: 1_600_000_000)]
        var faults = HTTP2EndpointConfiguration.Faults()
        faults.serviceUnavailableRate = 0.05
        faults.internalServerErrorRate = 0.02
        faults.tooManyRequestsRate = 0.02
        faults.goAwayAfterStreams = 70
        faults.shrinkAfterStreams = 20
        faults.shrinkTo = 4
        let setup = try await Self.start(faults: faults, plan: plan)
        var configuration = setup.job(engine: engine, authentication: try setup.token())
        configuration.retry.maximumAttempts = 20
        let result = try await HTTP2Job.run(configuration: configuration, source: file.source, summary: file.summary)
        try await setup.simulator.shutdown()

        #expect(result.report.confirmed == 297)
        #expect(result.report.rejected == ["Unregistered": 3])
        #expect(Set(result.unregistered.map(\.token)) == Set(gone.map(\.hexString)))
        #expect(result.unregistered.allSatisfy { $0.timestamp == 1_600_000_000_000 })
        #expect(result.report.resent > 0)
        #expect(result.report.reconnects > 0)
        let verdict = setup.simulator.verdict(expected: ExpectedTokens(Array(file.tokens.dropFirst(3))))
        #expect(verdict.passed, "\(verdict.summary)")
    }

    @Test(arguments: HTTP2Engine.allCases) func tooManyRequestsShrinkTheFlightAndEveryRowIsStillDeliveredOnce(
        engine: HTTP2Engine
    ) async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try TokenFile(count: 3000, seed: 29, in: folder)
        var plan = FaultPlan()
        plan.seed = 11
        var faults = HTTP2EndpointConfiguration.Faults()
        faults.tooManyRequestsRate = 0.02
        let setup = try await Self.start(faults: faults, plan: plan)
        var configuration = setup.job(engine: engine, authentication: try setup.token(), connections: 1)
        configuration.retry.maximumAttempts = 20
        let result = try await HTTP2Job.run(configuration: configuration, source: file.source, summary: file.summary)
        try await setup.simulator.shutdown()

        #expect(result.stopped == nil)
        #expect(result.report.confirmed == 3000)
        #expect(result.report.resent > 0)
        // The endpoint announces 1,000 streams; the 429s halved the flight below that.
        #expect(result.flightCuts > 0)
        #expect(
            (result.smallestFlightWindow ?? 1000) < 500,
            "smallest window \(String(describing: result.smallestFlightWindow))"
        )
        let verdict = setup.simulator.verdict(expected: ExpectedTokens(file.tokens))
        #expect(verdict.passed, "\(verdict.summary)")
        #expect(verdict.deliveredOnce == 3000)
    }

    @Test(arguments: HTTP2Engine.allCases) func tokensOfAnotherAppAreRejectedOnceAndTheVerdictPasses(
        engine: HTTP2Engine
    ) async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try TokenFile(count: 300, seed: 25, in: folder)
        var plan = FaultPlan()
        plan.seed = 11
        plan.foreignTokens = file.tokens[10..<14].map(\.hexString)
        plan.foreignTokenFraction = 0.02
        let compiled = try CompiledFaultPlan(plan)
        let foreign = Set(
            file.tokens.filter { token in token.withUnsafeBytes { compiled.isForeignToTopic($0.baseAddress!) } }
                .map(\.hexString)
        )
        #expect(foreign.count > 4, "the seeded fraction adds tokens to the listed ones")
        var faults = HTTP2EndpointConfiguration.Faults()
        // Retried answers must not turn a refusal into a delivery, nor a delivery into two.
        faults.serviceUnavailableRate = 0.05
        let setup = try await Self.start(faults: faults, plan: plan)
        var configuration = setup.job(engine: engine, authentication: try setup.token())
        configuration.retry.maximumAttempts = 20
        let result = try await HTTP2Job.run(configuration: configuration, source: file.source, summary: file.summary)
        try await setup.simulator.shutdown()

        #expect(result.stopped == nil && result.notSent == 0)
        #expect(result.report.rejected == ["DeviceTokenNotForTopic": foreign.count])
        #expect(Set(result.rejectedRows.map(\.token)) == foreign)
        #expect(result.rejectedRows.count == foreign.count)
        #expect(result.rejectedRows.allSatisfy { $0.status == 400 && $0.reason == "DeviceTokenNotForTopic" })
        #expect(result.report.confirmed == 300 - foreign.count)
        #expect(result.report.resent > 0)
        let verdict = setup.simulator.verdict(expected: ExpectedTokens(file.tokens))
        #expect(verdict.passed, "\(verdict.summary)")
        #expect(verdict.deliveredOnce == 300 - foreign.count)
        #expect(verdict.invalidNeverDelivered == foreign.count)
    }

    @Test(arguments: HTTP2Engine.allCases) func wrongCredentialsStopTheJob(engine: HTTP2Engine) async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try TokenFile(count: 50, seed: 24, in: folder)
        let setup = try await Self.start()
        // A certificate for another app may not push to this topic.
        let other = try await HTTP2Job.run(
            configuration: setup.job(engine: engine, authentication: try setup.certificate(topic: "com.example.other")),
            source: file.source,
            summary: file.summary
        )
        #expect(other.stopped?.reason == "TopicDisallowed")
        #expect(other.report.confirmed == 0)
        // A key the service does not know.
        let stranger = try JWTSigner(privateKey: P256.Signing.PrivateKey(), keyID: Self.keyID, teamID: Self.teamID)
        let source = TokenSource(files: file.source.files)
        let refused = try await HTTP2Job.run(
            configuration: setup.job(engine: engine, authentication: .token(try ProviderToken(signer: stranger))),
            source: source,
            summary: try source.validate()
        )
        #expect(refused.stopped?.reason == "InvalidProviderToken")
        #expect(refused.notSent >= 48)
        try await setup.simulator.shutdown()
    }

    @Test func requestsAreCheckedInApplesOrder() throws {
        let token = String(repeating: "ab", count: 32)
        let accepted = ProviderTokenVerifier.Accepted(keyID: "K", issuedAt: 0, topics: [testTopic])
        let payload = Array(#"{"aps":{}}"#.utf8)
        func check(
            method: String = "POST",
            path: String = "/3/device/" + String(repeating: "ab", count: 32),
            fields: [(name: String, value: String)] = [("apns-topic", testTopic)],
            credentials: HTTP2RequestCheck.Credentials = .token(.success(accepted)),
            payload: [UInt8] = payload
        ) -> APNSReason? {
            switch HTTP2RequestCheck.check(
                method: method,
                path: path,
                fields: fields,
                credentials: credentials,
                payloadBytes: payload.count
            ) {
            case .success: nil
            case .failure(let reason): reason
            }
        }
        #expect(check() == nil)
        #expect(check(method: "GET", path: "/nowhere") == .methodNotAllowed)
        #expect(check(path: "/3/devices/" + token) == .badPath)
        #expect(check(path: "/3/device/") == .missingDeviceToken)
        #expect(check(path: "/3/device/abc") == .badDeviceToken)
        #expect(check(fields: [("apns-topic", testTopic), ("apns-priority", "7")]) == .badPriority)
        #expect(check(fields: [("apns-topic", testTopic), ("apns-topic", testTopic)]) == .duplicateHeaders)
        #expect(
            check(fields: [("apns-topic", testTopic), ("apns-collapse-id", String(repeating: "c", count: 65))])
                == .badCollapseId
        )
        #expect(check(fields: []) == .missingTopic)
        #expect(check(fields: [("apns-topic", "com.example.other")]) == .topicDisallowed)
        #expect(check(credentials: .none) == .missingProviderToken)
        #expect(check(credentials: .token(.failure(.expiredProviderToken))) == .expiredProviderToken)
        #expect(check(fields: [], credentials: .certificate(.valid(testTopic))) == nil)
        #expect(
            check(fields: [("apns-topic", "com.example.other")], credentials: .certificate(.valid(testTopic)))
                == .topicDisallowed
        )
        #expect(
            check(fields: [("apns-topic", testTopic), ("apns-push-type", "background"), ("apns-priority", "10")])
                == .badPriority
        )
        #expect(check(payload: []) == .payloadEmpty)
        #expect(check(payload: Array(repeating: 0x20, count: 4097)) == .payloadTooLarge)
        #expect(
            check(
                fields: [("apns-topic", testTopic + ".voip"), ("apns-push-type", "voip")],
                credentials: .certificate(.valid(testTopic)),
                payload: Array(repeating: 0x20, count: 5120)
            ) == nil
        )
    }

    @Test func pushTypesAreCheckedAgainstTopicAndPriorityInApplesOrder() throws {
        let accepted = ProviderTokenVerifier.Accepted(keyID: "K", issuedAt: 0, topics: [testTopic])
        let anyTopic = ProviderTokenVerifier.Accepted(keyID: "K", issuedAt: 0, topics: [])
        func check(
            _ pushType: String?,
            topic: String? = testTopic,
            priority: String? = nil,
            collapseID: String? = nil,
            credentials: HTTP2RequestCheck.Credentials = .token(.success(accepted)),
            payload: [UInt8] = Array(#"{"aps":{}}"#.utf8)
        ) -> APNSReason? {
            var fields: [(name: String, value: String)] = []
            if let pushType { fields.append(("apns-push-type", pushType)) }
            if let topic { fields.append(("apns-topic", topic)) }
            if let priority { fields.append(("apns-priority", priority)) }
            if let collapseID { fields.append(("apns-collapse-id", collapseID)) }
            switch HTTP2RequestCheck.check(
                method: "POST",
                path: "/3/device/" + String(repeating: "ab", count: 32),
                fields: fields,
                credentials: credentials,
                payloadBytes: payload.count
            ) {
            case .success: return nil
            case .failure(let reason): return reason
            }
        }
        // A team's key covers every push-type topic of its apps.
        for (type, suffix) in APNSPushType.topicSuffixes {
            let priority = type.allowedPriorities.first.map { String($0.rawValue) }
            #expect(check(type.rawValue, topic: testTopic + suffix, priority: priority) == nil, "\(type)")
            #expect(check(type.rawValue, topic: testTopic, priority: priority) == .deviceTokenNotForTopic, "\(type)")
        }
        #expect(check(nil, topic: testTopic + ".voip") == nil)
        #expect(check("alert", topic: testTopic + ".voip") == .invalidPushType)
        #expect(check("voip", topic: testTopic + ".voip-ptt") == .invalidPushType)
        #expect(check("mdm", topic: testTopic) == nil)
        // A key that may push to any topic: only the suffix is known.
        #expect(check("voip", topic: "org.other.voip", credentials: .token(.success(anyTopic))) == nil)
        #expect(check("voip", topic: "org.other", credentials: .token(.success(anyTopic))) == .deviceTokenNotForTopic)
        // Priorities, after the topic; an omitted priority is 10.
        #expect(check("background", priority: "5") == nil)
        #expect(check("background", priority: "1") == nil)
        #expect(check("background") == .badPriority)
        #expect(check("location", topic: testTopic + ".location-query", priority: "1") == .badPriority)
        #expect(check("liveactivity", topic: testTopic + ".push-type.liveactivity", priority: "1") == .badPriority)
        #expect(check("pushtotalk", topic: testTopic + ".voip-ptt", priority: "5") == .badPriority)
        #expect(check("pushtotalk", topic: testTopic + ".voip-ptt") == nil)
        #expect(check("pushtotalk", topic: testTopic, priority: "5") == .deviceTokenNotForTopic)
        // Certificates: the certificate's topic when the request names none.
        let certificate = HTTP2RequestCheck.Credentials.certificate(.valid(testTopic))
        #expect(check("voip", topic: nil, credentials: certificate) == .deviceTokenNotForTopic)
        #expect(check("complication", topic: testTopic + ".complication", credentials: certificate) == nil)
        #expect(
            check("background", topic: testTopic + ".voip", priority: "5", credentials: certificate) == .invalidPushType
        )
        // Order: headers, then credentials and topic, then push type against topic and priority, then payload.
        #expect(check("voip", collapseID: String(repeating: "c", count: 65)) == .badCollapseId)
        #expect(check("voip", credentials: .none) == .missingProviderToken)
        #expect(check("voip", topic: "com.example.other") == .topicDisallowed)
        #expect(check("voip", topic: "com.example.other.voip") == .topicDisallowed)
        #expect(check("voip", payload: []) == .deviceTokenNotForTopic)
        #expect(check("background", payload: []) == .badPriority)
        #expect(check("background", priority: "5", payload: []) == .payloadEmpty)
    }

    @Test func providerTokensAreVerifiedAsTheServiceDoes() throws {
        let key = P256.Signing.PrivateKey()
        let signer = try JWTSigner(privateKey: key, keyID: Self.keyID, teamID: Self.teamID)
        let clock = SalvoSimulator.ManualClock(now: 1_700_000_000)
        let verifier = ProviderTokenVerifier(
            keys: [.init(keyID: Self.keyID, teamID: Self.teamID, publicKey: Array(key.publicKey.rawRepresentation))],
            clock: clock
        )
        let first = signer.token(issuedAt: 1_700_000_000)
        #expect(try verifier.check(Substring(first)).get().issuedAt == 1_700_000_000)
        // A new token ten minutes later is too soon; the old one still works.
        clock.advance(by: 600)
        #expect(
            verifier.check(Substring(signer.token(issuedAt: 1_700_000_600))) == .failure(.tooManyProviderTokenUpdates)
        )
        #expect((try? verifier.check(Substring(first)).get()) != nil)
        // Issued in the future: refused.
        #expect(verifier.check(Substring(signer.token(issuedAt: 1_700_001_000))) == .failure(.invalidProviderToken))
        clock.advance(by: 3001)
        #expect(verifier.check(Substring(first)) == .failure(.expiredProviderToken))
        #expect((try? verifier.check(Substring(signer.token(issuedAt: 1_700_003_601))).get()) != nil)
        let wrongTeam = try JWTSigner(privateKey: key, keyID: Self.keyID, teamID: "OTHERTEAM1")
        #expect(verifier.check(Substring(wrongTeam.token(issuedAt: 1_700_003_601))) == .failure(.invalidProviderToken))
        let stringIAT =
            JWTSigner.base64URL(Array(#"{"alg":"ES256","kid":"ABC123DEFG"}"#.utf8)) + "."
            + JWTSigner.base64URL(Array(#"{"iss":"DEF123GHIJ","iat":"1700003601"}"#.utf8))
        let signature = try key.signature(for: Array(stringIAT.utf8))
        let forged = stringIAT + "." + JWTSigner.base64URL(Array(signature.rawRepresentation))
        #expect(verifier.check(Substring(forged)) == .failure(.invalidProviderToken))
    }
}
