import APNSWire
import Crypto
import Foundation
import NIOCore
import NIOHPACK
import SalvoTestTraits
import Testing

@testable import SalvoSimulator

/// The device API's reasons added since 2020, as the simulator answers them over TLS: ExpiredToken (410) for the
/// plan's expired tokens, UnrelatedKeyIdInToken for a token of another key than the connection's first, and
/// BadEnvironmentKeyIdInToken for a key scoped to the other environment.
@Suite(.tags(.network), .runs(.network), .timeLimit(.minutes(1))) struct DeviceReasonTests {
    static let teamID = "TEAM123456"
    static let teamKey = (id: "TEAMKEY123", bytes: P256.Signing.PrivateKey().rawRepresentation)
    static let topicKey = (id: "TOPICKEY12", bytes: P256.Signing.PrivateKey().rawRepresentation)

    static func key(_ bytes: Data) -> P256.Signing.PrivateKey {
        try! P256.Signing.PrivateKey(rawRepresentation: bytes)
    }

    /// An endpoint that knows both keys; `topicKeyEnvironment` scopes the second one.
    static func endpoint(topicKeyEnvironment: FaultPlan.Environment = .any) -> HTTP2EndpointConfiguration {
        var http2 = HTTP2EndpointConfiguration(
            providerKeys: [
                .init(
                    keyID: teamKey.id,
                    teamID: teamID,
                    publicKey: Array(key(teamKey.bytes).publicKey.rawRepresentation)
                ),
                .init(
                    keyID: topicKey.id,
                    teamID: teamID,
                    publicKey: Array(key(topicKey.bytes).publicKey.rawRepresentation),
                    environment: topicKeyEnvironment
                ),
            ]
        )
        http2.faults.tokenConnectionsStartWithOneStream = false
        return http2
    }

    /// `authorization` with a provider token of the key `id`, issued now.
    static func bearer(_ id: String, _ bytes: Data) throws -> (String, String) {
        func base64URL(_ bytes: some Sequence<UInt8>) -> String {
            Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        }
        let header = base64URL(Array(#"{"alg":"ES256","kid":"\#(id)"}"#.utf8))
        let claims = base64URL(Array(#"{"iss":"\#(teamID)","iat":\#(Int(Date().timeIntervalSince1970))}"#.utf8))
        let signature = try key(bytes).signature(for: Array("\(header).\(claims)".utf8))
        return ("authorization", "bearer \(header).\(claims).\(base64URL(signature.rawRepresentation))")
    }

    /// One connection over TLS without a client certificate (token authentication): the answers' statuses and
    /// reasons by stream.
    static func exchange(
        _ harness: Harness,
        _ conversation: HTTP2EndpointTests.Conversation
    ) async throws -> [UInt32: (status: String?, reason: APNSReason?, timestamp: Int64?)] {
        let outcome = try await TestClient.exchange(
            port: harness.simulator.http2Port!,
            identity: nil,
            trusting: harness.certificates.ca.certificatePEM,
            send: conversation.bytes,
            // The server keeps the connection open: read until every complete request is answered, bounded.
            timeout: .seconds(10),
            until: { conversation.isAnswered($0) }
        )
        let frames = HTTP2EndpointTests.frames(outcome.received)
        var answers: [UInt32: (status: String?, reason: APNSReason?, timestamp: Int64?)] = [:]
        for (stream, headers) in try HTTP2EndpointTests.answers(frames) {
            let body = frames.first { $0.type == 0 && $0.stream == stream }.flatMap {
                APNSErrorBody(jsonBytes: $0.payload)
            }
            answers[stream] = (headers.first(name: ":status"), body?.reason, body?.timestamp)
        }
        return answers
    }

    @Test func aTokenOfAnotherKeyThanTheConnectionsFirstIsUnrelated() async throws {
        try await Harness.run(http2: Self.endpoint()) { harness in
            var conversation = HTTP2EndpointTests.Conversation()
            let team = try Self.bearer(Self.teamKey.id, Self.teamKey.bytes)
            let topic = try Self.bearer(Self.topicKey.id, Self.topicKey.bytes)
            conversation.request(stream: 1, token: TestTokens.token(1), extra: [team])
            conversation.body(stream: 1)
            conversation.request(stream: 3, token: TestTokens.token(2), extra: [topic])
            conversation.body(stream: 3)
            conversation.request(stream: 5, token: TestTokens.token(3), extra: [team])
            conversation.body(stream: 5)
            let answers = try await Self.exchange(harness, conversation)
            #expect(answers[1]?.status == "200")
            #expect(answers[3]?.status == "403")
            #expect(answers[3]?.reason == .unrelatedKeyIdInToken)
            #expect(answers[5]?.status == "200", "the connection keeps its first key")
            #expect(harness.simulator.ledger.record(for: TestTokens.token(2)) == nil)
            // A new connection is bound to the key of its own first token.
            var fresh = HTTP2EndpointTests.Conversation()
            fresh.request(stream: 1, token: TestTokens.token(2), extra: [topic])
            fresh.body(stream: 1)
            #expect(try await Self.exchange(harness, fresh)[1]?.status == "200")
            #expect(harness.simulator.ledger.record(for: TestTokens.token(2))?.count == 1)
        }
    }

    @Test func aKeyOfTheOtherEnvironmentIsRefused() async throws {
        var plan = FaultPlan()
        plan.environment = .production
        try await Harness.run(plan: plan, http2: Self.endpoint(topicKeyEnvironment: .sandbox)) { harness in
            var conversation = HTTP2EndpointTests.Conversation()
            // Production tokens (first byte odd, the plan's model).
            conversation.request(
                stream: 1,
                token: TestTokens.token(4, first: 0x11),
                extra: [try Self.bearer(Self.topicKey.id, Self.topicKey.bytes)]
            )
            conversation.body(stream: 1)
            conversation.request(
                stream: 3,
                token: TestTokens.token(5, first: 0x11),
                extra: [try Self.bearer(Self.teamKey.id, Self.teamKey.bytes)]
            )
            conversation.body(stream: 3)
            let answers = try await Self.exchange(harness, conversation)
            #expect(answers[1]?.status == "403")
            #expect(answers[1]?.reason == .badEnvironmentKeyIdInToken)
            #expect(answers[3]?.status == "200", "a team key serves both environments")
            #expect(harness.simulator.ledger.record(for: TestTokens.token(4, first: 0x11)) == nil)
        }
        // The same key on a sandbox endpoint is taken.
        plan.environment = .sandbox
        try await Harness.run(plan: plan, http2: Self.endpoint(topicKeyEnvironment: .sandbox)) { harness in
            var conversation = HTTP2EndpointTests.Conversation()
            conversation.request(
                stream: 1,
                token: TestTokens.token(6, first: 0x10),
                extra: [try Self.bearer(Self.topicKey.id, Self.topicKey.bytes)]
            )
            conversation.body(stream: 1)
            #expect(try await Self.exchange(harness, conversation)[1]?.status == "200")
        }
    }

    @Test func thePlansExpiredTokensAnswer410ExpiredToken() async throws {
        var plan = FaultPlan()
        plan.expiredTokens = [TestTokens.hex(TestTokens.token(7))]
        try await Harness.run(plan: plan, http2: Self.endpoint()) { harness in
            var conversation = HTTP2EndpointTests.Conversation()
            let team = try Self.bearer(Self.teamKey.id, Self.teamKey.bytes)
            conversation.request(stream: 1, token: TestTokens.token(7), extra: [team])
            conversation.body(stream: 1)
            conversation.request(stream: 3, token: TestTokens.token(8), extra: [team])
            conversation.body(stream: 3)
            let before = Int64(Date().timeIntervalSince1970) * 1000
            let answers = try await Self.exchange(harness, conversation)
            #expect(answers[1]?.status == "410")
            #expect(answers[1]?.reason == .expiredToken)
            #expect((answers[1]?.timestamp ?? 0) >= before - 1000, "a 410 says since when, in milliseconds")
            #expect(answers[3]?.status == "200")
            #expect(harness.simulator.ledger.record(for: TestTokens.token(7)) == nil)
        }
        // The option form of the plan.
        var options = FaultPlan()
        try options.apply(options: ["expired-token=" + TestTokens.hex(TestTokens.token(7))])
        #expect(options.expiredTokens == plan.expiredTokens)
    }
}
