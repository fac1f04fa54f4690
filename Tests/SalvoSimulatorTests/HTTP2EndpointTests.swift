import APNSWire
import Crypto
import Foundation
import NIOCore
import NIOHPACK
import SalvoTestTraits
import Testing

@testable import SalvoSimulator

/// The simulator's HTTP/2 endpoint at the frame level, from raw bytes: TLS without ALPN, cleartext with prior
/// knowledge, the stream limit, and the connection errors RFC 9113 names for what a client must never send.
@Suite(.tags(.network), .runs(.network), .timeLimit(.minutes(1))) struct HTTP2EndpointTests {
    static let keyID = "KEY1234567"
    static let teamID = "TEAM123456"
    static let signingKeyBytes = P256.Signing.PrivateKey().rawRepresentation
    static var signingKey: P256.Signing.PrivateKey { try! P256.Signing.PrivateKey(rawRepresentation: signingKeyBytes) }

    static var endpoint: HTTP2EndpointConfiguration {
        var http2 = HTTP2EndpointConfiguration(
            providerKeys: [
                .init(keyID: keyID, teamID: teamID, publicKey: Array(signingKey.publicKey.rawRepresentation))
            ]
        )
        http2.cleartextPort = 0
        http2.maximumConcurrentStreams = 2
        return http2
    }

    /// A provider token signed with `signingKey`, issued now.
    static func bearer() throws -> String {
        func base64URL(_ bytes: some Sequence<UInt8>) -> String {
            Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        }
        let header = base64URL(Array(#"{"alg":"ES256","kid":"\#(keyID)"}"#.utf8))
        let now = Int(Date().timeIntervalSince1970)
        let claims = base64URL(Array(#"{"iss":"\#(teamID)","iat":\#(now)}"#.utf8))
        let signature = try signingKey.signature(for: Array("\(header).\(claims)".utf8))
        return "bearer \(header).\(claims).\(base64URL(signature.rawRepresentation))"
    }

    /// Client bytes: the preface, empty SETTINGS (acknowledging the server's at once when asked), then `frames`.
    struct Conversation {
        var bytes = ByteBuffer(bytes: Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8))
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        /// The streams whose request is complete (END_STREAM sent): each is owed an answer or a reset.
        var complete: Set<UInt32> = []

        init(acknowledgeSettings: Bool = true) {
            self.frame(type: 4, flags: 0, stream: 0, payload: [])
            if acknowledgeSettings { self.frame(type: 4, flags: 1, stream: 0, payload: []) }
        }

        mutating func frame(type: UInt8, flags: UInt8, stream: UInt32, payload: [UInt8]) {
            self.bytes.writeInteger(UInt32(payload.count) << 8 | UInt32(type))
            self.bytes.writeInteger(flags)
            self.bytes.writeInteger(stream)
            self.bytes.writeBytes(payload)
            // DATA or HEADERS with END_STREAM completes the stream's request.
            if (type == 0 || type == 1) && flags & 0x1 != 0 && stream != 0 { self.complete.insert(stream) }
        }

        mutating func block(_ headers: [(String, String)]) -> [UInt8] {
            var out = ByteBuffer()
            try! self.encoder.encode(headers: HPACKHeaders(headers), to: &out)
            return Array(out.readableBytesView)
        }

        /// HEADERS for a push to `token`; END_STREAM only when `endStream`.
        mutating func request(
            stream: UInt32,
            token: [UInt8],
            extra: [(String, String)] = [],
            endStream: Bool = false
        ) {
            let block = self.block(
                [(":method", "POST"), (":scheme", "https"), (":path", "/3/device/\(TestTokens.hex(token))")]
                    + [(":authority", "localhost"), ("apns-topic", Harness.topic)] + extra
            )
            self.frame(type: 1, flags: 0x4 | (endStream ? 0x1 : 0), stream: stream, payload: block)
        }

        mutating func body(stream: UInt32, _ text: String = #"{"aps":{"alert":"hi"}}"#) {
            self.frame(type: 0, flags: 0x1, stream: stream, payload: Array(text.utf8))
        }

        /// Whether `received` holds the server's end of every complete request (an answer that ended its stream, or
        /// a reset), or a GOAWAY.
        func isAnswered(_ received: [UInt8]) -> Bool {
            var ended: Set<UInt32> = []
            for frame in HTTP2EndpointTests.frames(received) {
                if frame.type == 7 { return true }
                if frame.type == 3 || ((frame.type == 0 || frame.type == 1) && frame.flags & 0x1 != 0) {
                    ended.insert(frame.stream)
                }
            }
            return !self.complete.isEmpty && self.complete.isSubset(of: ended)
        }
    }

    /// A frame the server sent.
    struct Frame {
        var type: UInt8
        var flags: UInt8
        var stream: UInt32
        var payload: [UInt8]
    }

    /// Cuts the server's bytes into frames.
    static func frames(_ received: [UInt8]) -> [Frame] {
        var buffer = ByteBuffer(bytes: received)
        var frames: [Frame] = []
        while buffer.readableBytes >= 9 {
            let word = buffer.readInteger(as: UInt32.self)!
            let flags = buffer.readInteger(as: UInt8.self)!
            let stream = buffer.readInteger(as: UInt32.self)! & 0x7FFF_FFFF
            guard let payload = buffer.readBytes(length: Int(word >> 8)) else { break }
            frames.append(Frame(type: UInt8(truncatingIfNeeded: word), flags: flags, stream: stream, payload: payload))
        }
        return frames
    }

    /// The answers by stream: status and headers, decoded with the client's HPACK state.
    static func answers(_ frames: [Frame]) throws -> [UInt32: HPACKHeaders] {
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        var answers: [UInt32: HPACKHeaders] = [:]
        for frame in frames where frame.type == 1 {
            var block = ByteBuffer(bytes: frame.payload)
            answers[frame.stream] = try decoder.decodeHeaders(from: &block)
        }
        return answers
    }

    static func goAwayCode(_ frames: [Frame]) -> UInt32? {
        guard let goAway = frames.last(where: { $0.type == 7 }) else { return nil }
        var payload = ByteBuffer(bytes: goAway.payload)
        _ = payload.readInteger(as: UInt32.self)
        return payload.readInteger(as: UInt32.self)
    }

    /// Sends `conversation` and reads what comes back until the server closes, or until every complete request has
    /// its answer or reset (or a GOAWAY came) and a short grace passed, or for `timeout`: a loaded machine has time
    /// to answer, and a quick one is not waited on.
    func exchange(
        _ harness: Harness,
        _ conversation: Conversation,
        cleartext: Bool,
        timeout: TimeAmount = .seconds(10)
    ) async throws -> [Frame] {
        let answered = { @Sendable (received: [UInt8]) in conversation.isAnswered(received) }
        let outcome = try await TestClient.exchange(
            port: cleartext ? harness.simulator.http2CleartextPort! : harness.simulator.http2Port!,
            identity: cleartext ? nil : harness.client,
            trusting: harness.certificates.ca.certificatePEM,
            send: conversation.bytes,
            timeout: timeout,
            cleartext: cleartext,
            until: answered
        )
        return Self.frames(outcome.received)
    }

    @Test func tlsWithoutALPNIsSpokenToInHTTP2AndTheApnsIDIsEchoedOrMade() async throws {
        try await Harness.run(http2: Self.endpoint) { harness in
            var conversation = Conversation()
            let given = "3f2504e0-4f89-41d3-9a0c-0305e82c3301"
            conversation.request(stream: 1, token: TestTokens.token(1), extra: [("apns-id", given)])
            conversation.body(stream: 1)
            conversation.request(stream: 3, token: TestTokens.token(2))
            conversation.body(stream: 3)
            let frames = try await self.exchange(harness, conversation, cleartext: false)
            let answers = try Self.answers(frames)
            #expect(frames.first?.type == 4, "the server speaks first with SETTINGS")
            #expect(answers[1]?.first(name: ":status") == "200")
            #expect(answers[1]?.first(name: "apns-id") == given)
            #expect(answers[3]?.first(name: ":status") == "200")
            let made = try #require(answers[3]?.first(name: "apns-id"))
            #expect(APNSRequestHeaders.isCanonicalUUID(made) && made != given)
            #expect(harness.simulator.ledger.record(for: TestTokens.token(1))?.count == 1)
            #expect(harness.simulator.ledger.record(for: TestTokens.token(2))?.count == 1)
        }
    }

    @Test func cleartextPriorKnowledgeTakesProviderTokensOnly() async throws {
        try await Harness.run(http2: Self.endpoint) { harness in
            var conversation = Conversation()
            conversation.request(stream: 1, token: TestTokens.token(3))
            conversation.body(stream: 1)
            conversation.request(stream: 3, token: TestTokens.token(4), extra: [("authorization", try Self.bearer())])
            conversation.body(stream: 3)
            let frames = try await self.exchange(harness, conversation, cleartext: true)
            let answers = try Self.answers(frames)
            #expect(answers[1]?.first(name: ":status") == "403")
            let refusal = try #require(frames.first { $0.type == 0 && $0.stream == 1 })
            #expect(APNSErrorBody(jsonBytes: refusal.payload)?.reason == .missingProviderToken)
            #expect(answers[3]?.first(name: ":status") == "200")
            #expect(harness.simulator.ledger.record(for: TestTokens.token(3)) == nil)
            #expect(harness.simulator.ledger.record(for: TestTokens.token(4))?.count == 1)
        }
    }

    @Test func streamsBeyondTheAcknowledgedLimitAreRefusedUnprocessed() async throws {
        try await Harness.run(http2: Self.endpoint) { harness in
            var conversation = Conversation()
            for (stream, n) in [(UInt32(1), UInt32(5)), (3, 6), (5, 7)] {
                conversation.request(stream: stream, token: TestTokens.token(n))
            }
            for stream in [UInt32(1), 3, 5] { conversation.body(stream: stream) }
            let frames = try await self.exchange(harness, conversation, cleartext: false)
            let reset = try #require(frames.first { $0.type == 3 })
            #expect(reset.stream == 5)
            #expect(reset.payload == [0, 0, 0, 7], "REFUSED_STREAM")
            let answers = try Self.answers(frames)
            #expect(answers.keys.sorted() == [1, 3])
            #expect(harness.simulator.ledger.record(for: TestTokens.token(7)) == nil)
        }
    }

    @Test func continuationAndPaddingAreUnderstood() async throws {
        try await Harness.run(http2: Self.endpoint) { harness in
            var conversation = Conversation()
            let block = conversation.block(
                [
                    (":method", "POST"), (":scheme", "https"),
                    (":path", "/3/device/\(TestTokens.hex(TestTokens.token(8)))"),
                ]
                    + [(":authority", "localhost"), ("apns-topic", Harness.topic)]
            )
            // HEADERS (padded, with priority, no END_HEADERS), then the rest of the block in CONTINUATION.
            let split = block.count / 2
            conversation.frame(
                type: 1,
                flags: 0x8 | 0x20,
                stream: 1,
                payload: [3] + [0, 0, 0, 0, 16] + block[..<split] + [0, 0, 0]
            )
            conversation.frame(type: 9, flags: 0x4, stream: 1, payload: Array(block[split...]))
            let payload = Array(#"{"aps":{"alert":"padded"}}"#.utf8)
            conversation.frame(type: 0, flags: 0x8 | 0x1, stream: 1, payload: [2] + payload + [0, 0])
            let frames = try await self.exchange(harness, conversation, cleartext: false)
            #expect(try Self.answers(frames)[1]?.first(name: ":status") == "200")
            #expect(harness.simulator.ledger.record(for: TestTokens.token(8))?.count == 1)
        }
    }

    @Test(arguments: [
        ("an even stream id", UInt32(1)),
        ("a header block HPACK cannot decode", 9),
        ("a frame over 16384 bytes", 6),
        ("PUSH_PROMISE from a client", 1),
        ("CONTINUATION without HEADERS", 1),
        ("DATA on a stream never opened", 1),
        ("WINDOW_UPDATE of 0 on the connection", 1),
        ("a request on a stream already closed", 1),
    ])
    func protocolViolationsEndTheConnectionWithGoAway(violation: String, code: UInt32) async throws {
        try await Harness.run(http2: Self.endpoint) { harness in
            var conversation = Conversation()
            switch violation {
            case "an even stream id":
                conversation.request(stream: 2, token: TestTokens.token(9), endStream: true)
            case "a header block HPACK cannot decode":
                conversation.frame(type: 1, flags: 0x5, stream: 1, payload: [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF])
            case "a frame over 16384 bytes":
                conversation.frame(type: 0, flags: 0, stream: 1, payload: Array(repeating: 0, count: 16385))
            case "PUSH_PROMISE from a client":
                conversation.frame(type: 5, flags: 0x4, stream: 1, payload: [0, 0, 0, 2])
            case "CONTINUATION without HEADERS":
                conversation.frame(type: 9, flags: 0x4, stream: 1, payload: [0x82])
            case "WINDOW_UPDATE of 0 on the connection":
                conversation.frame(type: 8, flags: 0, stream: 0, payload: [0, 0, 0, 0])
            case "a request on a stream already closed":
                conversation.request(stream: 3, token: TestTokens.token(22))
                conversation.body(stream: 3)
                conversation.request(stream: 3, token: TestTokens.token(22))
            default:
                conversation.body(stream: 7)
            }
            let frames = try await self.exchange(harness, conversation, cleartext: true)
            #expect(Self.goAwayCode(frames) == code, "\(violation)")
        }
    }

    /// RFC 9113 §6.9: a WINDOW_UPDATE of 0 on a stream is that stream's error; the connection goes on.
    @Test func aWindowUpdateOfZeroOnAStreamResetsThatStreamAlone() async throws {
        try await Harness.run(http2: Self.endpoint) { harness in
            var conversation = Conversation()
            conversation.request(stream: 1, token: TestTokens.token(20))
            conversation.frame(type: 8, flags: 0, stream: 1, payload: [0, 0, 0, 0])
            conversation.request(stream: 3, token: TestTokens.token(21))
            conversation.body(stream: 3)
            let frames = try await self.exchange(harness, conversation, cleartext: false)
            let resets = frames.filter { $0.type == 3 }
            #expect(resets.map(\.stream) == [1])
            #expect(resets.first?.payload == [0, 0, 0, 1], "PROTOCOL_ERROR")
            #expect(Self.goAwayCode(frames) == nil)
            #expect(try Self.answers(frames)[3]?.first(name: ":status") == "200")
            #expect(harness.simulator.ledger.record(for: TestTokens.token(20)) == nil)
            #expect(harness.simulator.ledger.record(for: TestTokens.token(21))?.count == 1)
        }
    }

    @Test func aClientWithoutThePrefaceIsTurnedAway() async throws {
        try await Harness.run(http2: Self.endpoint) { harness in
            var conversation = Conversation()
            conversation.bytes = ByteBuffer(string: "POST /3/device/00 HTTP/1.1\r\nHost: localhost\r\n\r\n")
            let frames = try await self.exchange(harness, conversation, cleartext: true)
            #expect(Self.goAwayCode(frames) == 1)
        }
    }
}
