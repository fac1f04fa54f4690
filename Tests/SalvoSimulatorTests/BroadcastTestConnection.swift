import APNSWire
import NIOConcurrencyHelpers
import NIOCore
import NIOHPACK
import NIOPosix
import NIOSSL
import SalvoSimulator
import SalvoTestSupport

/// One HTTP/2 connection over TLS to the simulator, for requests one after another (create a channel, then use the id
/// it came back with): frames written by hand, header blocks through NIOHPACK, answers read frame by frame, the
/// server's SETTINGS and PINGs acknowledged and its DATA given window back. Every wait is bounded.
final class BroadcastTestConnection: @unchecked Sendable {
    // @unchecked: the received bytes are behind a lock; the rest is used by one test task at a time.

    struct Response {
        var status: Int
        var headers: [(name: String, value: String)]
        var body: [UInt8]

        func header(_ name: String) -> String? { self.headers.first { $0.name == name }?.value }
        var reason: String? { APNSErrorBody(jsonBytes: self.body)?.reason.rawValue }
        var bodyText: String { String(decoding: self.body, as: UTF8.self) }
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    private let channel: any Channel
    private let inbox: Mailbox
    private var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
    private var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
    /// Bytes taken from the inbox and not yet cut into frames.
    private var bytes: [UInt8] = []
    private var parsed = 0
    private var nextStream: UInt32 = 1

    private init(channel: any Channel, inbox: Mailbox) {
        self.channel = channel
        self.inbox = inbox
    }

