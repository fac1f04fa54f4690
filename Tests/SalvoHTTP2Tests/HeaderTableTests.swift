import APNSWire
import Crypto
import Foundation
import NIOConcurrencyHelpers
import SalvoRows
import SalvoTestSupport
import SalvoTestTraits
import Testing

@testable import SalvoHTTP2

/// HPACK against a server with a small header table (600 bytes, `SETTINGS_HEADER_TABLE_SIZE`) while the provider
/// token changes mid-job, over TLS with either engine: a new `authorization` entry evicts shared headers, and every
/// request the server decodes (NIOHPACK) must still carry the right headers.
@Suite(.tags(.network), .runs(.network), .serialized, .timeLimit(.minutes(1))) struct HeaderTableTests {
    /// What is wrong with a request's headers, nil when nothing is; `verified` holds the tokens whose signature
    /// has passed.
    static func problem(
        _ request: HTTP2LoopbackServer.Request,
        publicKeyBytes: Data,
        verified: NIOLockedValueBox<Set<String>>
    ) -> String? {
        let headers = request.headers
        var expected: [(String, String)] = [
            (":method", "POST"), (":scheme", "https"), (":authority", "localhost"), ("apns-topic", testTopic),
            ("apns-push-type", "alert"), ("apns-priority", "10"), ("content-length", String(testPayload.byteCount)),
        ]
        expected.append((":path", request.path))
        for (name, value) in expected where headers[name] != [value] {
            return "\(name): \(headers[name]) in \(headers)"
        }
        guard request.path.hasPrefix("/3/device/"), request.path.utf8.count == 10 + 64 else {
            return ":path \(request.path)"
        }
        guard headers.count == 9 else { return "\(headers.count) headers: \(headers)" }
        let authorization = headers["authorization"]
        guard authorization.count == 1, let bearer = authorization.first, bearer.hasPrefix("bearer ") else {
            return "authorization \(authorization)"
        }
        if verified.withLockedValue({ $0.contains(bearer) }) { return nil }
        // Crypto's key types are not Sendable here: the key is rebuilt from its bytes.
        guard let key = try? P256.Signing.PublicKey(rawRepresentation: publicKeyBytes),
            verifyJWT(String(bearer.dropFirst("bearer ".count)), publicKey: key) != nil
        else {
            return "a token that does not verify: \(bearer)"
        }
        verified.withLockedValue { _ = $0.insert(bearer) }
        return nil
    }

    @Test(arguments: HTTP2Engine.allCases) func aTokenRefreshedMidJobKeepsEveryRequestsHeadersInASmallTable(
        engine: HTTP2Engine
    ) async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let count = 2000
        let file = try TokenFile(count: count, seed: 81, in: folder)
        let clock = ManualClock(Int64(Date().timeIntervalSince1970))
        let signer = try JWTSigner(privateKey: P256.Signing.PrivateKey(), keyID: "ABC123DEFG", teamID: "DEF123GHIJ")
        let token = try ProviderToken(signer: signer, clock: clock.function)
        let publicKeyBytes = signer.publicKey.rawRepresentation
        let ledger = ServerLedger()
        let verified = NIOLockedValueBox<Set<String>>([])
        let problems = NIOLockedValueBox<[String]>([])
        let answered = NIOLockedValueBox(0)
        var options = HTTP2LoopbackServer.Options()
        options.headerTableSize = 600
        // NIOHTTP2 (the nio engine) in a debug build is slow with many streams open: 100 keep answers quick.
        options.maximumConcurrentStreams = 100
        let server = try await startServer(mutualTLS: false, options: options) { request in
            _ = ledger.request(request)
            if let problem = Self.problem(request, publicKeyBytes: publicKeyBytes, verified: verified) {
                problems.withLockedValue { if $0.count < 5 { $0.append(problem) } }
                return .respond(status: 400, headers: [], body: errorBody(.badDeviceToken))
            }
            ledger.delivered(request)
            // Every 300 answers the token reaches its refresh age (45 minutes): the next batches carry a new one.
            if answered.withLockedValue({ value in
                value += 1
                return value % 300 == 0
            }) {
                clock.advance(by: 46 * 60)
            }
            return .ok(apnsID: nil)
        }
        var configuration = jobConfigurationForTests(
            engine: engine,
            port: server.port,
            authentication: .token(token),
            connections: 2
        )
        // A debug build on loaded cores may answer slowly: no deadline may cut a request and send it again.
        configuration.client.requestTimeout = .seconds(30)
        let result = try await HTTP2Job.run(configuration: configuration, source: file.source, summary: file.summary)
        await server.stop()

        #expect(problems.withLockedValue { $0 }.isEmpty, "\(problems.withLockedValue { $0 })")
        #expect(result.stopped == nil)
        #expect(result.report.confirmed == count)
        #expect(token.mintCount >= 5, "the token changed mid-job, several times")
        #expect(verified.withLockedValue { $0.count } == token.mintCount)
        let snapshot = ledger.snapshot
        #expect(snapshot.delivered.count == count && snapshot.delivered.values.allSatisfy { $0 == 1 })
        // A block the server could not decode would have closed a connection, and its rows gone again elsewhere.
        #expect(server.connectionCount == 2, "\(result.connectionErrors)")
        #expect(result.report.resent == 0, "\(result.connectionErrors)")
    }
}
