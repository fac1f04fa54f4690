import APNSWire
import Foundation
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOSSL
import NIOTLS

/// One connection of the simulator's HTTP/2 endpoint: checks every request as APNs does (`HTTP2RequestCheck`),
/// records accepted notifications in the shared `DeliveryLedger` (command byte 3 marks HTTP/2), echoes or makes
/// the `apns-id`, and injects the configured faults (the plan's invalid tokens, 410 for uninstalled tokens, seeded
/// 429/500/503, GOAWAY after N streams, a shrinking stream limit, slow answers).
///
/// Frame level behind `NIOHTTP2Handler`: a stream is a dictionary entry. Answers are written as requests complete
/// and flushed once per read. Confined to its channel's event loop.
final class HTTP2GatewayHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    struct Shared: Sendable {
        let ledger: DeliveryLedger
        /// The shared plan: its invalid tokens (listed, seeded fraction, other environment) answer BadDeviceToken,
        /// as they answer status 8 on the binary gateway.
        let plan: CompiledFaultPlan
        let verifier: ProviderTokenVerifier
        let faults: HTTP2EndpointConfiguration.Faults
        let seed: UInt64
        /// Uninstalled tokens and since when (UNIX seconds), per topic.
        let uninstalled: [String: [DeviceToken: UInt32]]
        let clock: any SimulatorClock
    }

    private struct Partial {
        var headers: HPACKHeaders
        var body: [UInt8] = []
    }

    private let shared: Shared
    private let connection: UInt32
    private var random: SeededGenerator
    private var partials: [HTTP2StreamID: Partial] = [:]
    private var peer: PeerTopic?
    private var cachedToken: (text: String, verdict: Result<ProviderTokenVerifier.Accepted, APNSReason>)?
    private var requests = 0
    private var goAwayStreamID: HTTP2StreamID?
    private var needsFlush = false
    private let batch = LedgerBatch(capacity: 256)
    private let windowTarget = 1 << 20

    init(shared: Shared, connection: UInt32) {
        self.shared = shared
        self.connection = connection
        self.random = SeededGenerator(seed: shared.seed ^ 0x4832, stream: UInt64(connection))
    }

    func channelActive(context: ChannelHandlerContext) {
        let frame = HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: self.windowTarget))
        context.writeAndFlush(self.wrapOutboundOut(frame), promise: nil)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.shared.ledger.mergeFullBatch(self.batch)
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .handshakeCompleted = event as? TLSUserEvent,
            let tls = try? context.pipeline.syncOperations.handler(type: NIOSSLServerHandler.self),
            let certificate = tls.peerCertificate
        {
            self.peer = PeerTopic(peerCertificate: certificate)
        }
        if let window = event as? NIOHTTP2WindowUpdatedEvent, window.streamID == .rootStream,
            let size = window.inboundWindowSize, size < self.windowTarget / 2
        {
            let frame = HTTP2Frame(
                streamID: .rootStream,
                payload: .windowUpdate(windowSizeIncrement: self.windowTarget - size)
            )
            context.writeAndFlush(self.wrapOutboundOut(frame), promise: nil)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = self.unwrapInboundIn(data)
        switch frame.payload {
        case .headers(let headers):
            self.partials[frame.streamID] = Partial(headers: headers.headers)
            if headers.endStream { self.complete(frame.streamID, context: context) }
        case .data(let data):
            guard self.partials[frame.streamID] != nil else { return }
            if case .byteBuffer(let bytes) = data.data, self.partials[frame.streamID]!.body.count < 8192 {
                self.partials[frame.streamID]!.body.append(contentsOf: bytes.readableBytesView)
            }
            if data.endStream { self.complete(frame.streamID, context: context) }
        default:
            break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.shared.ledger.mergeFullBatch(self.batch)
        if self.needsFlush {
            self.needsFlush = false
            context.flush()
        }
        context.fireChannelReadComplete()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        if error is NIOHTTP2Errors.StreamError { return }
        // After our GOAWAY, NIOHTTP2 reports the client's frames for dropped streams; earlier streams still get
        // their answers.
        if self.goAwayStreamID != nil { return }
        context.flush()
        context.close(promise: nil)
    }

    private func complete(_ streamID: HTTP2StreamID, context: ChannelHandlerContext) {
        guard let partial = self.partials.removeValue(forKey: streamID) else { return }
        if let last = self.goAwayStreamID, streamID > last { return }
        self.requests += 1
        let fields = partial.headers.map { (name: $0.name, value: $0.value) }
        let credentials: HTTP2RequestCheck.Credentials
        if let authorization = partial.headers.first(name: "authorization") {
            credentials = .token(self.verify(authorization))
        } else if let peer = self.peer {
            credentials = .certificate(peer)
        } else {
            credentials = .none
        }
        let checked = HTTP2RequestCheck.check(
            method: partial.headers.first(name: ":method"),
            path: partial.headers.first(name: ":path"),
            fields: fields,
            credentials: credentials,
            payload: partial.body
        )
        let apnsID = partial.headers.first(name: "apns-id") ?? UUID().uuidString.lowercased()
        let answer: (status: Int, headers: [(String, String)], body: [UInt8])
        switch checked {
        case .failure(let reason):
            answer = (reason.status ?? 400, [("apns-id", apnsID)], APNSErrorBody(reason: reason).jsonBytes)
        case .success(let passed):
            answer = self.answer(passed, apnsID: apnsID, payload: partial.body)
        }
        if self.shared.faults.responseDelayMilliseconds > 0 {
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            context.eventLoop.scheduleTask(in: .milliseconds(Int64(self.shared.faults.responseDelayMilliseconds))) {
                let (handler, context) = bound.value
                handler.write(answer, on: streamID, context: context)
                context.flush()
            }
        } else {
            self.write(answer, on: streamID, context: context)
        }
        self.applyConnectionFaults(after: streamID, context: context)
    }

    private func answer(
        _ passed: HTTP2RequestCheck.Passed,
        apnsID: String,
        payload: [UInt8]
    ) -> (status: Int, headers: [(String, String)], body: [UInt8]) {
        let faults = self.shared.faults
        if passed.token.withUnsafeBytes({ self.shared.plan.isInvalid($0.baseAddress!) }) {
            return (400, [("apns-id", apnsID)], APNSErrorBody(reason: .badDeviceToken).jsonBytes)
        }
        if passed.token.withUnsafeBytes({ self.shared.plan.isForeignToTopic($0.baseAddress!) }) {
            return (400, [("apns-id", apnsID)], APNSErrorBody(reason: .deviceTokenNotForTopic).jsonBytes)
        }
        if let since = self.shared.uninstalled[passed.topic]?[passed.token] {
            let body = APNSErrorBody(reason: .unregistered, timestamp: Int64(since) * 1000).jsonBytes
            return (410, [("apns-id", apnsID)], body)
        }
        if faults.tooManyRequestsRate > 0 && self.random.chance(faults.tooManyRequestsRate) {
            var headers = [("apns-id", apnsID)]
            if let seconds = faults.retryAfterSeconds { headers.append(("retry-after", String(seconds))) }
            return (429, headers, APNSErrorBody(reason: .tooManyRequests).jsonBytes)
        }
        if faults.internalServerErrorRate > 0 && self.random.chance(faults.internalServerErrorRate) {
            return (500, [("apns-id", apnsID)], APNSErrorBody(reason: .internalServerError).jsonBytes)
        }
        if faults.serviceUnavailableRate > 0 && self.random.chance(faults.serviceUnavailableRate) {
            return (503, [("apns-id", apnsID)], APNSErrorBody(reason: .serviceUnavailable).jsonBytes)
        }
        if self.batch.isFull { self.shared.ledger.mergeFullBatch(self.batch) }
        let digest = payload.withUnsafeBytes { TokenHash.digest($0) }
        passed.token.withUnsafeBytes { token in
            self.batch.append(
                token: token,
                identifier: 0,
                connection: self.connection,
                expiry: passed.headers.expiration ?? 0,
                priority: passed.headers.priority?.rawValue ?? 10,
                command: 3,
                digest: digest
            )
        }
        return (200, [("apns-id", apnsID)], [])
    }

    private func verify(_ authorization: String) -> Result<ProviderTokenVerifier.Accepted, APNSReason> {
        if let cached = self.cachedToken, cached.text == authorization { return cached.verdict }
        guard authorization.hasPrefix("bearer ") else { return .failure(.invalidProviderToken) }
        let verdict = self.shared.verifier.check(authorization.dropFirst("bearer ".count))
        self.cachedToken = (authorization, verdict)
        return verdict
    }

    private func write(
        _ answer: (status: Int, headers: [(String, String)], body: [UInt8]),
        on streamID: HTTP2StreamID,
        context: ChannelHandlerContext
    ) {
        var headers = HPACKHeaders([(":status", String(answer.status))])
        // apns-id is unique per answer: kept out of the HPACK dynamic table.
        for (name, value) in answer.headers { headers.add(name: name, value: value, indexing: .nonIndexable) }
        let head = HTTP2Frame(
            streamID: streamID,
            payload: .headers(.init(headers: headers, endStream: answer.body.isEmpty))
        )
        context.write(self.wrapOutboundOut(head), promise: nil)
        if !answer.body.isEmpty {
            let body = HTTP2Frame(
                streamID: streamID,
                payload: .data(.init(data: .byteBuffer(ByteBuffer(bytes: answer.body)), endStream: true))
            )
            context.write(self.wrapOutboundOut(body), promise: nil)
        }
        self.needsFlush = true
    }

    private func applyConnectionFaults(after streamID: HTTP2StreamID, context: ChannelHandlerContext) {
        let faults = self.shared.faults
        if let after = faults.shrinkAfterStreams, self.requests == after {
            let settings = HTTP2Frame(
                streamID: .rootStream,
                payload: .settings(.settings([HTTP2Setting(parameter: .maxConcurrentStreams, value: faults.shrinkTo)]))
            )
            context.write(self.wrapOutboundOut(settings), promise: nil)
            self.needsFlush = true
        }
        if let after = faults.goAwayAfterStreams, self.requests == after {
            self.goAwayStreamID = streamID
            let goAway = HTTP2Frame(
                streamID: .rootStream,
                payload: .goAway(lastStreamID: streamID, errorCode: .noError, opaqueData: nil)
            )
            // Out at once: the client's frames for dropped streams, later in this read, make NIOHTTP2 report
            // errors, and the answers must be on the wire first.
            self.shared.ledger.mergeFullBatch(self.batch)
            context.writeAndFlush(self.wrapOutboundOut(goAway), promise: nil)
        }
    }
}