    /// Connects over TLS (with `identity` as the client certificate, or none) and sends the preface.
    static func connect(
        port: Int,
        identity: CertificateFactory.Identity?,
        trusting caPEM: String
    ) async throws -> BroadcastTestConnection {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.trustRoots = .certificates([try NIOSSLCertificate(bytes: Array(caPEM.utf8), format: .pem)])
        configuration.certificateVerification = .noHostnameVerification
        configuration.applicationProtocols = ["h2"]
        if let identity {
            configuration.certificateChain = [
                .certificate(try NIOSSLCertificate(bytes: Array(identity.certificatePEM.utf8), format: .pem))
            ]
            configuration.privateKey = .privateKey(
                try NIOSSLPrivateKey(bytes: Array(identity.privateKeyPEM.utf8), format: .pem)
            )
        }
        let context = try NIOSSLContext(configuration: configuration)
        let inbox = Mailbox()
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(.seconds(5))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        NIOSSLClientHandler(context: context, serverHostname: nil)
                    )
                    try channel.pipeline.syncOperations.addHandler(Inbox(inbox: inbox))
                }
            }
            .connect(host: "127.0.0.1", port: port)
            .get()
        let connection = BroadcastTestConnection(channel: channel, inbox: inbox)
        var out = ByteBuffer(bytes: Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8))
        Self.frame(type: 4, flags: 0, stream: 0, payload: [], into: &out)
        try await channel.writeAndFlush(out)
        return connection
    }

    func close() async {
        try? await self.channel.close()
    }

    /// Sends one request and waits (at most `timeout`) for its whole answer.
    func request(
        _ method: String,
        _ path: String,
        headers: [(String, String)] = [],
        body: [UInt8]? = nil,
        timeout: Duration = .seconds(10)
    ) async throws -> Response {
        let stream = self.nextStream
        self.nextStream += 2
        var block = ByteBuffer()
        let fields =
            [(":method", method), (":scheme", "https"), (":path", path), (":authority", "localhost")] + headers
        try self.encoder.encode(headers: HPACKHeaders(fields), to: &block)
        var out = ByteBuffer()
        Self.frame(
            type: 1,
            flags: 0x4 | (body == nil ? 0x1 : 0),
            stream: stream,
            payload: Array(block.readableBytesView),
            into: &out
        )
        if let body {
            var rest = body[...]
            repeat {
                let chunk = rest.prefix(16_384)
                rest = rest.dropFirst(chunk.count)
                Self.frame(type: 0, flags: rest.isEmpty ? 0x1 : 0, stream: stream, payload: Array(chunk), into: &out)
            } while !rest.isEmpty
        }
        try await self.channel.writeAndFlush(out)
        return try await self.answer(on: stream, timeout: timeout)
    }

    private func answer(on stream: UInt32, timeout: Duration) async throws -> Response {
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        var response = Response(status: 0, headers: [], body: [])
        var headerBlock: [UInt8] = []
        while clock.now < deadline {
            let (arrived, closed) = self.inbox.take()
            self.bytes.removeFirst(self.parsed)
            self.parsed = 0
            self.bytes += arrived
            let bytes = self.bytes
            var replies = ByteBuffer()
            while bytes.count - self.parsed >= 9 {
                let base = self.parsed
                let length = Int(bytes[base]) << 16 | Int(bytes[base + 1]) << 8 | Int(bytes[base + 2])
                guard bytes.count - base - 9 >= length else { break }
                let type = bytes[base + 3]
                let flags = bytes[base + 4]
                let id =
                    (UInt32(bytes[base + 5]) << 24 | UInt32(bytes[base + 6]) << 16 | UInt32(bytes[base + 7]) << 8
                        | UInt32(bytes[base + 8])) & 0x7FFF_FFFF
                let payload = Array(bytes[(base + 9)..<(base + 9 + length)])
                self.parsed = base + 9 + length
                switch type {
                case 1, 9:  // HEADERS, CONTINUATION: every block is decoded, to keep the HPACK table in step
                    headerBlock += payload
                    guard flags & 0x4 != 0 else { continue }
                    var buffer = ByteBuffer(bytes: headerBlock)
                    headerBlock = []
                    let decoded = try self.decoder.decodeHeaders(from: &buffer)
                    if id == stream {
                        response.status = Int(decoded.first(name: ":status") ?? "") ?? 0
                        response.headers = decoded.filter { $0.name != ":status" }.map { ($0.name, $0.value) }
                        if flags & 0x1 != 0 {
                            self.send(replies)
                            return response
                        }
                    }
                case 0:  // DATA: the window back at once
                    if length > 0 {
                        Self.frame(type: 8, flags: 0, stream: 0, payload: Self.word(UInt32(length)), into: &replies)
                        Self.frame(type: 8, flags: 0, stream: id, payload: Self.word(UInt32(length)), into: &replies)
                    }
                    if id == stream {
                        response.body += payload
                        if flags & 0x1 != 0 {
                            self.send(replies)
                            return response
                        }
                    }
                case 3 where id == stream:
                    throw Failure(description: "stream \(stream) reset by the server")
                case 4 where flags & 0x1 == 0:
                    Self.frame(type: 4, flags: 0x1, stream: 0, payload: [], into: &replies)
                case 6 where flags & 0x1 == 0:
                    Self.frame(type: 6, flags: 0x1, stream: 0, payload: payload, into: &replies)
                case 7:
                    throw Failure(description: "GOAWAY from the server")
                default:
                    break
                }
            }
            self.send(replies)
            if closed { throw Failure(description: "the connection closed before stream \(stream) was answered") }
            await self.inbox.arrival(before: deadline, on: self.channel.eventLoop)
        }
        throw Failure(description: "no answer on stream \(stream) within \(timeout)")
    }

    private func send(_ replies: ByteBuffer) {
        if replies.readableBytes > 0 { self.channel.writeAndFlush(replies, promise: nil) }
    }

    private static func word(_ value: UInt32) -> [UInt8] {
        [
            UInt8(value >> 24), UInt8(truncatingIfNeeded: value >> 16), UInt8(truncatingIfNeeded: value >> 8),
            UInt8(truncatingIfNeeded: value),
        ]
    }

    private static func frame(type: UInt8, flags: UInt8, stream: UInt32, payload: [UInt8], into out: inout ByteBuffer) {
        out.writeInteger(UInt32(payload.count) << 8 | UInt32(type))
        out.writeInteger(flags)
        out.writeInteger(stream)
        out.writeBytes(payload)
    }

    /// The bytes received and not yet taken, whether the connection closed, and the reader waiting for more.
    private final class Mailbox: Sendable {
        private struct State {
            var bytes: [UInt8] = []
            var closed = false
            var waiter: CheckedContinuation<Void, Never>?
        }

        private let state = NIOLockedValueBox(State())

        func deliver(_ bytes: ByteBufferView) {
            self.state.withLockedValue { state in
                state.bytes += bytes
                return state.waiter.take()
            }?.resume()
        }

        func close() {
            self.state.withLockedValue { state in
                state.closed = true
                return state.waiter.take()
            }?.resume()
        }

        /// What arrived since the last take, and whether the connection closed.
        func take() -> (bytes: [UInt8], closed: Bool) {
            self.state.withLockedValue { state in
                defer { state.bytes = [] }
                return (state.bytes, state.closed)
            }
        }

        /// Returns once bytes arrived or the connection closed (at once if either is so already), or at `deadline`
        /// (a timer on `loop`): the reader waits without polling.
        func arrival(before deadline: ContinuousClock.Instant, on loop: any EventLoop) async {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = self.state.withLockedValue { state -> Bool in
                    if !state.bytes.isEmpty || state.closed { return true }
                    state.waiter = continuation
                    return false
                }
                if now { return continuation.resume() }
                let left = ContinuousClock.now.duration(to: deadline)
                let nanoseconds = max(
                    0,
                    left.components.seconds * 1_000_000_000 + left.components.attoseconds / 1_000_000_000
                )
                loop.scheduleTask(in: .nanoseconds(nanoseconds)) {
                    self.state.withLockedValue { $0.waiter.take() }?.resume()
                }
            }
        }
    }

    private final class Inbox: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        let inbox: Mailbox

        init(inbox: Mailbox) {
            self.inbox = inbox
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let buffer = self.unwrapInboundIn(data)
            self.inbox.deliver(buffer.readableBytesView)
        }

        func channelInactive(context: ChannelHandlerContext) {
            self.inbox.close()
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            context.close(promise: nil)
        }
    }
}
