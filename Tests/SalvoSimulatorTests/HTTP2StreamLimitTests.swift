import APNSWire
import NIOCore
import SalvoTestTraits
import Testing

@testable import SalvoSimulator

/// APNs' stream limits as the simulator plays them, at the frame level: a token-authenticated connection gets 1
/// stream until its first accepted request; with `dropToOneAfterRejection`, a rejection drops the limit to 1 and
/// the next acceptance restores it.
@Suite(.tags(.network), .runs(.network), .timeLimit(.minutes(1))) struct HTTP2StreamLimitTests {
    typealias Endpoint = HTTP2EndpointTests

    /// The `SETTINGS_MAX_CONCURRENT_STREAMS` values the server announced, in order.
    static func announcedLimits(_ frames: [Endpoint.Frame]) -> [UInt32] {
        var limits: [UInt32] = []
        for frame in frames where frame.type == 4 && frame.flags & 1 == 0 {
            var payload = ByteBuffer(bytes: frame.payload)
            while let id = payload.readInteger(as: UInt16.self), let value = payload.readInteger(as: UInt32.self) {
                if id == 3 { limits.append(value) }
            }
        }
        return limits
    }

    static func refused(_ frames: [Endpoint.Frame]) -> [UInt32] {
        frames.filter { $0.type == 3 && $0.payload == [0, 0, 0, 7] }.map(\.stream)
    }

    @Test func aTokenConnectionHasOneStreamUntilItsFirstRequestIsAccepted() async throws {
        try await Harness.run(http2: Endpoint.endpoint) { harness in
            let bearer = try Endpoint.bearer()
            var conversation = Endpoint.Conversation()
            conversation.request(stream: 1, token: TestTokens.token(11), extra: [("authorization", bearer)])
            conversation.request(stream: 3, token: TestTokens.token(12), extra: [("authorization", bearer)])
            conversation.body(stream: 1)
            conversation.body(stream: 3)
            let frames = try await Endpoint().exchange(harness, conversation, cleartext: true)
            #expect(Self.announcedLimits(frames) == [1, 2])
            #expect(Self.refused(frames) == [3])
            #expect(try Endpoint.answers(frames)[1]?.first(name: ":status") == "200")
        }
    }

    @Test func aCertificateConnectionHasTheFullLimitAtOnce() async throws {
        try await Harness.run(http2: Endpoint.endpoint) { harness in
            var conversation = Endpoint.Conversation()
            conversation.request(stream: 1, token: TestTokens.token(13), endStream: false)
            conversation.body(stream: 1)
            let frames = try await Endpoint().exchange(harness, conversation, cleartext: false)
            #expect(Self.announcedLimits(frames) == [2])
        }
    }

    @Test func aRejectionDropsTheLimitToOneUntilTheNextAcceptance() async throws {
        var endpoint = Endpoint.endpoint
        endpoint.faults.tokenConnectionsStartWithOneStream = false
        endpoint.faults.dropToOneAfterRejection = true
        var plan = FaultPlan()
        plan.invalidTokens = [TestTokens.hex(TestTokens.token(14))]
        try await Harness.run(plan: plan, http2: endpoint) { harness in
            let bearer = try Endpoint.bearer()
            var conversation = Endpoint.Conversation()
            conversation.request(stream: 1, token: TestTokens.token(14), extra: [("authorization", bearer)])
            conversation.body(stream: 1)
            // The client acknowledges the dropped limit before it opens the next streams.
            conversation.frame(type: 4, flags: 1, stream: 0, payload: [])
            conversation.request(stream: 3, token: TestTokens.token(15), extra: [("authorization", bearer)])
            conversation.request(stream: 5, token: TestTokens.token(16), extra: [("authorization", bearer)])
            conversation.body(stream: 3)
            conversation.body(stream: 5)
            let frames = try await Endpoint().exchange(harness, conversation, cleartext: true)
            let answers = try Endpoint.answers(frames)
            #expect(answers[1]?.first(name: ":status") == "400")
            #expect(answers[3]?.first(name: ":status") == "200")
            #expect(Self.refused(frames) == [5])
            #expect(Self.announcedLimits(frames) == [2, 1, 2])
        }
    }
}
