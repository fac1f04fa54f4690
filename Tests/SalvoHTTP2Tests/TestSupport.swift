import APNSWire
import Crypto
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOSSL
import SalvoRows
import SalvoTestSupport

@testable import SalvoHTTP2

/// A temporary folder removed when the value's `remove()` runs.
struct TemporaryFolder {
    let path: String

    init() throws {
        self.path = TestScratch.path + "/salvo-h2-tests-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: self.path, withIntermediateDirectories: true)
    }

    func file(_ name: String) -> String { self.path + "/" + name }

    func remove() { try? FileManager.default.removeItem(atPath: self.path) }
}

/// `count` distinct tokens made from a seed, and a validated token source over a CSV of them.
struct TokenFile {
    let tokens: [DeviceToken]
    let source: TokenSource
    let summary: TokenSource.Summary

    init(count: Int, seed: UInt64 = 1, in folder: TemporaryFolder) throws {
        var state = seed &+ 0x9E37_79B9_7F4A_7C15
        func next() -> UInt64 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return state ^ (state >> 29)
        }
        var tokens: [DeviceToken] = []
        for _ in 0..<count {
            var bytes: [UInt8] = []
            for _ in 0..<4 { withUnsafeBytes(of: next().littleEndian) { bytes.append(contentsOf: $0) } }
            tokens.append(try DeviceToken(bytes: bytes))
        }
        let path = folder.file("tokens-\(seed).csv")
        try (["token"] + tokens.map(\.hexString)).joined(separator: "\n").appending("\n")
            .write(toFile: path, atomically: true, encoding: .utf8)
        self.tokens = tokens
        self.source = TokenSource(files: [path])
        self.summary = try self.source.validate()
    }
}

/// What a test server saw: requests per token and the tokens it answered 200 for.
final class ServerLedger: Sendable {
    private let state = NIOLockedValueBox(State())

    struct State {
        var requests: [String: Int] = [:]
        var delivered: [String: Int] = [:]
        var times: [String: [ContinuousClock.Instant]] = [:]
        var paths: [String] = []
    }

    /// Records a request for the token in `path` and returns how many requests that token has had, this one
    /// included.
    func request(_ request: HTTP2LoopbackServer.Request) -> Int {
        let token = String(request.path.dropFirst("/3/device/".count))
        return self.state.withLockedValue { state in
            state.requests[token, default: 0] += 1
            state.times[token, default: []].append(.now)
            state.paths.append(request.path)
            return state.requests[token]!
        }
    }

    func delivered(_ request: HTTP2LoopbackServer.Request) {
        let token = String(request.path.dropFirst("/3/device/".count))
        self.state.withLockedValue { $0.delivered[token, default: 0] += 1 }
    }

    var snapshot: State { self.state.withLockedValue { $0 } }
}

