import APNSWire
import NIOConcurrencyHelpers
import NIOCore
import NIOHPACK
import NIOSSL
import NIOTLS

/// An HTTP/2 server on 127.0.0.1 that never lets a row through, or lets it through only late, in one of the ways real
/// servers, proxies and gateways have been seen to: the peer of the client's tests of stalled jobs. Real TLS with
/// ALPN `h2` (the shared test identity, or any), then raw frames written by hand, so that it can do what a conforming
/// HTTP/2 library would refuse to (announce no streams forever, never open a window, answer with a header block
/// larger than the client asked for, answer a stream the client reset).
///
/// Every behaviour but `silentAfterTLS` acknowledges the client's SETTINGS and answers its PINGs, as a live
/// server does: the client cannot tell it from a slow one by liveness alone. It counts connections, requests
/// (streams whose HEADERS arrived) and requests per `:path`.
///
/// Thread-safe; each connection is confined to its event loop.
public final class HostileHTTP2Server: Sendable {
    /// How the server misbehaves, on every connection.
    public enum Behaviour: Sendable, Hashable, CustomStringConvertible {
        /// `SETTINGS_MAX_CONCURRENT_STREAMS` 0, never raised.
        case noStreams
        /// SETTINGS, then GOAWAY with last stream 0 (no stream will be processed), then close.
        case goAwayAfterSettings
        /// RST_STREAM REFUSED_STREAM for every stream.
        case refuseEveryStream
        /// The TLS handshake completes, then nothing at all: nothing is written (not even SETTINGS) and nothing is
        /// read any more (not even the client's close_notify), as from a server process that hung.
        case silentAfterTLS
        /// `SETTINGS_INITIAL_WINDOW_SIZE` 64 and no WINDOW_UPDATE ever; a request whose body arrives whole is
        /// answered 200.
        case tinyWindows
        /// Every request is answered 200 with a header block of about this many bytes (a padding header),
        /// spread over HEADERS and CONTINUATION frames.
        case largeHeaders(bytes: Int)
        /// Streams are accepted (SETTINGS allow 1,000) and never answered.
        case neverAnswer
        /// A `:path`'s first request is answered 200 only this long after it arrived (past a client's request
        /// timeout, on a stream the client has reset by then); a path asked again is answered at once.
        case lateFirstAnswers(after: TimeAmount)

        public var description: String {
            switch self {
            case .noStreams: "SETTINGS_MAX_CONCURRENT_STREAMS 0 forever"
            case .goAwayAfterSettings: "GOAWAY(last stream 0) after SETTINGS, then close"
            case .refuseEveryStream: "RST_STREAM(REFUSED_STREAM) on every stream"
            case .silentAfterTLS: "TLS, then nothing"
            case .tinyWindows: "64-byte stream windows never updated"
            case .largeHeaders(let bytes): "200 answers with \(bytes / 1000) KB of headers"
            case .neverAnswer: "streams accepted and never answered"
            case .lateFirstAnswers(let after): "each path's first answer \(after.nanoseconds / 1_000_000) ms late"
            }
        }
    }

    struct Counts {
        var connections = 0
        var requests = 0
        var paths: [String: Int] = [:]
    }

    public let behaviour: Behaviour
    private let listener: LoopbackListener
    private let counts: NIOLockedValueBox<Counts>

    /// The port the server listens on.
    public var port: Int { self.listener.port }

    /// Starts the server on any free port of 127.0.0.1, with `certificateChain`/`privateKey` as its TLS identity
    /// (mutual TLS when `clientTrustRoots` is set).
    public init(
        behaviour: Behaviour,
        certificateChain: [NIOSSLCertificate],
        privateKey: NIOSSLPrivateKey,
        clientTrustRoots: NIOSSLTrustRoots? = nil
    ) async throws {
        let sslContext = try LoopbackListener.http2TLS(
            certificateChain: certificateChain,
            privateKey: privateKey,
            clientTrustRoots: clientTrustRoots
        )
        let counts = NIOLockedValueBox(Counts())
        self.behaviour = behaviour
        self.counts = counts
        self.listener = try await LoopbackListener(threads: 1) { channel in
            counts.withLockedValue { $0.connections += 1 }
            return channel.eventLoop.makeCompletedFuture {
                let sync = channel.pipeline.syncOperations
                try sync.addHandler(NIOSSLServerHandler(context: sslContext))
                try sync.addHandler(HostileConnectionHandler(behaviour: behaviour, counts: counts))
            }
        }
    }

