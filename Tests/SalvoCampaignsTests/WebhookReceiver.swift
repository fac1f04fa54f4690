import APNSWire
import Crypto
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import SalvoService
import SalvoTestSupport

/// A webhook receiver on loopback for the tests: listens on a port held until then (`ClosedPort`: connects are
/// refused until `listen`), answers every delivery with the status it is set to, and checks each one's signature
/// itself (HMAC-SHA256 over `<t>.<body>` with the shared secret, computed here, not by the code under test).
final class WebhookReceiver: Sendable {
    struct ReceiverError: Error {}

    struct Event: Hashable, Sendable {
        var id: String
        var type: String
        var token: String?
    }

    private struct State {
        var status = 500
        var requests: [Int] = []
        var badSignatures = 0
        var badBodies = 0
        var mismatchedIDs = 0
        /// Every event of every delivery answered 2xx, repeats included.
        var accepted: [Event] = []
        var channel: (any Channel)?
    }

    let port: Int
    private let closedPort: ClosedPort
    private let secret: [UInt8]
    private let state = NIOLockedValueBox(State())

    init(secret: [UInt8]) throws {
        self.closedPort = try ClosedPort()
        self.port = self.closedPort.port
        self.secret = secret
    }

    var url: String { "http://127.0.0.1:\(self.port)/hooks/salvo" }

    /// From now on every delivery is answered `status`.
    func answer(_ status: Int) { self.state.withLockedValue { $0.status = status } }

    /// Starts listening on the held port, answering 500 until told otherwise.
    func listen() async throws {
        guard let descriptor = self.closedPort.handOver() else { throw ReceiverError() }
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 64)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(Handler(receiver: self))
                }
            }
            .withBoundSocket(descriptor)
            .get()
        self.state.withLockedValue { $0.channel = channel }
    }

    func stop() async {
        let channel = self.state.withLockedValue { $0.channel }
        try? await channel?.close()
        self.closedPort.close()
    }

    /// The statuses answered, in order.
    var requests: [Int] { self.state.withLockedValue { $0.requests } }
    var badSignatures: Int { self.state.withLockedValue { $0.badSignatures } }
    var badBodies: Int { self.state.withLockedValue { $0.badBodies } }
    var mismatchedIDs: Int { self.state.withLockedValue { $0.mismatchedIDs } }
    var accepted: [Event] { self.state.withLockedValue { $0.accepted } }

    /// One delivery: its signature and body checked, answered with the status of the moment.
    fileprivate func receive(signature: String?, ids: String?, body: [UInt8]) -> Int {
        let verified = signature.map { self.verify($0, body: body) } ?? false
        let events = Self.events(body)
        return self.state.withLockedValue { state in
            let status = state.status
            state.requests.append(status)
            if !verified { state.badSignatures += 1 }
            guard let events else {
                state.badBodies += 1
                return status
            }
            if ids != events.map(\.id).joined(separator: ",") { state.mismatchedIDs += 1 }
            if (200..<300).contains(status) && verified { state.accepted += events }
            return status
        }
    }

    private func verify(_ header: String, body: [UInt8]) -> Bool {
        var timestamp: String?
        var given: String?
        for part in header.split(separator: ",") {
            if part.hasPrefix("t=") { timestamp = String(part.dropFirst(2)) }
            if part.hasPrefix("v1=") { given = String(part.dropFirst(3)) }
        }
        // A delivery signed more than five minutes from now is refused, as a receiver refuses a replay.
        guard let timestamp, let given, let seconds = Int64(timestamp),
            abs(ServiceClock.milliseconds() / 1000 - seconds) <= 300
        else { return false }
        let code = HMAC<SHA256>.authenticationCode(
            for: Array("\(seconds).".utf8) + body,
            using: SymmetricKey(data: self.secret)
        )
        return Hex.string(Array(code)) == given
    }

    private static func events(_ body: [UInt8]) -> [Event]? {
        guard let value = try? JSONValue.parse(body).value, case .array(let list)? = value["events"] else { return nil }
        var events: [Event] = []
        for item in list {
            guard case .string(let id)? = item["id"], case .string(let type)? = item["type"],
                case .string? = item["created_at"], case .object? = item["data"]
            else { return nil }
            var token: String?
            if case .string(let text)? = item["data"]?["token"] { token = text }
            events.append(Event(id: id, type: type, token: token))
        }
        return events
    }

    private final class Handler: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart

        let receiver: WebhookReceiver
        var head: HTTPRequestHead?
        var body: [UInt8] = []

        init(receiver: WebhookReceiver) { self.receiver = receiver }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch self.unwrapInboundIn(data) {
            case .head(let head):
                self.head = head
                self.body = []
            case .body(let buffer):
                self.body += buffer.readableBytesView
            case .end:
                let head = self.head
                let status = self.receiver.receive(
                    signature: head?.headers.first(name: "Salvo-Signature"),
                    ids: head?.headers.first(name: "Salvo-Event-Ids"),
                    body: self.body
                )
                var headers = HTTPHeaders()
                headers.add(name: "Content-Length", value: "0")
                let answer = HTTPResponseHead(version: .http1_1, status: .init(statusCode: status), headers: headers)
                context.write(self.wrapOutboundOut(.head(answer)), promise: nil)
                context.writeAndFlush(self.wrapOutboundOut(.end(nil)), promise: nil)
            }
        }
    }
}
