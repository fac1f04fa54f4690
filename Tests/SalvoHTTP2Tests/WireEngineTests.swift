import APNSWire
import Crypto
import NIOCore
import NIOEmbedded
import NIOHPACK
import NIOPosix
import SalvoRows
import Testing

@testable import SalvoHTTP2

#if canImport(Glibc)
import Glibc
import SalvoTestTraits
#endif

/// The wire engine's own share of the protocol, on an embedded channel with a scripted server: the frames it
/// writes, HPACK, flow control, SETTINGS and PING. Jobs over real TLS with either engine are in `JobTests` and
/// `SimulatorEndpointTests`. The tests are synchronous: an embedded channel must be used from the thread that made
/// it, and an `await` may resume a test on another thread.
@Suite(.tags(.network), .runs(.network), .timeLimit(.minutes(1))) struct WireEngineTests {
    /// The server's end: cuts what the client wrote with the server's own frame reader and decodes header blocks.
    struct Server {
        var reader = HTTP2FrameReader()
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        var pending = ByteBuffer()

        mutating func frames(from channel: EmbeddedChannel) throws -> [HTTP2FrameReader.Frame] {
            while var bytes = try channel.readOutbound(as: ByteBuffer.self) { self.pending.writeBuffer(&bytes) }
            var frames: [HTTP2FrameReader.Frame] = []
            while let frame = try self.reader.next(from: &self.pending) { frames.append(frame) }
            return frames
        }

        /// The requests among `frames`: stream id, decoded headers, the header block's size.
        mutating func requests(
            _ frames: [HTTP2FrameReader.Frame]
        ) throws -> [(streamID: UInt32, headers: HPACKHeaders, blockBytes: Int)] {
            var requests: [(streamID: UInt32, headers: HPACKHeaders, blockBytes: Int)] = []
            for case .headers(let id, var block, _) in frames {
                let size = block.readableBytes
                requests.append((id, try self.decoder.decodeHeaders(from: &block), size))
            }
            return requests
        }
    }

    static func dataBytes(_ frames: [HTTP2FrameReader.Frame]) -> Int {
        var total = 0
        for case .data(_, _, _, let length) in frames { total += length }
        return total
    }

    static func send(_ channel: EmbeddedChannel, _ write: (inout ByteBuffer) -> Void) throws {
        var buffer = ByteBuffer()
        write(&buffer)
        try channel.writeInbound(buffer)
    }

    static func answer200(_ streamID: UInt32, into buffer: inout ByteBuffer) {
        let apnsID = Array("0f5c3e0a-8b39-4b7e-9d8e-3f1a2b4c5d6e".utf8)
        apnsID.withUnsafeBytes {
            HTTP2FrameWriter.responseHeaders(
                status: 200,
                apnsID: $0,
                retryAfter: nil,
                streamID: streamID,
                endStream: true,
                into: &buffer
            )
        }
    }

    /// A wire handler on an embedded channel for a job of `file`'s rows with `payload`, connected.
    static func connect(
        file: TokenFile,
        payload: Payload,
        token: ProviderToken? = nil,
        topic: String = testTopic
    ) throws -> (EmbeddedChannel, HTTP2JobContext, EventLoopPromise<Void>) {
        let channel = EmbeddedChannel()
        // On a real loop: the work queue completes it from its read-ahead queue, where an embedded loop's promise
        // may not be touched.
        let finished = MultiThreadedEventLoopGroup.singleton.next().makePromise(of: Void.self)
        let job = HTTP2JobContext(
            work: HTTP2WorkQueue(source: file.source, finished: finished),
            template: HTTP2RequestTemplate(
                authority: "localhost",
                headers: try APNSRequestHeaders(pushType: .alert, priority: .immediate, topic: topic),
                payload: payload
            ),
            token: token,
            connectionConfiguration: HTTP2ConnectionMachine.Configuration(
                maximumStreams: Int.max,
                requestTimeout: .seconds(60),
                pingInterval: .seconds(600),
                pingTimeout: .seconds(60),
                retry: .default,
                recordDeliveries: false
            ),
            outcomes: RowOutcomes(files: file.source.files)
        )
        // The rows are read on a queue of their own: the first chunk is ready before the connection opens (a
        // later one would only delay the first request, which the embedded loop's clock would then have to wake).
        job.work.waitForReadAhead()
        try channel.pipeline.syncOperations.addHandler(
            HTTP2WireConnectionHandler(job: job, random: SplitMix64(seed: 7))
        )
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        return (channel, job, finished)
    }

    /// Stops the unfinished job and closes the channel.
    static func end(_ channel: EmbeddedChannel, _ job: HTTP2JobContext, _ finished: EventLoopPromise<Void>) {
        job.work.stop(HTTP2JobStop(reason: nil, message: "the test is over"))
        _ = try? channel.finish()
        finished.futureResult.whenComplete { _ in }
        finished.succeed()
    }

    @Test func requestsFollowTheSendWindowAndShareOneIndexedHeaderBlock() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try TokenFile(count: 100, seed: 21, in: folder)
        let filler = String(repeating: "x", count: 1_950)
        let payload = try Payload(json: #"{"aps":{"alert":"hi"},"filler":"\#(filler)"}"#)
        let length = payload.byteCount
        let (channel, job, finished) = try Self.connect(file: file, payload: payload)
        defer { Self.end(channel, job, finished) }
        var server = Server()

        // The preface (checked by the reader), SETTINGS with push off, and a WINDOW_UPDATE; no request before the
        // server's SETTINGS.
        var frames = try server.frames(from: channel)
        guard case .settings(let settings) = frames.first else {
            Issue.record("no SETTINGS first: \(frames)")
            return
        }
        #expect(settings.contains { $0.parameter == .enablePush && $0.value == 0 })
        #expect(try server.requests(frames).isEmpty)

        try Self.send(channel) {
            HTTP2FrameWriter.settings([(.maxConcurrentStreams, 1_000)], into: &$0)
            HTTP2FrameWriter.ping(0x1234, into: &$0)
        }
        frames = try server.frames(from: channel)
        #expect(frames.contains { if case .settingsAcknowledged = $0 { true } else { false } })
        #expect(frames.contains { if case .pingAcknowledged = $0 { true } else { false } })
        // One stream until the first answer.
        var requests = try server.requests(frames)
        try #require(requests.count == 1)
        let first = requests[0].headers
        #expect(first.first(name: ":method") == "POST")
        #expect(first.first(name: ":scheme") == "https")
        #expect(first.first(name: ":authority") == "localhost")
        #expect(first.first(name: ":path") == "/3/device/" + file.tokens[0].hexString)
        #expect(first.first(name: "apns-topic") == testTopic)
        #expect(first.first(name: "content-length") == String(length))
        #expect(Self.dataBytes(frames) == length)

        // The first answer opens the limit; the connection's 65,535-byte send window holds the rest back.
        try Self.send(channel) { Self.answer200(1, into: &$0) }
        frames = try server.frames(from: channel)
        requests = try server.requests(frames)
        let fits = (65_535 - length) / length
        #expect(requests.count == fits)
        #expect(Self.dataBytes(frames) == fits * length)
        for (index, request) in requests.enumerated() {
            #expect(request.streamID == UInt32(3 + 2 * index))
            #expect(request.headers.first(name: ":path") == "/3/device/" + file.tokens[1 + index].hexString)
            #expect(request.headers.first(name: "apns-topic") == testTopic)
            #expect(request.headers.first(name: ":authority") == "localhost")
        }
        // After the first request the shared headers are dynamic-table indices: the path and a few bytes.
        #expect(requests.dropFirst().allSatisfy { $0.blockBytes <= 2 + 74 + 16 })

        // A WINDOW_UPDATE lets exactly what it opens through.
        let left = 65_535 - (1 + fits) * length
        try Self.send(channel) { HTTP2FrameWriter.windowUpdate(streamID: 0, increment: 3 * length, into: &$0) }
        frames = try server.frames(from: channel)
        #expect(try server.requests(frames).count == (left + 3 * length) / length)
    }

    @Test func aLowerLimitHoldsNewStreamsAndAHigherOneReleasesThem() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try TokenFile(count: 50, seed: 22, in: folder)
        let (channel, job, finished) = try Self.connect(file: file, payload: testPayload)
        defer { Self.end(channel, job, finished) }
        var server = Server()
        _ = try server.frames(from: channel)
        try Self.send(channel) { HTTP2FrameWriter.settings([(.maxConcurrentStreams, 4)], into: &$0) }
        #expect(try server.requests(server.frames(from: channel)).map(\.streamID) == [1])
        try Self.send(channel) { Self.answer200(1, into: &$0) }
        #expect(try server.requests(server.frames(from: channel)).map(\.streamID) == [3, 5, 7, 9])
        // Down to 2 with 4 in flight: nothing new until fewer than 2 are open.
        try Self.send(channel) {
            HTTP2FrameWriter.settings([(.maxConcurrentStreams, 2)], into: &$0)
            Self.answer200(3, into: &$0)
            Self.answer200(5, into: &$0)
        }
        #expect(try server.requests(server.frames(from: channel)).isEmpty)
        try Self.send(channel) { Self.answer200(7, into: &$0) }
        #expect(try server.requests(server.frames(from: channel)).map(\.streamID) == [11])
        // Up to 6: filled at once.
        try Self.send(channel) { HTTP2FrameWriter.settings([(.maxConcurrentStreams, 6)], into: &$0) }
        #expect(try server.requests(server.frames(from: channel)).map(\.streamID) == [13, 15, 17, 19])
    }

    @Test func aServerWithoutADynamicTableGetsLiteralHeaders() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try TokenFile(count: 20, seed: 24, in: folder)
        let (channel, job, finished) = try Self.connect(file: file, payload: testPayload)
        defer { Self.end(channel, job, finished) }
        var server = Server()
        _ = try server.frames(from: channel)
        try Self.send(channel) {
            HTTP2FrameWriter.settings([(.headerTableSize, 0), (.maxConcurrentStreams, 4)], into: &$0)
        }
        var requests = try server.requests(server.frames(from: channel))
        try Self.send(channel) { Self.answer200(1, into: &$0) }
        requests += try server.requests(server.frames(from: channel))
        // The first block shrinks the server's table to nothing; every block then carries its headers in full.
        #expect(server.decoder.allowedDynamicTableLength == 0)
        #expect(requests.map(\.streamID) == [1, 3, 5, 7, 9])
        for (index, request) in requests.enumerated() {
            #expect(request.headers.first(name: ":path") == "/3/device/" + file.tokens[index].hexString)
            #expect(request.headers.first(name: "apns-topic") == testTopic)
            #expect(request.blockBytes > 2 + 74 + testTopic.utf8.count)
        }
    }

    /// A new provider token in a small table (600 bytes): its entry evicts shared headers the block that carries it
    /// named by index, so the block after it must go through the encoder too; every block the server decodes has the
    /// right headers.
    @Test func aNewTokenInASmallTableKeepsTheServersTableInStep() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try TokenFile(count: 120, seed: 25, in: folder)
        let clock = ManualClock(1_700_000_000)
        let signer = try JWTSigner(privateKey: P256.Signing.PrivateKey(), keyID: "ABC123DEFG", teamID: "DEF123GHIJ")
        let token = try ProviderToken(signer: signer, clock: clock.function)
        let (channel, job, finished) = try Self.connect(file: file, payload: testPayload, token: token)
        defer { Self.end(channel, job, finished) }
        var server = Server()
        _ = try server.frames(from: channel)
        try Self.send(channel) {
            HTTP2FrameWriter.settings([(.headerTableSize, 600), (.maxConcurrentStreams, 6)], into: &$0)
        }
        var next = 0
        var authorizations: Set<String> = []
        for round in 0..<12 {
            let requests = try server.requests(server.frames(from: channel))
            try #require(!requests.isEmpty, "round \(round)")
            let authorization = token.current().authorization
            for request in requests {
                let headers = request.headers
                #expect(headers.first(name: ":path") == "/3/device/" + file.tokens[next].hexString)
                #expect(headers.first(name: ":method") == "POST" && headers.first(name: ":scheme") == "https")
                #expect(headers.first(name: ":authority") == "localhost", "round \(round): \(headers)")
                #expect(headers.first(name: "authorization") == authorization, "round \(round)")
                #expect(headers.first(name: "apns-topic") == testTopic, "round \(round): \(headers)")
                #expect(
                    headers.first(name: "apns-push-type") == "alert" && headers.first(name: "apns-priority") == "10"
                )
                #expect(headers.count == 9, "round \(round): \(headers)")
                next += 1
            }
            authorizations.insert(authorization)
            // Every other round the token reaches its refresh age: the next batch carries a new one.
            if round % 2 == 1 { clock.advance(by: 46 * 60) }
            try Self.send(channel) { buffer in
                for request in requests { Self.answer200(request.streamID, into: &buffer) }
            }
        }
        #expect(server.decoder.allowedDynamicTableLength == 600)
        #expect(authorizations.count == 6)
        #expect(next == 1 + 11 * 6)
    }

    @Test func onlyABlockOfIndexedFieldsIsSteady() {
        // 2 (static :method POST), 62 (the newest dynamic entry), then 130 = 127 + 3 in a continuation byte.
        #expect(HTTP2WireConnectionHandler.isIndexedFieldsOnly(ByteBuffer(bytes: [0x82, 0xBE, 0xFF, 0x03]), count: 3))
        #expect(!HTTP2WireConnectionHandler.isIndexedFieldsOnly(ByteBuffer(bytes: [0x82, 0xBE]), count: 3))
        // A literal with incremental indexing (01xxxxxx) inserts into the table.
        #expect(!HTTP2WireConnectionHandler.isIndexedFieldsOnly(ByteBuffer(bytes: [0x82, 0x41, 0x01, 0x61]), count: 2))
        // A table size update (001xxxxx), index 0, and an index cut short.
        #expect(!HTTP2WireConnectionHandler.isIndexedFieldsOnly(ByteBuffer(bytes: [0x3F, 0x81]), count: 2))
        #expect(!HTTP2WireConnectionHandler.isIndexedFieldsOnly(ByteBuffer(bytes: [0x80]), count: 1))
        #expect(!HTTP2WireConnectionHandler.isIndexedFieldsOnly(ByteBuffer(bytes: [0xFF, 0x83]), count: 1))
    }

    /// No frame over 16,384 bytes, the least `SETTINGS_MAX_FRAME_SIZE` a peer may have: a longer body goes in
    /// several DATA frames, a longer header block in HEADERS and CONTINUATION (the server's reader refuses a
    /// longer frame with a connection error).
    @Test func aBodyOrAHeaderBlockOverTheFrameLimitIsCutIntoFrames() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try TokenFile(count: 5, seed: 26, in: folder)
        let filler = String(repeating: "x", count: 20_000)
        let payload = try Payload(json: #"{"aps":{"alert":"hi"},"filler":"\#(filler)"}"#)
        // Over 16 KiB however HPACK codes it.
        let topic = String(repeating: "~", count: 17_000)
        let (channel, job, finished) = try Self.connect(file: file, payload: payload, topic: topic)
        defer { Self.end(channel, job, finished) }
        var server = Server(
            decoder: HPACKDecoder(
                allocator: ByteBufferAllocator(),
                maxDynamicTableSize: 4096,
                maxHeaderListSize: 1 << 20
            )
        )
        _ = try server.frames(from: channel)
        try Self.send(channel) { HTTP2FrameWriter.settings([(.maxConcurrentStreams, 4)], into: &$0) }
        var frames = try server.frames(from: channel)
        try Self.send(channel) { Self.answer200(1, into: &$0) }
        frames += try server.frames(from: channel)
        let requests = try server.requests(frames)
        // The connection's 65,535-byte window holds three of these bodies.
        #expect(requests.map(\.streamID) == [1, 3, 5])
        for request in requests {
            #expect(request.headers.first(name: "apns-topic") == topic)
            #expect(request.headers.first(name: "content-length") == String(payload.byteCount))
        }
        #expect(requests.first.map { $0.blockBytes > 16_384 } == true)
        var bodies: [UInt32: Int] = [:]
        var ends: [UInt32] = []
        for case .data(let id, _, let endStream, let length) in frames {
            #expect(length <= 16_384)
            bodies[id, default: 0] += length
            if endStream { ends.append(id) }
        }
        #expect(bodies == [1: payload.byteCount, 3: payload.byteCount, 5: payload.byteCount])
        #expect(ends == [1, 3, 5])
    }

    /// RFC 9113 §6.9: a WINDOW_UPDATE of 0 on a stream is that stream's error, not the connection's.
    @Test func aWindowUpdateOfZeroOnAStreamResetsThatStreamAlone() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try TokenFile(count: 10, seed: 27, in: folder)
        let (channel, job, finished) = try Self.connect(file: file, payload: testPayload)
        defer { Self.end(channel, job, finished) }
        var server = Server()
        _ = try server.frames(from: channel)
        try Self.send(channel) { HTTP2FrameWriter.settings([(.maxConcurrentStreams, 3)], into: &$0) }
        _ = try server.requests(server.frames(from: channel))
        try Self.send(channel) { Self.answer200(1, into: &$0) }
        #expect(try server.requests(server.frames(from: channel)).map(\.streamID) == [3, 5, 7])
        try Self.send(channel) { HTTP2FrameWriter.windowUpdate(streamID: 5, increment: 0, into: &$0) }
        let frames = try server.frames(from: channel)
        let resets = frames.compactMap { frame -> UInt32? in
            if case .resetStream(let id, let code) = frame, code == 1 { return id }
            return nil
        }
        #expect(resets == [5], "RST_STREAM PROTOCOL_ERROR on stream 5: \(frames)")
        #expect(!frames.contains { if case .goAway = $0 { true } else { false } })
        // The row goes again on a new stream of the same connection (it may or may not have been delivered).
        #expect(try server.requests(frames).map(\.streamID) == [9])
        #expect(channel.isActive)
        #expect(job.recorded.withLockedValue { $0.outcomes.report.resent } == 1)
    }

    @Test func goAwaySendsTheStreamsAboveItsLastAgainAndItsReasonStopsTheJob() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try TokenFile(count: 20, seed: 23, in: folder)
        let (channel, job, finished) = try Self.connect(file: file, payload: testPayload)
        defer { Self.end(channel, job, finished) }
        var server = Server()
        _ = try server.frames(from: channel)
        try Self.send(channel) { HTTP2FrameWriter.settings([(.maxConcurrentStreams, 4)], into: &$0) }
        // Decoded, as every block is: the server's table follows the client's.
        _ = try server.requests(server.frames(from: channel))
        try Self.send(channel) { Self.answer200(1, into: &$0) }
        #expect(try server.requests(server.frames(from: channel)).map(\.streamID) == [3, 5, 7, 9])
        // GOAWAY after stream 5, with APNs' reason in its debug data: 7 and 9 were never processed.
        try Self.send(channel) {
            let reason = Array(#"{"reason":"InvalidProviderToken"}"#.utf8)
            HTTP2FrameWriter.frameHeader(length: 8 + reason.count, type: 7, flags: 0, streamID: 0, into: &$0)
            $0.writeInteger(UInt32(5))
            $0.writeInteger(UInt32(0))
            $0.writeBytes(reason)
        }
        #expect(try server.requests(server.frames(from: channel)).isEmpty)
        #expect(job.work.stopped?.reason == "InvalidProviderToken")
        var recorded = job.recorded.withLockedValue { $0 }
        #expect(recorded.outcomes.report.confirmed == 1)
        #expect(recorded.outcomes.report.resent == 2)
        // 3 and 5 still finish; then the connection closes.
        try Self.send(channel) {
            Self.answer200(3, into: &$0)
            Self.answer200(5, into: &$0)
        }
        recorded = job.recorded.withLockedValue { $0 }
        #expect(recorded.outcomes.report.confirmed == 3)
        #expect(!channel.isActive)
    }
}

extension HTTP2FrameWriter {
    fileprivate static func ping(_ data: UInt64, into buffer: inout ByteBuffer) {
        self.frameHeader(length: 8, type: 6, flags: 0, streamID: 0, into: &buffer)
        buffer.writeInteger(data)
    }
}
