import APNSWire
import DequeModule
import NIOCore
import NIOHPACK
import NIOSSL
import NIOTLS

/// One connection of the simulator's HTTP/2 endpoint: checks every request as APNs does (`HTTP2RequestCheck`),
/// records accepted notifications in the shared `DeliveryLedger` (command byte 3 marks HTTP/2), echoes or makes
/// the `apns-id`, and injects the configured faults (the plan's invalid tokens, its tokens of another app
/// (DeviceTokenNotForTopic), 410 for uninstalled tokens, seeded
/// 429/500/503 one by one or in bursts, GOAWAY after N streams or at seeded moments with streams still in flight,
/// connections reset with a TCP RST, a stream limit that shrinks and comes back, slow answers).
///
/// It speaks HTTP/2 itself on the bytes TLS (or, on the cleartext port, TCP) delivers: `HTTP2FrameReader` frames,
/// NIOHPACK decodes header blocks, `HTTP2FrameWriter` writes answers. What it enforces of RFC 9113: the preface
/// and SETTINGS first, odd and increasing client stream ids, `SETTINGS_MAX_CONCURRENT_STREAMS` once the client
/// has acknowledged it (excess streams are refused with REFUSED_STREAM), both directions of flow control, and
/// connection errors answered with GOAWAY. Answers are collected in one buffer and written once per read.
///
/// Confined to its channel's event loop.
final class HTTP2GatewayHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    struct Shared: Sendable {
        let ledger: DeliveryLedger
        /// The shared plan: its invalid tokens (listed, seeded fraction, other environment) answer BadDeviceToken,
        /// as they answer status 8 on the binary gateway; its tokens of another app answer DeviceTokenNotForTopic.
        let plan: CompiledFaultPlan
        let verifier: ProviderTokenVerifier
        let faults: HTTP2EndpointConfiguration.Faults
        let maximumConcurrentStreams: Int
        let seed: UInt64
        /// Uninstalled tokens and since when (UNIX seconds), per topic.
        let uninstalled: [String: [DeviceToken: UInt32]]
        let clock: any SimulatorClock
        /// Channel management and broadcast requests (`BroadcastRoutes`); nil: none are served.
        var routes: BroadcastRoutes? = nil
        /// The device-side view of accepted Live Activity pushes; nil: none is kept.
        var liveActivities: LiveActivities? = nil
    }

    /// A stream whose request is still arriving.
    private struct Stream {
        var headers: HPACKHeaders
        /// The payload, kept up to `maximumKeptPayload` bytes; `payloadBytes` counts all of it. A payload in one
        /// DATA frame (the usual case) stays a slice of the bytes read: no copy, no allocation.
        var payload = ByteBuffer()
        var payloadBytes = 0

        mutating func keep(_ bytes: inout ByteBuffer) {
            self.payloadBytes += bytes.readableBytes
            let room = HTTP2GatewayHandler.maximumKeptPayload - self.payload.readableBytes
            guard room > 0, let kept = bytes.readSlice(length: min(room, bytes.readableBytes)) else { return }
            if self.payload.readableBytes == 0 {
                self.payload = kept
            } else {
                self.payload.writeImmutableBuffer(kept)
            }
        }
    }

    /// An answer's body waiting for flow-control window.
    private struct BlockedBody {
        var streamID: UInt32
        var bytes: [UInt8]
        var window: Int
    }

    private typealias Answer = (status: Int, retryAfter: Int?, body: [UInt8])

    private static let windowTarget = 1 << 20
    private static let initialStreamWindow = 1 << 20
    private static let maximumHeaderListSize = 16 << 10
    fileprivate static let maximumKeptPayload = 8192
    /// The peer's SETTINGS_MAX_FRAME_SIZE as long as it announces none (RFC 9113 §6.5.2): answers never need more.
    private static let maximumDataFrame = 16_384

    private let shared: Shared
    private let connection: UInt32
    /// Resets the connection (a TCP RST from below TLS); nil: a plain close stands in.
    private let resetter: ConnectionResetHandler?
    private var random: SeededGenerator
    private var reader = HTTP2FrameReader()
    private var decoder: HPACKDecoder
    private var input = ByteBuffer()
    private var output = ByteBuffer()
    private var streams: [UInt32: Stream] = [:]
    /// Streams opened and not yet answered (receiving, or waiting for a slow answer or for window).
    private var openStreams = 0
    private var lastStreamID: UInt32 = 0
    /// The stream limit the client has acknowledged, and limits sent but not yet acknowledged, oldest first.
    private var streamLimit = Int.max
    private var pendingLimits = Deque<Int>()
    /// The last limit announced (nil before the preface), and the one accepted requests restore.
    private var announcedLimit: Int?
    private var fullLimit: Int
    private var peer: PeerTopic?
    private var cachedToken: (text: String, verdict: Result<ProviderTokenVerifier.Accepted, APNSReason>)?
    /// The key of the first provider token accepted on this connection.
    private var connectionKeyID: String?
    private var apnsIDs = APNSIDMaker()
    private var requests = 0
    private var highestAnswered: UInt32 = 0
    private var goAwayStreamID: UInt32?
    private var peerSentGoAway = false
    private var closed = false
    /// Inbound flow control: bytes the client may still send, and bytes consumed since the last WINDOW_UPDATE.
    private var receiveWindow = 65_535
    private var consumed = 0
    /// Outbound flow control for answer bodies.
    private var sendWindow = 65_535
    private var peerInitialWindow = 65_535
    private var blocked = Deque<BlockedBody>()
    /// Answers scheduled for later (`responseDelayMilliseconds`): processed requests not yet answered.
    private var delayedAnswers = 0
    /// An error burst: answers still to give, and their status.
    private var burstRemaining = 0
    private var burstStatus = 500
    /// While a seeded limit drop lasts: the request count at which the endpoint's limit comes back.
    private var restoreLimitAt: Int?
    private let batch = LedgerBatch(capacity: 256)
    /// With resets planned, the last write of answers: a reset waits for it (`ConnectionResetHandler`).
    private var lastWrite: EventLoopFuture<Void>?

    init(
        shared: Shared,
        connection: UInt32,
        allocator: ByteBufferAllocator,
        resetter: ConnectionResetHandler? = nil
    ) {
        self.shared = shared
        self.connection = connection
        self.resetter = resetter
        self.random = SeededGenerator(seed: shared.seed ^ 0x4832, stream: UInt64(connection))
        self.decoder = HPACKDecoder(
            allocator: allocator,
            maxDynamicTableSize: HPACKDecoder.maxDynamicTableSize,
            maxHeaderListSize: Self.maximumHeaderListSize
        )
        self.output = allocator.buffer(capacity: 16 << 10)
        self.fullLimit = shared.maximumConcurrentStreams
    }

    func channelActive(context: ChannelHandlerContext) {
        // Over TLS the preface waits for the handshake, which tells whether the client has a certificate; without
        // TLS every request carries a provider token.
        if (try? context.pipeline.syncOperations.handler(type: NIOSSLServerHandler.self)) == nil {
            self.sendPreface(tokenAuthenticated: true, context: context)
        }
        context.fireChannelActive()
    }

    /// The server's SETTINGS and the first WINDOW_UPDATE. A token-authenticated connection is announced 1 stream
    /// until its first request is accepted, as APNs does (unless the faults turn that off).
    private func sendPreface(tokenAuthenticated: Bool, context: ChannelHandlerContext) {
        let limit = tokenAuthenticated && self.shared.faults.tokenConnectionsStartWithOneStream ? 1 : self.fullLimit
        HTTP2FrameWriter.settings(
            [
                (.maxConcurrentStreams, UInt32(min(limit, Int(Int32.max)))),
                (.initialWindowSize, UInt32(Self.initialStreamWindow)),
                (.maxHeaderListSize, UInt32(Self.maximumHeaderListSize)),
            ],
            into: &self.output
        )
        self.announcedLimit = limit
        self.pendingLimits.append(limit)
        HTTP2FrameWriter.windowUpdate(streamID: 0, increment: Self.windowTarget - 65_535, into: &self.output)
        self.receiveWindow = Self.windowTarget
        self.flush(context: context)
    }

    /// Announces a new `SETTINGS_MAX_CONCURRENT_STREAMS` when it differs from the last one announced; the old one
    /// holds until the client acknowledges it.
    private func announce(_ limit: Int) {
        guard limit != self.announcedLimit else { return }
        HTTP2FrameWriter.settings([(.maxConcurrentStreams, UInt32(min(limit, Int(Int32.max))))], into: &self.output)
        self.announcedLimit = limit
        self.pendingLimits.append(limit)
    }

    /// APNs' limit after an answer: the full limit after an accepted request (the first one lifts a token
    /// connection's 1), 1 after a rejected one when `dropToOneAfterRejection` is on.
    private func followLimit(afterStatus status: Int) {
        if status == 200 {
            self.announce(self.fullLimit)
        } else if self.shared.faults.dropToOneAfterRejection {
            self.announce(1)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.closed = true
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
        if case .handshakeCompleted = event as? TLSUserEvent, self.announcedLimit == nil {
            self.sendPreface(tokenAuthenticated: self.peer == nil, context: context)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !self.closed else { return }
        var bytes = self.unwrapInboundIn(data)
        if self.input.readableBytes == 0 {
            self.input = bytes
        } else {
            self.input.writeBuffer(&bytes)
        }
        do {
            while let frame = try self.reader.next(from: &self.input) {
                try self.handle(frame, context: context)
                if self.closed { return }
            }
        } catch {
            self.fail(error, context: context)
            return
        }
        self.input.discardReadBytes()
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.shared.ledger.mergeFullBatch(self.batch)
        if self.consumed >= Self.windowTarget / 2 {
            HTTP2FrameWriter.windowUpdate(streamID: 0, increment: self.consumed, into: &self.output)
            self.receiveWindow += self.consumed
            self.consumed = 0
        }
        self.flush(context: context)
        self.closeIfDone(context: context)
        context.fireChannelReadComplete()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        self.closed = true
        context.close(promise: nil)
    }

    // MARK: Frames

    private func handle(_ frame: HTTP2FrameReader.Frame, context: ChannelHandlerContext) throws(HTTP2ConnectionError) {
        switch frame {
        case .headers(let streamID, var block, let endStream):
            // Decoded whatever becomes of the stream: the HPACK table must follow every block.
            let headers: HPACKHeaders
            do {
                headers = try self.decoder.decodeHeaders(from: &block)
            } catch {
                throw HTTP2ConnectionError(.compressionError, "cannot decode a header block: \(error)")
            }
            if self.streams[streamID] != nil {
                // Trailers: nothing of APNs' is in them.
                if endStream { self.complete(streamID, context: context) }
                return
            }
            // A new stream's id is above every one opened before (RFC 9113 §5.1.1): a stream answered, refused or
            // reset is closed, and a client that sends a request on it again (the same bytes twice, say) is broken.
            guard streamID > self.lastStreamID else {
                throw HTTP2ConnectionError(
                    .protocolError,
                    "HEADERS on stream \(streamID), not above the last stream opened (\(self.lastStreamID))"
                )
            }
            guard streamID & 1 == 1 else { throw HTTP2ConnectionError(.protocolError, "even stream id \(streamID)") }
            self.lastStreamID = streamID
            if let last = self.goAwayStreamID, streamID > last { return }
            if self.shared.faults.resetRate > 0, self.delayedAnswers == 0, self.blocked.isEmpty,
                self.random.chance(self.shared.faults.resetRate)
            {
                self.reset(context: context)
                return
            }
            // Until the client acknowledges a new limit it may still use the old one (§6.5.3).
            if self.openStreams >= max(self.streamLimit, self.pendingLimits.max() ?? self.streamLimit) {
                HTTP2FrameWriter.resetStream(streamID, code: .refusedStream, into: &self.output)
                self.shared.ledger.recordRefusedStream()
                return
            }
            self.openStreams += 1
            self.streams[streamID] = Stream(headers: headers)
            if endStream { self.complete(streamID, context: context) }
        case .data(let streamID, var payload, let endStream, let flowControlled):
            self.receiveWindow -= flowControlled
            self.consumed += flowControlled
            guard self.receiveWindow >= 0 else {
                throw HTTP2ConnectionError(.flowControlError, "DATA beyond the connection window")
            }
            guard streamID <= self.lastStreamID else {
                throw HTTP2ConnectionError(.protocolError, "DATA on idle stream \(streamID)")
            }
            guard let index = self.streams.index(forKey: streamID) else { return }
            guard self.streams.values[index].payloadBytes + payload.readableBytes <= Self.initialStreamWindow else {
                self.streams.remove(at: index)
                HTTP2FrameWriter.resetStream(streamID, code: .flowControlError, into: &self.output)
                self.openStreams -= 1
                return
            }
            self.streams.values[index].keep(&payload)
            if endStream { self.complete(streamID, context: context) }
        case .settings(let settings):
            for setting in settings {
                switch setting.parameter {
                case .initialWindowSize:  // changes the window of every open stream (§6.9.2)
                    guard setting.value <= 0x7FFF_FFFF else {
                        throw HTTP2ConnectionError(.flowControlError, "INITIAL_WINDOW_SIZE \(setting.value)")
                    }
                    let delta = Int(setting.value) - self.peerInitialWindow
                    self.peerInitialWindow = Int(setting.value)
                    for index in self.blocked.indices { self.blocked[index].window += delta }
                default:
                    break
                }
            }
            HTTP2FrameWriter.settingsAcknowledgement(into: &self.output)
            self.sendBlockedBodies()
        case .settingsAcknowledged:
            if let limit = self.pendingLimits.popFirst() { self.streamLimit = limit }
        case .ping(let data):
            HTTP2FrameWriter.pingAcknowledgement(data, into: &self.output)
        case .pingAcknowledged:
            break
        case .windowUpdate(let streamID, let increment):
            if streamID == 0 {
                self.sendWindow += increment
            } else if increment == 0 {
                // A stream error (RFC 9113 §6.9): the stream ends unanswered, the connection goes on.
                if self.dropStream(streamID) {
                    HTTP2FrameWriter.resetStream(streamID, code: .protocolError, into: &self.output)
                }
            } else {
                for index in self.blocked.indices where self.blocked[index].streamID == streamID {
                    self.blocked[index].window += increment
                }
            }
            self.sendBlockedBodies()
        case .resetStream(let streamID, _):
            _ = self.dropStream(streamID)
        case .goAway:
            self.peerSentGoAway = true
        }
    }

    /// Forgets a stream still receiving or waiting for window to send its answer; whether it was one.
    private func dropStream(_ streamID: UInt32) -> Bool {
        if self.streams.removeValue(forKey: streamID) != nil {
            self.openStreams -= 1
            return true
        }
        if let index = self.blocked.firstIndex(where: { $0.streamID == streamID }) {
            self.blocked.remove(at: index)
            self.openStreams -= 1
            return true
        }
        return false
    }

    private func fail(_ error: HTTP2ConnectionError, context: ChannelHandlerContext) {
        HTTP2FrameWriter.goAway(lastStreamID: self.lastStreamID, code: error.code, into: &self.output)
        self.shared.ledger.mergeFullBatch(self.batch)
        self.flush(context: context)
        self.closed = true
        context.close(promise: nil)
    }

    /// Sends the answers written so far, then resets the connection: no GOAWAY, no TLS close, a TCP RST. Every
    /// stream not answered by then was never processed.
    private func reset(context: ChannelHandlerContext) {
        self.shared.ledger.mergeFullBatch(self.batch)
        self.shared.ledger.recordReset()
        self.flush(context: context)
        self.closed = true
        if let resetter = self.resetter {
            resetter.reset(after: self.lastWrite)
        } else {
            context.close(promise: nil)
        }
    }

    private func flush(context: ChannelHandlerContext) {
        guard self.output.readableBytes > 0 else { return }
        if self.resetter != nil, self.shared.faults.resetRate > 0 {
            // Writes complete in order: a reset waits for the last one, so every answer written reaches the socket.
            let written = context.eventLoop.makePromise(of: Void.self)
            context.writeAndFlush(self.wrapOutboundOut(self.output), promise: written)
            self.lastWrite = written.futureResult
        } else {
            context.writeAndFlush(self.wrapOutboundOut(self.output), promise: nil)
        }
        self.output = context.channel.allocator.buffer(capacity: 16 << 10)
    }

    /// After either side's GOAWAY, the connection closes once every accepted stream is answered.
    private func closeIfDone(context: ChannelHandlerContext) {
        guard !self.closed, self.goAwayStreamID != nil || self.peerSentGoAway, self.openStreams == 0 else { return }
        self.closed = true
        context.close(promise: nil)
    }

    // MARK: Requests

    private func complete(_ streamID: UInt32, context: ChannelHandlerContext) {
        guard let stream = self.streams.removeValue(forKey: streamID) else { return }
        self.requests += 1
        self.highestAnswered = max(self.highestAnswered, streamID)
        var method: String?
        var path: String?
        var authorization: String?
        var apnsID: String?
        for header in stream.headers {
            switch header.name {
            case ":method": method = header.value
            case ":path": path = header.value
            case "authorization": authorization = header.value
            case "apns-id": apnsID = header.value
            default: break
            }
        }
        let credentials: HTTP2RequestCheck.Credentials
        if let authorization {
            credentials = .token(self.verify(authorization))
        } else if let peer = self.peer {
            credentials = .certificate(peer)
        } else {
            credentials = .none
        }
        if let routes = self.shared.routes, routes.takes(path: path) {
            let response = routes.answer(
                method: method,
                path: path,
                fields: stream.headers.map { (name: $0.name, value: $0.value) },
                credentials: credentials,
                body: stream.payload,
                bodyBytes: stream.payloadBytes
            )
            self.followLimit(afterStatus: (200..<300).contains(response.status) ? 200 : response.status)
            self.write(response, on: streamID)
            return
        }
        let checked = HTTP2RequestCheck.check(
            method: method,
            path: path,
            fields: stream.headers.lazy.map { (name: $0.name, value: $0.value) },
            credentials: credentials,
            payloadBytes: stream.payloadBytes
        )
        let answer: Answer
        switch checked {
        case .failure(let reason):
            // A malformed apns-id is not echoed: the service makes one.
            if reason == .badMessageId { apnsID = nil }
            answer = (reason.status ?? 400, nil, APNSErrorBody(reason: reason).jsonBytes)
        case .success(let passed):
            answer = self.answer(passed, payload: stream.payload)
        }
        self.followLimit(afterStatus: answer.status)
        let delay = self.shared.faults.responseDelayMilliseconds
        let echoed = apnsID
        if delay > 0 {
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            self.delayedAnswers += 1
            context.eventLoop.scheduleTask(in: .milliseconds(Int64(delay))) {
                let (handler, context) = bound.value
                handler.delayedAnswers -= 1
                guard !handler.closed else { return }
                handler.write(answer, apnsID: echoed, on: streamID)
                handler.flush(context: context)
                handler.closeIfDone(context: context)
            }
        } else {
            self.write(answer, apnsID: echoed, on: streamID)
        }
        self.applyConnectionFaults()
    }

    private func answer(_ passed: HTTP2RequestCheck.Passed, payload: ByteBuffer) -> Answer {
        let faults = self.shared.faults
        if passed.token.withUnsafeBytes({ self.shared.plan.isInvalid($0.baseAddress!) }) {
            return (400, nil, APNSErrorBody(reason: .badDeviceToken).jsonBytes)
        }
        if passed.token.withUnsafeBytes({ self.shared.plan.isForeignToTopic($0.baseAddress!) }) {
            return (400, nil, APNSErrorBody(reason: .deviceTokenNotForTopic).jsonBytes)
        }
        if let since = self.shared.uninstalled[passed.topic]?[passed.token] {
            return (410, nil, APNSErrorBody(reason: .unregistered, timestamp: Int64(since) * 1000).jsonBytes)
        }
        if passed.token.withUnsafeBytes({ self.shared.plan.expiredTokens.contains($0.baseAddress!) }) {
            let now = Int64(self.shared.clock.now()) * 1000
            return (410, nil, APNSErrorBody(reason: .expiredToken, timestamp: now).jsonBytes)
        }
        if self.burstRemaining == 0, faults.errorBurstRate > 0, self.random.chance(faults.errorBurstRate) {
            self.burstRemaining = faults.errorBurstLength
            self.burstStatus = [429, 500, 503][Int(self.random.next() % 3)]
        }
        if self.burstRemaining > 0 {
            self.burstRemaining -= 1
            switch self.burstStatus {
            case 429: return (429, faults.retryAfterSeconds, APNSErrorBody(reason: .tooManyRequests).jsonBytes)
            case 503: return (503, nil, APNSErrorBody(reason: .serviceUnavailable).jsonBytes)
            default: return (500, nil, APNSErrorBody(reason: .internalServerError).jsonBytes)
            }
        }
        if faults.tooManyRequestsRate > 0 && self.random.chance(faults.tooManyRequestsRate) {
            return (429, faults.retryAfterSeconds, APNSErrorBody(reason: .tooManyRequests).jsonBytes)
        }
        if faults.internalServerErrorRate > 0 && self.random.chance(faults.internalServerErrorRate) {
            return (500, nil, APNSErrorBody(reason: .internalServerError).jsonBytes)
        }
        if faults.serviceUnavailableRate > 0 && self.random.chance(faults.serviceUnavailableRate) {
            return (503, nil, APNSErrorBody(reason: .serviceUnavailable).jsonBytes)
        }
        if passed.headers.pushType == .liveActivity {
            self.shared.liveActivities?.receive(token: passed.token, payload: payload)
        }
        if self.batch.isFull { self.shared.ledger.mergeFullBatch(self.batch) }
        let digest = payload.withUnsafeReadableBytes { TokenHash.digest($0) }
        passed.token.withUnsafeBytes { token in
            self.batch.append(
                token: token,
                identifier: 0,
                connection: self.connection,
                // No apns-expiration: APNs stores the notification by its own policy, as long as the storage limit.
                expiry: passed.headers.expiration ?? .max,
                priority: passed.headers.priority?.rawValue ?? 10,
                command: 3,
                digest: digest
            )
        }
        return (200, nil, [])
    }

    /// The verdict on a provider token (`checkToken`), and the connection's binding to a key: the key of the first
    /// token accepted on a connection is its key, and a token signed by another key (a team-scoped key, then a
    /// topic-specific one) is refused with UnrelatedKeyIdInToken; a new connection takes it.
    private func verify(_ authorization: String) -> Result<ProviderTokenVerifier.Accepted, APNSReason> {
        let verdict = self.checkToken(authorization)
        guard case .success(let accepted) = verdict else { return verdict }
        if let bound = self.connectionKeyID, bound != accepted.keyID { return .failure(.unrelatedKeyIdInToken) }
        self.connectionKeyID = accepted.keyID
        return verdict
    }

    /// The verdict on a provider token, cached for the exact text last seen: the signature is checked once per
    /// token and connection, its age on every request.
    private func checkToken(_ authorization: String) -> Result<ProviderTokenVerifier.Accepted, APNSReason> {
        if let cached = self.cachedToken, cached.text == authorization {
            if case .success(let accepted) = cached.verdict,
                Int64(self.shared.clock.now()) - accepted.issuedAt > ProviderTokenVerifier.maximumAge
            {
                return .failure(.expiredProviderToken)
            }
            return cached.verdict
        }
        guard authorization.hasPrefix("bearer ") else { return .failure(.invalidProviderToken) }
        let verdict = self.shared.verifier.check(authorization.dropFirst("bearer ".count))
        self.cachedToken = (authorization, verdict)
        return verdict
    }

    private func write(_ answer: Answer, apnsID: String?, on streamID: UInt32) {
        let endStream = answer.body.isEmpty
        if var apnsID {
            apnsID.withUTF8 { id in
                HTTP2FrameWriter.responseHeaders(
                    status: answer.status,
                    apnsID: UnsafeRawBufferPointer(id),
                    retryAfter: answer.retryAfter,
                    streamID: streamID,
                    endStream: endStream,
                    into: &self.output
                )
            }
        } else {
            self.apnsIDs.withNext(using: &self.random) { id in
                HTTP2FrameWriter.responseHeaders(
                    status: answer.status,
                    apnsID: id,
                    retryAfter: answer.retryAfter,
                    streamID: streamID,
                    endStream: endStream,
                    into: &self.output
                )
            }
        }
        if endStream {
            self.openStreams -= 1
        } else {
            self.blocked.append(BlockedBody(streamID: streamID, bytes: answer.body, window: self.peerInitialWindow))
            self.sendBlockedBodies()
        }
    }

    /// A channel management or broadcast answer: its own header block (`BroadcastResponse.headerBlock`), then its
    /// body, if any, under flow control.
    private func write(_ response: BroadcastResponse, on streamID: UInt32) {
        let endStream = response.body.isEmpty
        HTTP2FrameWriter.headerBlock(
            response.headerBlock(allocator: ByteBufferAllocator()),
            streamID: streamID,
            flags: endStream ? 0x1 : 0,
            into: &self.output
        )
        if endStream {
            self.openStreams -= 1
        } else {
            self.blocked.append(BlockedBody(streamID: streamID, bytes: response.body, window: self.peerInitialWindow))
            self.sendBlockedBodies()
        }
    }

    /// Sends answer bodies in order while the connection's and their stream's windows allow: whole when they fit
    /// (every error body), and a body longer than a frame (a channel list) frame by frame as the windows open.
    private func sendBlockedBodies() {
        while var first = self.blocked.first {
            let room = min(self.sendWindow, first.window, Self.maximumDataFrame)
            if first.bytes.count > room {
                guard first.bytes.count > Self.maximumDataFrame, room > 0 else { return }
                let chunk = Array(first.bytes[..<room])
                HTTP2FrameWriter.data(chunk, streamID: first.streamID, endStream: false, into: &self.output)
                first.bytes.removeFirst(room)
                first.window -= room
                self.sendWindow -= room
                self.blocked[self.blocked.startIndex] = first
                continue
            }
            self.blocked.removeFirst()
            self.sendWindow -= first.bytes.count
            HTTP2FrameWriter.data(first.bytes, streamID: first.streamID, endStream: true, into: &self.output)
            self.openStreams -= 1
        }
    }

    private func applyConnectionFaults() {
        let faults = self.shared.faults
        if let after = faults.shrinkAfterStreams, self.requests == after {
            self.fullLimit = faults.shrinkTo
            self.announce(faults.shrinkTo)
        }
        if let after = faults.restoreAfterStreams, self.requests == after {
            self.fullLimit = self.shared.maximumConcurrentStreams
            self.announce(self.fullLimit)
        }
        if let at = self.restoreLimitAt, self.requests >= at {
            self.restoreLimitAt = nil
            self.fullLimit = self.shared.maximumConcurrentStreams
            self.announce(self.fullLimit)
        } else if self.restoreLimitAt == nil, faults.shrinkRate > 0, self.random.chance(faults.shrinkRate) {
            self.restoreLimitAt = self.requests + faults.shrinkForStreams
            self.fullLimit = faults.shrinkTo
            self.announce(faults.shrinkTo)
        }
        guard self.goAwayStreamID == nil else { return }
        if let after = faults.goAwayAfterStreams, self.requests == after {
            self.goAway()
        } else if faults.goAwayRate > 0, self.random.chance(faults.goAwayRate) {
            self.goAway()
        }
    }

    /// GOAWAY (NO_ERROR) naming the highest stream answered: every stream up to it is (or will be) answered; later
    /// ones, in flight, are dropped unprocessed, and the client sends them again elsewhere.
    private func goAway() {
        let last = self.highestAnswered
        self.goAwayStreamID = last
        for streamID in self.streams.keys where streamID > last {
            self.streams.removeValue(forKey: streamID)
            self.openStreams -= 1
        }
        HTTP2FrameWriter.goAway(lastStreamID: last, code: .noError, into: &self.output)
    }
}
