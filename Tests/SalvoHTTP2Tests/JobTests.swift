import APNSWire
import Crypto
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOSSL
import SalvoBenchmarkSupport
import SalvoRows
import SalvoTestSupport
import SalvoTestTraits
import Testing

@testable import SalvoHTTP2

// Serialized: debug builds of the HTTP/2 stack are CPU-bound, and parallel jobs would trip request deadlines.
@Suite(.tags(.network), .runs(.network), .serialized, .timeLimit(.minutes(1))) struct JobTests {
    /// The counts of the loopback server a job ran against, taken when the job ended.
    struct Served {
        var connectionCount: Int
        var requestCount: Int
        var pingCount: Int
    }

    /// Runs a job of `file`'s rows over `engine` (`connections` of them, with `authentication`) against a loopback
    /// server that answers with `responder` (asking for the client's certificate unless `mutualTLS` is false);
    /// `configure` changes the job's configuration first. The server is stopped once the job ends; its counts then
    /// come with the result.
    static func run(
        _ file: TokenFile,
        engine: HTTP2Engine = HTTP2ClientConfiguration.defaultEngine,
        authentication: APNSAuthentication = clientCertificate,
        connections: Int = 1,
        mutualTLS: Bool = true,
        options: HTTP2LoopbackServer.Options = HTTP2LoopbackServer.Options(),
        configure: (inout HTTP2JobConfiguration) -> Void = { _ in },
        responder: @escaping HTTP2LoopbackServer.Responder
    ) async throws -> (result: HTTP2JobResult, server: Served) {
        let server = try await startServer(mutualTLS: mutualTLS, options: options, responder: responder)
        var configuration = jobConfigurationForTests(
            engine: engine,
            port: server.port,
            authentication: authentication,
            connections: connections
        )
        configure(&configuration)
        let source = TokenSource(files: file.source.files)
        let result: HTTP2JobResult
        do {
            result = try await HTTP2Job.run(
                configuration: configuration,
                source: source,
                summary: try source.validate()
            )
        } catch {
            await server.stop()
            throw error
        }
        let served = Served(
            connectionCount: server.connectionCount,
            requestCount: server.requestCount,
            pingCount: server.pingCount
        )
        await server.stop()
        return (result, served)
    }

    @Test(arguments: HTTP2Engine.allCases) func certificateAuthenticationDeliversEveryRowOnceWithTheDocumentedRequest(
        engine: HTTP2Engine
    ) async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try TokenFile(count: 300, in: folder)
        let ledger = ServerLedger()
        let seen = NIOLockedValueBox<[String: String]>([:])
        let (result, server) = try await Self.run(file, engine: engine, connections: 3) { request in
            _ = ledger.request(request)
            if request.ordinal == 0 {
                seen.withLockedValue { headers in
                    for (name, value, _) in request.headers { headers[name] = value }
                    headers["body"] = String(buffer: request.body)
                }
            }
            ledger.delivered(request)
            return .ok(apnsID: request.header("apns-id") ?? newAPNSID())
        }

        #expect(result.stopped == nil)
        #expect(result.report.confirmed == 300)
        #expect(result.report.isComplete)
        #expect(result.notSent == 0)
        #expect(result.deliveries.count == 300)
        #expect(Set(result.deliveries.compactMap(\.apnsID)).count == 300)
        let snapshot = ledger.snapshot
        #expect(snapshot.delivered.count == 300)
        #expect(snapshot.delivered.values.allSatisfy { $0 == 1 })
        #expect(Set(snapshot.delivered.keys) == Set(file.tokens.map(\.hexString)))
        #expect(server.connectionCount == 3)
        let headers = seen.withLockedValue { $0 }
        #expect(headers[":method"] == "POST")
        #expect(headers[":path"]?.hasPrefix("/3/device/") == true)
        #expect(headers["apns-topic"] == testTopic)
        #expect(headers["apns-push-type"] == "alert")
        #expect(headers["apns-priority"] == "10")
        #expect(headers["authorization"] == nil)
        #expect(headers["body"] == testPayload.text)
    }

    @Test(arguments: HTTP2Engine.allCases) func tokenAuthenticationSignsOnceForEveryConnectionAndStartsWithOneStream(
        engine: HTTP2Engine
    ) async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try TokenFile(count: 200, seed: 2, in: folder)
        let key = P256.Signing.PrivateKey()
        let signer = try JWTSigner(privateKey: key, keyID: "ABC123DEFG", teamID: "DEF123GHIJ")
        let token = try ProviderToken(signer: signer)
        // Crypto's key types are not Sendable here: the responder rebuilds the key from its bytes.
        let publicKeyBytes = signer.publicKey.rawRepresentation
        let ledger = ServerLedger()
        // Per connection: when the first answer goes out; no second request may arrive before it.
        let firstAnswer = NIOLockedValueBox<[Int: ContinuousClock.Instant]>([:])
        let violations = NIOLockedValueBox<[String]>([])
        let authorizations = NIOLockedValueBox(Set<String>())
        let (result, _) = try await Self.run(
            file,
            engine: engine,
            authentication: .token(token),
            connections: 3,
            mutualTLS: false
        ) { request in
            _ = ledger.request(request)
            guard let authorization = request.header("authorization"), authorization.hasPrefix("bearer "),
                let parts = verifyJWT(
                    String(authorization.dropFirst(7)),
                    publicKey: try! P256.Signing.PublicKey(rawRepresentation: publicKeyBytes)
                ),
                parts.header == #"{"alg":"ES256","kid":"ABC123DEFG"}"#, parts.claims.contains(#""iss":"DEF123GHIJ""#)
            else {
                return .respond(status: 403, headers: [], body: errorBody(.invalidProviderToken))
            }
            authorizations.withLockedValue { _ = $0.insert(authorization) }
            if request.ordinal == 0 {
                firstAnswer.withLockedValue { $0[request.connection] = .now + .milliseconds(30) }
                ledger.delivered(request)
                return .delayed(.milliseconds(30), .ok(apnsID: newAPNSID()))
            }
            if request.ordinal == 1 {
                let answered = firstAnswer.withLockedValue { $0[request.connection] }
                if let answered, ContinuousClock.now < answered - .milliseconds(2) {
                    violations.withLockedValue { $0.append("connection \(request.connection)") }
                }
            }
            ledger.delivered(request)
            return .ok(apnsID: newAPNSID())
        }

        #expect(result.stopped == nil)
        #expect(result.report.confirmed == 200)
        #expect(ledger.snapshot.delivered.values.allSatisfy { $0 == 1 })
        #expect(token.mintCount == 1)
        #expect(authorizations.withLockedValue { $0.count } == 1)
        #expect(violations.withLockedValue { $0 } == [])
    }

    @Test(arguments: HTTP2Engine.allCases) func everyResponseClassIsMapped(engine: HTTP2Engine) async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try TokenFile(count: 12, seed: 3, in: folder)
        let tokens = file.tokens.map(\.hexString)
        let ledger = ServerLedger()
        let (result, _) = try await Self.run(file, engine: engine) { request in
            let attempt = ledger.request(request)
            let index = tokens.firstIndex(of: String(request.path.dropFirst(10)))!
            let action: HTTP2LoopbackServer.Action
            switch (index, attempt) {
            case (1, _): action = .respond(status: 400, headers: [], body: errorBody(.badDeviceToken))
            case (2, _): action = .respond(status: 404, headers: [], body: errorBody(.badPath))
            case (3, _): action = .respond(status: 405, headers: [], body: errorBody(.methodNotAllowed))
            case (4, _): action = .respond(status: 413, headers: [], body: errorBody(.payloadTooLarge))
            case (5, _):
                action = .respond(
                    status: 410,
                    headers: [],
                    body: errorBody(.unregistered, timestamp: 1_600_000_000_000)
                )
            case (6, 1): action = .respond(status: 429, headers: [], body: errorBody(.tooManyRequests))
            case (7, 1): action = .respond(status: 500, headers: [], body: errorBody(.internalServerError))
            case (8, 1), (8, 2): action = .respond(status: 503, headers: [], body: errorBody(.serviceUnavailable))
            case (9, 1): action = .reset(.refusedStream)
            case (10, _): action = .respond(status: 400, headers: [], body: errorBody(.badTopic))
            default: action = .ok(apnsID: newAPNSID())
            }
            if case .respond(200, _, _) = action { ledger.delivered(request) }
            return action
        }

        let report = result.report
        #expect(result.stopped == nil)
        #expect(report.confirmed == 6)  // rows 0, 6, 7, 8, 9, 11
        #expect(
            report.rejected == [
                "BadDeviceToken": 1, "BadPath": 1, "MethodNotAllowed": 1, "PayloadTooLarge": 1, "Unregistered": 1,
                "BadTopic": 1,
            ]
        )
        #expect(report.resent == 5)  // 429, 500, two 503s, the refused stream
        #expect(report.confirmed + report.rejectedTotal == 12)
        #expect(!report.isComplete)
        #expect(
            result.unregistered.filter { $0.reason == "Unregistered" } == [
                UnregisteredToken(file: file.source.files[0], line: 7, token: tokens[5], timestamp: 1_600_000_000_000)
            ]
        )
        #expect(result.rejectedRows.allSatisfy { $0.file == file.source.files[0] }, "a refused row names its file")
        let rejected = Dictionary(uniqueKeysWithValues: result.rejectedRows.map { ($0.line, $0) })
        #expect(rejected[3]?.status == 400 && rejected[3]?.reason == "BadDeviceToken")
        #expect(rejected[6]?.status == 413)
        #expect(rejected[3]?.token == tokens[1])
        #expect(ledger.snapshot.requests[tokens[8]] == 3)
        #expect(ledger.snapshot.delivered.values.allSatisfy { $0 == 1 })
    }

    @Test(arguments: HTTP2Engine.allCases) func retriesStopAtTheCapAndHonourRetryAfter(engine: HTTP2Engine) async throws
    {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try TokenFile(count: 3, seed: 4, in: folder)
        let tokens = file.tokens.map(\.hexString)
        let ledger = ServerLedger()
        let (result, _) = try await Self.run(
            file,
            engine: engine,
            configure: { configuration in
                configuration.retry.maximumAttempts = 3
            },
            responder: { request in
                let attempt = ledger.request(request)
                let token = String(request.path.dropFirst(10))
                if token == tokens[0] {
                    return .respond(status: 503, headers: [], body: errorBody(.serviceUnavailable))
                }
                if token == tokens[1] && attempt == 1 {
                    return .respond(status: 429, headers: [("retry-after", "1")], body: errorBody(.tooManyRequests))
                }
                ledger.delivered(request)
                return .ok(apnsID: nil)
            }
        )

        let snapshot = ledger.snapshot
        #expect(snapshot.requests[tokens[0]] == 3)
        // Its attempts used up by 503s, the row is listed as not sent (the service never took it), not rejected.
        #expect(result.report.rejected.isEmpty)
        #expect(result.unsettledRows.map(\.token) == [tokens[0]])
        #expect(result.unsettledRows.map(\.outcome) == [.unsent])
        #expect(result.notSent == 1)
        #expect(result.report.confirmed == 2)
        let times = try #require(snapshot.times[tokens[1]])
        try #require(times.count == 2)
        #expect(times[1] - times[0] >= .milliseconds(950))
    }

    @Test(arguments: HTTP2Engine.allCases) func goAwayMidJobLosesNothingAndDuplicatesNothing(
        engine: HTTP2Engine
    ) async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try TokenFile(count: 400, seed: 5, in: folder)
        let ledger = ServerLedger()
        var options = HTTP2LoopbackServer.Options()
        options.goAwayAfterRequests = 37
        let (result, server) = try await Self.run(
            file,
            engine: engine,
            connections: 2,
            options: options,
            configure: { configuration in
                // Few streams per connection, so each connection lives through several GOAWAYs' worth of rows.
                configuration.client.maximumStreamsPerConnection = 16
            },
            responder: { request in
                _ = ledger.request(request)
                ledger.delivered(request)
                return .ok(apnsID: newAPNSID())
            }
        )

        let snapshot = ledger.snapshot
        #expect(result.report.confirmed == 400)
        #expect(result.report.uncertainEvents == 0)
        // Streams above a GOAWAY's last stream id were sent again, not reported.
        #expect(result.report.resent > 0)
        #expect(snapshot.delivered.count == 400)
        #expect(snapshot.delivered.values.allSatisfy { $0 == 1 })
        // Each connection answers at most 37 + 16 requests before its GOAWAY takes effect.
        #expect(server.connectionCount >= 400 / (37 + 16))
        #expect(result.report.reconnects >= 400 / (37 + 16) - 2)
    }

    @Test(arguments: HTTP2Engine.allCases) func connectionsThatRunOutOfStreamIDsAreReplacedWithoutLosingOrRepeatingARow(
        engine: HTTP2Engine
    ) async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try TokenFile(count: 300, seed: 18, in: folder)
        let ledger = ServerLedger()
        // Per connection: the stream ids it carried.
        let streamIDs = NIOLockedValueBox<[Int: [Int]]>([:])
        let (result, _) = try await Self.run(
            file,
            engine: engine,
            connections: 2,
            configure: { configuration in
                // 40 stream ids per connection: 2^31 − 79, 2^31 − 77, …, 2^31 − 1.
                configuration.client.firstStreamID = Int32.max - 2 * 39
                configuration.client.maximumStreamsPerConnection = 16
            },
            responder: { request in
                _ = ledger.request(request)
                streamIDs.withLockedValue { $0[request.connection, default: []].append(Int(request.streamID)) }
                ledger.delivered(request)
                return .ok(apnsID: newAPNSID())
            }
        )

        #expect(result.stopped == nil)
        #expect(result.report.confirmed == 300)
        #expect(result.report.uncertainEvents == 0)
        #expect(result.report.resent == 0)
        let snapshot = ledger.snapshot
        #expect(snapshot.requests.count == 300)
        #expect(snapshot.requests.values.allSatisfy { $0 == 1 })
        #expect(snapshot.delivered.values.allSatisfy { $0 == 1 })
        #expect(Set(snapshot.delivered.keys) == Set(file.tokens.map(\.hexString)))
        let perConnection = streamIDs.withLockedValue { $0 }
        #expect(perConnection.count >= 300 / 40)
        for ids in perConnection.values {
            #expect(ids.count <= 40)
            #expect(ids.allSatisfy { $0 % 2 == 1 && $0 >= Int(Int32.max) - 2 * 39 && $0 <= Int(Int32.max) })
        }
        // Every id up to the last was used: a connection retires only when its ids run out.
        #expect(perConnection.values.filter { $0.contains(Int(Int32.max)) }.count >= 300 / 40 - 1)
        #expect(result.report.reconnects >= 300 / 40 - 2)
    }

    @Test(arguments: HTTP2Engine.allCases) func shrinkingConcurrentStreamsIsHonoured(engine: HTTP2Engine) async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try TokenFile(count: 400, seed: 6, in: folder)
        let ledger = ServerLedger()
        var options = HTTP2LoopbackServer.Options()
        options.maximumConcurrentStreams = 100
        options.shrinkStreams = (afterRequests: 50, to: 2)
        let (result, _) = try await Self.run(file, engine: engine, options: options) { request in
            _ = ledger.request(request)
            ledger.delivered(request)
            return .delayed(.milliseconds(1), .ok(apnsID: nil))
        }
        #expect(result.report.confirmed == 400)
        #expect(result.report.resent == 0)
        #expect(ledger.snapshot.delivered.values.allSatisfy { $0 == 1 })
    }

    @Test(arguments: HTTP2Engine.allCases, [OnUncertain.resend, .report])
    func unansweredRequestsHitTheirDeadline(engine: HTTP2Engine, policy: OnUncertain) async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try TokenFile(count: 20, seed: 7, in: folder)
        let silent = file.tokens[4].hexString
        let ledger = ServerLedger()
        // The job's clock passes the deadline only once every other row is answered, and (resending) stands still
        // again once the silent row went a second time: on loaded cores no answer that was merely slow can miss
        // its deadline. Reporting, nothing is in flight after the deadline, and the clock may go on.
        let clock = ManualJobClock()
        let running = NIOLockedValueBox<ManualJobClock.Run?>(nil)
        let mover = Task {
            _ = try await eventually("the other rows answered", timeout: .seconds(60), every: .milliseconds(10)) {
                ledger.snapshot.delivered.count >= 19
            }
            let run = clock.run(by: .milliseconds(50)) {
                policy == .report || (ledger.snapshot.requests[silent] ?? 0) < 2
            }
            running.withLockedValue { $0 = Task.isCancelled ? nil : run }
        }
        defer {
            mover.cancel()
            running.withLockedValue { $0?.stop() }
        }
        let (result, _) = try await Self.run(
            file,
            engine: engine,
            configure: { configuration in
                configuration.client.requestTimeout = .milliseconds(200)
                configuration.client.clock = clock
                configuration.onUncertain = policy
            },
            responder: { request in
                let attempt = ledger.request(request)
                if request.path.hasSuffix(silent) && attempt == 1 { return .ignore }
                ledger.delivered(request)
                return .ok(apnsID: nil)
            }
        )
        #expect(result.report.uncertainEvents == 1)
        if policy == .resend {
            #expect(result.report.confirmed == 20)
            #expect(result.report.uncertain == 0)
        } else {
            #expect(result.report.confirmed == 19)
            #expect(result.report.uncertain == 1)
        }
    }

    @Test(arguments: HTTP2Engine.allCases) func credentialErrorsStopTheJobWithAClearMessage(
        engine: HTTP2Engine
    ) async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try TokenFile(count: 600, seed: 8, in: folder)
        let (result, server) = try await Self.run(file, engine: engine) { _ in
            .respond(status: 403, headers: [], body: errorBody(.badCertificateEnvironment))
        }
        let requests = server.requestCount
        let stop = try #require(result.stopped)
        #expect(stop.reason == "BadCertificateEnvironment")
        #expect(stop.message.contains("environment"))
        #expect(result.report.confirmed == 0)
        #expect(result.notSent > 0)
        #expect(result.notSent + result.report.rejectedTotal + result.report.uncertain == 600)
        #expect(requests < 600)
        // Every row not answered is listed, once, to be sent again.
        #expect(result.unsettledRows.count == result.notSent + result.report.uncertain)
        #expect(result.unsettledRows.allSatisfy { $0.outcome == .unsent })
        let lines = Set(result.unsettledRows.map(\.line)).union(result.rejectedRows.map(\.line))
        #expect(lines == Set(2...601), "every row either refused or listed as unsettled")
    }

    @Test(arguments: HTTP2Engine.allCases) func expiredProviderTokenIsRenewedOnce(engine: HTTP2Engine) async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try TokenFile(count: 50, seed: 9, in: folder)
        let clock = ManualClock(1_700_000_000)
        let signer = try JWTSigner(privateKey: P256.Signing.PrivateKey(), keyID: "ABC123DEFG", teamID: "DEF123GHIJ")
        let token = try ProviderToken(signer: signer, clock: clock.function)
        let first = token.current()
        // The service's clock runs ahead: to it, the first token is over an hour old.
        clock.advance(by: 25 * 60)
        let (result, _) = try await Self.run(file, engine: engine, authentication: .token(token), mutualTLS: false) {
            request in
            if request.header("authorization") == first.authorization {
                return .respond(status: 403, headers: [], body: errorBody(.expiredProviderToken))
            }
            return .ok(apnsID: nil)
        }
        #expect(result.stopped == nil)
        #expect(result.report.confirmed == 50)
        #expect(token.mintCount == 2)
    }

    @Test func expiredProviderTokenWithDisagreeingClocksStopsTheJob() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try TokenFile(count: 50, seed: 10, in: folder)
        let signer = try JWTSigner(privateKey: P256.Signing.PrivateKey(), keyID: "ABC123DEFG", teamID: "DEF123GHIJ")
        let token = try ProviderToken(signer: signer, clock: ManualClock(1_700_000_000).function)
        let (result, _) = try await Self.run(file, authentication: .token(token), mutualTLS: false) { _ in
            .respond(status: 403, headers: [], body: errorBody(.expiredProviderToken))
        }
        let stop = try #require(result.stopped)
        #expect(stop.message.contains("clock"))
        #expect(token.mintCount == 1)
        // The refused row never reached a device: unsent and listed with the 49 others, never rejected.
        #expect(result.report.rejected.isEmpty)
        #expect(result.notSent == 50)
        #expect(Set(result.unsettledRows.map(\.token)) == Set(file.tokens.map(\.hexString)))
    }

    @Test func serverThatRefusesTheClientCertificateEndsTheJob() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try TokenFile(count: 10, seed: 11, in: folder)
        let foreign = try CertificateFactory.shared.foreignClient(topic: testTopic)
        let (result, server) = try await Self.run(
            file,
            authentication: .certificate(chain: [foreign.certificate], key: foreign.key)
        ) { _ in .ok(apnsID: nil) }
        let stop = try #require(result.stopped)
        #expect(stop.message.contains("TLS handshake failed"))
        #expect(result.report.reconnects == 0, "refused credentials are not retried")
        #expect(result.notSent == 10)
        #expect(result.unsettledRows.map(\.line).sorted() == Array(2...11))
        #expect(server.requestCount == 0)
    }

    @Test func certificatesLoadFromPEMFilesAndPKCS12() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let certificates = CertificateFactory.sharedFolder
        let file = try TokenFile(count: 5, seed: 12, in: folder)
        let server = try await startServer { _ in .ok(apnsID: nil) }
        let pem = try APNSAuthentication.certificate(pemFile: certificates.client, keyFile: certificates.clientKey)
        let result = try await HTTP2Job.run(
            configuration: jobConfigurationForTests(port: server.port, authentication: pem),
            source: file.source,
            summary: file.summary
        )
        #expect(result.report.confirmed == 5)

        let p12 = try APNSAuthentication.pkcs12(
            file: certificates.clientPKCS12,
            passphrase: CertificateFactory.pkcs12Passphrase
        )
        let source = TokenSource(files: file.source.files)
        let again = try await HTTP2Job.run(
            configuration: jobConfigurationForTests(port: server.port, authentication: p12),
            source: source,
            summary: try source.validate()
        )
        #expect(again.report.confirmed == 5)
        #expect(throws: HTTP2ClientError.self) {
            try APNSAuthentication.pkcs12(file: certificates.clientPKCS12, passphrase: "wrong")
        }
        await server.stop()
        #expect(throws: HTTP2ClientError.self) {
            try APNSAuthentication.certificate(pemFile: folder.file("missing.pem"), keyFile: certificates.clientKey)
        }
    }

    @Test(arguments: HTTP2Engine.allCases) func idleConnectionsAreCheckedWithPing(engine: HTTP2Engine) async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try TokenFile(count: 1, seed: 14, in: folder)
        let ledger = ServerLedger()
        let (result, server) = try await Self.run(
            file,
            engine: engine,
            configure: { configuration in
                configuration.client.pingInterval = .milliseconds(100)
                configuration.client.pingTimeout = .seconds(2)
            },
            responder: { request in
                // The only row waits a second for its retry: the connection is idle meanwhile.
                if ledger.request(request) == 1 {
                    return .respond(status: 503, headers: [("retry-after", "1")], body: errorBody(.serviceUnavailable))
                }
                return .ok(apnsID: nil)
            }
        )
        let pings = server.pingCount
        #expect(result.report.confirmed == 1)
        #expect(result.report.reconnects == 0)
        #expect(pings >= 2)
    }

    @Test(arguments: HTTP2Engine.allCases) func aSilentConnectionIsClosedByItsUnansweredPingAndItsRowsGoElsewhere(
        engine: HTTP2Engine
    ) async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try TokenFile(count: 300, seed: 17, in: folder)
        let credentials = CertificateFactory.shared
        // Every connection answers 50 requests, then nothing: no answers, no PING acknowledgements.
        let sink = try await HTTP2SinkServer(
            certificateChain: [credentials.server.certificate],
            privateKey: credentials.server.key,
            silentAfterRequests: 50
        )
        var configuration = jobConfigurationForTests(engine: engine, port: sink.port, authentication: clientCertificate)
        // At most 16 rows are caught on a connection that falls silent; its successor answers 50, so no row is
        // caught twice and the retry cap is never reached.
        configuration.client.maximumStreamsPerConnection = 16
        configuration.client.pingInterval = .milliseconds(100)
        // Long enough that a healthy connection on a loaded machine always answers in time.
        configuration.client.pingTimeout = .seconds(1)
        // Far beyond the test's run: the PING, not the request deadline, must find the silent connection.
        configuration.client.requestTimeout = .seconds(30)
        // A client that never gives up on a silent connection would wait for ever: stopping the server after a
        // while ends the job (its reconnects fail), and the checks below fail.
        let watchdog = Task {
            try await Task.sleep(for: .seconds(40))
            await sink.stop()
        }
        let result = try await HTTP2Job.run(configuration: configuration, source: file.source, summary: file.summary)
        watchdog.cancel()
        let answered = sink.answeredCount
        await sink.stop()

        #expect(result.stopped == nil)
        #expect(result.report.confirmed == 300)
        #expect(result.notSent == 0)
        // Each row answered by the server once and confirmed once: nothing lost, nothing duplicated.
        #expect(answered == 300)
        #expect(Set(result.deliveries.map(\.line)).count == 300)
        // The rows in flight on each silent connection went back to the queue and were sent again.
        #expect(result.report.uncertainEvents > 0)
        #expect(result.report.uncertain == 0)
        #expect(result.report.reconnects >= 300 / 50 - 1)
        #expect(result.connectionErrors.contains { $0.contains("no PING answer") })
    }

    @Test(arguments: HTTP2Engine.allCases) func theSharedTokenIsRefreshedMidJob(engine: HTTP2Engine) async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try TokenFile(count: 120, seed: 15, in: folder)
        let clock = ManualClock(1_700_000_000)
        let signer = try JWTSigner(privateKey: P256.Signing.PrivateKey(), keyID: "ABC123DEFG", teamID: "DEF123GHIJ")
        let token = try ProviderToken(signer: signer, clock: clock.function)
        let authorizations = NIOLockedValueBox([String: Int]())
        let (result, _) = try await Self.run(
            file,
            engine: engine,
            authentication: .token(token),
            connections: 2,
            mutualTLS: false,
            configure: { configuration in
                configuration.client.maximumStreamsPerConnection = 8
            },
            responder: { request in
                let total = authorizations.withLockedValue { seen -> Int in
                    seen[request.header("authorization") ?? "", default: 0] += 1
                    return seen.values.reduce(0, +)
                }
                // Forty-five minutes pass after the 40th request of the job.
                if total == 40 { clock.advance(by: 45 * 60) }
                return .ok(apnsID: nil)
            }
        )
        #expect(result.report.confirmed == 120)
        #expect(token.mintCount == 2)
        let seen = authorizations.withLockedValue { $0 }
        #expect(seen.count == 2)
        #expect(seen.values.reduce(0, +) == 120)
    }

    @Test(arguments: HTTP2Engine.allCases) func theBenchmarkSinkAnswersEveryRequestOnce(
        engine: HTTP2Engine
    ) async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try TokenFile(count: 500, seed: 16, in: folder)
        let credentials = CertificateFactory.shared
        let sink = try await HTTP2SinkServer(
            certificateChain: [credentials.server.certificate],
            privateKey: credentials.server.key
        )
        var configuration = jobConfigurationForTests(
            engine: engine,
            port: sink.port,
            authentication: clientCertificate,
            connections: 2
        )
        configuration.client.pingInterval = .milliseconds(20)
        let result = try await HTTP2Job.run(configuration: configuration, source: file.source, summary: file.summary)
        let answered = sink.answeredCount
        await sink.stop()
        #expect(result.report.confirmed == 500)
        #expect(answered == 500)
        #expect(result.report.reconnects == 0)
    }

    @Test func payloadOverTheLimitIsRefusedBeforeConnecting() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try TokenFile(count: 1, seed: 13, in: folder)
        var configuration = jobConfigurationForTests(port: 1, authentication: clientCertificate)
        configuration.payload = try Payload(json: #"{"aps":{"alert":""# + String(repeating: "x", count: 4100) + #""}}"#)
        await #expect(throws: HTTP2ClientError.self) {
            try await HTTP2Job.run(configuration: configuration, source: file.source, summary: file.summary)
        }
    }

    @Test func pushTypeTopicAndPriorityAreRefusedBeforeConnecting() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try TokenFile(count: 1, seed: 14, in: folder)
        var configuration = jobConfigurationForTests(port: 1, authentication: clientCertificate)
        let refused: [(APNSRequestHeaders, String)] = [
            (
                try APNSRequestHeaders(pushType: .voip, topic: testTopic),
                "apns-push-type voip needs an apns-topic ending in .voip (<bundle id>.voip), not \(testTopic)"
            ),
            (
                try APNSRequestHeaders(pushType: .liveActivity, priority: .immediate, topic: testTopic + ".voip"),
                "ending in .push-type.liveactivity"
            ),
            (
                try APNSRequestHeaders(pushType: .background, priority: .immediate, topic: testTopic),
                "apns-push-type background takes apns-priority 5 or 1, not 10: APNs would answer BadPriority"
            ),
            (try APNSRequestHeaders(pushType: .background, topic: testTopic), "not 10 (the default)"),
            // Without a topic (the certificate names it) the priority is still checked.
            (
                try APNSRequestHeaders(pushType: .pushToTalk, priority: .powerConsiderate),
                "apns-push-type pushtotalk takes apns-priority 10, not 5"
            ),
        ]
        for (headers, words) in refused {
            configuration.headers = headers
            let error = await #expect(throws: HTTP2ClientError.self) {
                try await HTTP2Job.run(configuration: configuration, source: file.source, summary: file.summary)
            }
            #expect(error?.code == .configuration)
            #expect(error?.message.contains(words) == true, "\(error?.message ?? "")")
        }
    }
}