let testPayload = try! Payload(json: #"{"aps":{"alert":"Hello","sound":"default"},"campaign":"c-0001"}"#)
let testTopic = "com.example.salvo"

/// A job configuration against a local server, with quick timings for tests.
func jobConfigurationForTests(
    engine: HTTP2Engine = HTTP2ClientConfiguration.defaultEngine,
    port: Int,
    authentication: APNSAuthentication,
    connections: Int = 1,
    trustRoots: NIOSSLTrustRoots = CertificateFactory.shared.trustRoots
) -> HTTP2JobConfiguration {
    var client = HTTP2ClientConfiguration(host: "127.0.0.1", port: port, authentication: authentication)
    client.serverName = "localhost"
    client.trustRoots = trustRoots
    client.connections = connections
    client.engine = engine
    // Long enough that a debug build on loaded cores answers in time (a deadline missed resends the request, a
    // duplicate by design); the tests of deadlines set their own.
    client.requestTimeout = .seconds(30)
    client.connectTimeout = .seconds(2)
    client.reconnect = ReconnectPolicy(
        initialDelay: .milliseconds(5),
        maximumDelay: .milliseconds(50),
        minimumInterval: .milliseconds(5),
        maximumAttempts: 3
    )
    let headers = try! APNSRequestHeaders(pushType: .alert, priority: .immediate, topic: testTopic)
    var job = HTTP2JobConfiguration(client: client, headers: headers, payload: testPayload)
    job.retry = HTTP2RetryPolicy(
        initialDelay: .milliseconds(2),
        maximumDelay: .milliseconds(20),
        maximumAttempts: 4,
        maximumRetryAfter: .seconds(5)
    )
    job.recordDeliveries = true
    return job
}

/// The test client certificate (for topic `testTopic`), from the shared factory.
let sharedClient: CertificateFactory.Identity = {
    do {
        return try CertificateFactory.shared.client(topic: testTopic)
    } catch {
        fatalError("cannot make the test client certificate: \(error)")
    }
}()

/// Certificate authentication with the test client certificate.
var clientCertificate: APNSAuthentication {
    // The factory's own PEM always parses.
    .certificate(chain: [try! sharedClient.certificate], key: try! sharedClient.key)
}

/// Starts a server with the test identity (mutual TLS unless `mutualTLS` is false).
func startServer(
    mutualTLS: Bool = true,
    options: HTTP2LoopbackServer.Options = HTTP2LoopbackServer.Options(),
    responder: @escaping HTTP2LoopbackServer.Responder
) async throws -> HTTP2LoopbackServer {
    let credentials = CertificateFactory.shared
    return try await HTTP2LoopbackServer(
        certificateChain: [credentials.server.certificate],
        privateKey: credentials.server.key,
        clientTrustRoots: mutualTLS ? credentials.trustRoots : nil,
        options: options,
        responder: responder
    )
}

/// A JSON error body.
func errorBody(_ reason: APNSReason, timestamp: Int64? = nil) -> [UInt8] {
    APNSErrorBody(reason: reason, timestamp: timestamp).jsonBytes
}

/// A lowercase UUID for `apns-id`.
func newAPNSID() -> String { UUID().uuidString.lowercased() }

/// A clock tests move by hand (UNIX seconds).
final class ManualClock: Sendable {
    private let value: NIOLockedValueBox<Int64>
    init(_ start: Int64) { self.value = NIOLockedValueBox(start) }
    var now: Int64 { self.value.withLockedValue { $0 } }
    func advance(by seconds: Int64) { self.value.withLockedValue { $0 += seconds } }
    var function: @Sendable () -> Int64 { { self.now } }
}

/// Checks a JWT's ES256 signature with `publicKey` and returns its header and claims JSON text.
func verifyJWT(_ token: String, publicKey: P256.Signing.PublicKey) -> (header: String, claims: String)? {
    let parts = token.split(separator: ".", omittingEmptySubsequences: false)
    guard parts.count == 3, let header = decodeBase64URL(parts[0]),
        let claims = decodeBase64URL(parts[1]), let signature = decodeBase64URL(parts[2]),
        let ecdsa = try? P256.Signing.ECDSASignature(rawRepresentation: signature)
    else { return nil }
    let input = Array((parts[0] + "." + parts[1]).utf8)
    guard publicKey.isValidSignature(ecdsa, for: input) else { return nil }
    return (String(decoding: header, as: UTF8.self), String(decoding: claims, as: UTF8.self))
}

/// Decodes base64url with or without padding; nil for other characters (the inverse of `JWTSigner.base64URL`,
/// for reading the tokens the signer makes).
func decodeBase64URL(_ text: some StringProtocol) -> [UInt8]? {
    var standard = String(
        text.map { character -> Character in
            switch character {
            case "-": "+"
            case "_": "/"
            default: character
            }
        }
    )
    while standard.utf8.count % 4 != 0 { standard += "=" }
    return Data(base64Encoded: standard).map { Array($0) }
}