    /// Connections accepted so far.
    public var connectionCount: Int { self.counts.withLockedValue { $0.connections } }
    /// Requests (streams whose HEADERS arrived) so far, on every connection.
    public var requestCount: Int { self.counts.withLockedValue { $0.requests } }
    /// Requests per `:path` so far.
    public var requestsPerPath: [String: Int] { self.counts.withLockedValue { $0.paths } }

    /// Stops listening and closes every connection; a second call does nothing.
    public func stop() async {
        await self.listener.stop()
    }
}

/// One connection of `HostileHTTP2Server`: reads the client's frames with `HTTP2FrameReader` and writes the
/// behaviour's frames with `HTTP2FrameWriter`. Confined to its channel's event loop.
final class HostileConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let behaviour: HostileHTTP2Server.Behaviour
    private let counts: NIOLockedValueBox<HostileHTTP2Server.Counts>
    private var reader = HTTP2FrameReader()
    private var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
    // Without Huffman coding: 40 KB of headers per answer would otherwise cost a debug build milliseconds each.
    private var encoder = HPACKEncoder(allocator: ByteBufferAllocator(), useHuffmanEncoding: false)
    private var inbound = ByteBuffer()
    private var out = ByteBuffer()
    private var sentSettings = false
    /// Streams whose HEADERS came and whose request has not ended yet.
    private var open: Set<UInt32> = []
    /// `lateFirstAnswers`: each open stream's `:path`, and the streams of this read whose answers are to go late.
    private var paths: [UInt32: String] = [:]
    private var late: [UInt32] = []
    private var failed = false

    init(behaviour: HostileHTTP2Server.Behaviour, counts: NIOLockedValueBox<HostileHTTP2Server.Counts>) {
        self.behaviour = behaviour
        self.counts = counts
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = self.unwrapInboundIn(data)
        guard self.behaviour != .silentAfterTLS, !self.failed else { return }
        self.inbound.writeBuffer(&bytes)
        if !self.sentSettings {
            self.sentSettings = true
            self.writeSettings()
            if self.behaviour == .goAwayAfterSettings {
                HTTP2FrameWriter.goAway(lastStreamID: 0, code: .noError, into: &self.out)
                context.writeAndFlush(self.wrapOutboundOut(self.out), promise: nil)
                self.out.clear()
                self.failed = true
                context.close(promise: nil)
                return
            }
        }
        do {
            while let frame = try self.reader.next(from: &self.inbound) {
                try self.handle(frame)
                // Answers go out as they are made, not after the whole read: large ones would otherwise all wait.
                if self.out.readableBytes >= 64 << 10 { self.flush(context: context) }
            }
        } catch {
            HTTP2FrameWriter.goAway(lastStreamID: 0, code: error.code, into: &self.out)
            self.failed = true
            context.writeAndFlush(self.wrapOutboundOut(self.out), promise: nil)
            context.close(promise: nil)
            return
        }
        self.inbound.discardReadBytes()
        self.flush(context: context)
        if case .lateFirstAnswers(let after) = self.behaviour, !self.late.isEmpty {
            let streams = self.late
            self.late = []
            let bound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
            context.eventLoop.scheduleTask(in: after) {
                let (handler, context) = bound.value
                for streamID in streams { handler.answer(streamID, padding: 0) }
                handler.flush(context: context)
            }
        }
    }

    private func flush(context: ChannelHandlerContext) {
        guard self.out.readableBytes > 0 else { return }
        context.writeAndFlush(self.wrapOutboundOut(self.out), promise: nil)
        self.out = context.channel.allocator.buffer(capacity: 1024)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted = event, self.behaviour == .silentAfterTLS {
            context.channel.setOption(ChannelOptions.autoRead, value: false).whenFailure { _ in }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        context.close(promise: nil)
    }

    private func writeSettings() {
        var settings: [(parameter: HTTP2SettingIdentifier, value: UInt32)] = [(.maxHeaderListSize, 1 << 20)]
        switch self.behaviour {
        case .noStreams: settings.append((.maxConcurrentStreams, 0))
        case .tinyWindows: settings.append((.initialWindowSize, 64))
        default: settings.append((.maxConcurrentStreams, 1000))
        }
        HTTP2FrameWriter.settings(settings, into: &self.out)
        if self.behaviour != .tinyWindows {
            HTTP2FrameWriter.windowUpdate(streamID: 0, increment: 1 << 20, into: &self.out)
        }
    }

    private func handle(_ frame: HTTP2FrameReader.Frame) throws(HTTP2ConnectionError) {
        switch frame {
        case .settings:
            HTTP2FrameWriter.settingsAcknowledgement(into: &self.out)
        case .ping(let data):
            HTTP2FrameWriter.pingAcknowledgement(data, into: &self.out)
        case .headers(let streamID, var block, let endStream):
            let headers: HPACKHeaders
            do {
                headers = try self.decoder.decodeHeaders(from: &block)
            } catch {
                throw HTTP2ConnectionError(.compressionError, "\(error)")
            }
            let path = headers.first(name: ":path") ?? ""
            self.counts.withLockedValue {
                $0.requests += 1
                $0.paths[path, default: 0] += 1
            }
            self.open.insert(streamID)
            if case .lateFirstAnswers = self.behaviour { self.paths[streamID] = path }
            if endStream { self.requestEnded(streamID) } else { self.streamOpened(streamID) }
        case .data(let streamID, _, let endStream, _):
            if endStream { self.requestEnded(streamID) }
        case .resetStream(let streamID, _):
            self.open.remove(streamID)
        case .settingsAcknowledged, .pingAcknowledged, .windowUpdate, .goAway:
            break
        }
    }

    /// A stream's HEADERS came and its body follows.
    private func streamOpened(_ streamID: UInt32) {
        switch self.behaviour {
        case .refuseEveryStream, .noStreams:
            // A stream the server never allowed is refused too.
            self.open.remove(streamID)
            HTTP2FrameWriter.resetStream(streamID, code: .refusedStream, into: &self.out)
        default:
            break
        }
    }

    /// A request arrived whole.
    private func requestEnded(_ streamID: UInt32) {
        guard self.open.remove(streamID) != nil else { return }
        switch self.behaviour {
        case .refuseEveryStream, .noStreams:
            HTTP2FrameWriter.resetStream(streamID, code: .refusedStream, into: &self.out)
        case .tinyWindows:
            self.answer(streamID, padding: 0)
        case .largeHeaders(let bytes):
            self.answer(streamID, padding: bytes)
        case .lateFirstAnswers:
            let path = self.paths.removeValue(forKey: streamID) ?? ""
            if self.counts.withLockedValue({ $0.paths[path, default: 0] }) > 1 {
                self.answer(streamID, padding: 0)
            } else {
                self.late.append(streamID)
            }
        case .neverAnswer, .goAwayAfterSettings, .silentAfterTLS:
            break
        }
    }

    /// 200 with an `apns-id` and, when `padding` is above 0, an `x-padding` header of that many bytes, cut into
    /// HEADERS and CONTINUATION frames of at most 16 KiB.
    private func answer(_ streamID: UInt32, padding: Int) {
        var headers = HPACKHeaders([(":status", "200")])
        headers.add(name: "apns-id", value: "00000000-0000-0000-0000-" + hex12(streamID), indexing: .nonIndexable)
        if padding > 0 {
            headers.add(name: "x-padding", value: String(repeating: "p", count: padding), indexing: .nonIndexable)
        }
        var block = ByteBuffer()
        try? self.encoder.encode(headers: headers, to: &block)
        HTTP2FrameWriter.headerBlock(block, streamID: streamID, flags: 0x1, into: &self.out)
    }
}

/// The stream id as the last 12 hex digits of an `apns-id`.
private func hex12(_ value: UInt32) -> String {
    let hex = String(value, radix: 16)
    return String(repeating: "0", count: max(0, 12 - hex.count)) + hex
}
