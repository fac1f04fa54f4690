import APNSWire
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
/// It speaks HTTP/2 itself on the bytes TLS (or, on the cleartext port, TCP) delivers, and is the I/O shell around
/// the values that decide: `HTTP2FrameReader` cuts the frames, `HTTP2ConnectionState` says what they mean
/// (settings, streams, windows, requests assembled; the frames it answers with collect in its output),
/// `HTTP2Answers` what each request gets from the checks and the plan, and `HTTP2ConnectionFaults` what the faults
/// decide. This handler feeds them the connection's events, records accepted notifications, schedules slow
/// answers, resets or closes the connection, and writes what they decide: answers are collected in one buffer and
/// written once per read.
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

    private let shared: Shared
    private let connection: UInt32
    /// Resets the connection (a TCP RST from below TLS); nil: a plain close stands in.
    private let resetter: ConnectionResetHandler?
    private var reader = HTTP2FrameReader()
    private var input = ByteBuffer()
    private var state: HTTP2ConnectionState
    private var faults: HTTP2ConnectionFaults
    private var answers: HTTP2Answers
    private var peer: PeerTopic?
    private var closed = false
    /// Answers scheduled for later (`responseDelayMilliseconds`): processed requests not yet answered.
    private var delayedAnswers = 0
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
        self.state = HTTP2ConnectionState(allocator: allocator)
        self.faults = HTTP2ConnectionFaults(
            faults: shared.faults,
            maximumConcurrentStreams: shared.maximumConcurrentStreams,
            seed: shared.seed,
            connection: connection
        )
        self.answers = HTTP2Answers(
            plan: shared.plan,
            uninstalled: shared.uninstalled,
            verifier: shared.verifier,
            clock: shared.clock
        )
    }

    func channelActive(context: ChannelHandlerContext) {
        // Over TLS the preface waits for the handshake, which tells whether the client has a certificate; without
        // TLS every request carries a provider token.
        if (try? context.pipeline.syncOperations.handler(type: NIOSSLServerHandler.self)) == nil {
            self.sendPreface(tokenAuthenticated: true, context: context)
        }
        context.fireChannelActive()
    }

    /// The server's SETTINGS and the first WINDOW_UPDATE (`HTTP2ConnectionFaults.prefaceLimit` says how many
    /// streams).
    private func sendPreface(tokenAuthenticated: Bool, context: ChannelHandlerContext) {
        self.state.writePreface(limit: self.faults.prefaceLimit(tokenAuthenticated: tokenAuthenticated))
        self.flush(context: context)
    }

    /// APNs' limit after an answer (`HTTP2ConnectionFaults.limit(afterStatus:)`), announced when it changes.
    private func followLimit(afterStatus status: Int) {
        if let limit = self.faults.limit(afterStatus: status) { self.state.announce(limit) }
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
        if case .handshakeCompleted = event as? TLSUserEvent, self.state.announcedLimit == nil {
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
        self.state.readComplete()
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
        switch try self.state.receive(frame) {
        case .nothing:
            break
        case .opening(let streamID, let headers, let endStream):
            if self.faults.resets(quiet: self.delayedAnswers == 0 && !self.state.hasBlockedBodies) {
                self.reset(context: context)
                return
            }
            switch self.state.open(streamID: streamID, headers: headers, endStream: endStream) {
            case .refused: self.shared.ledger.recordRefusedStream()
            case .receiving: break
            case .request(let request): self.answer(request, context: context)
            }
        case .request(let request):
            self.answer(request, context: context)
        }
    }

    private func fail(_ error: HTTP2ConnectionError, context: ChannelHandlerContext) {
        self.state.fail(error)
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
        guard self.state.output.readableBytes > 0 else { return }
        if self.resetter != nil, self.shared.faults.resetRate > 0 {
            // Writes complete in order: a reset waits for the last one, so every answer written reaches the socket.
            let written = context.eventLoop.makePromise(of: Void.self)
            context.writeAndFlush(self.wrapOutboundOut(self.state.output), promise: written)
            self.lastWrite = written.futureResult
        } else {
            context.writeAndFlush(self.wrapOutboundOut(self.state.output), promise: nil)
        }
        self.state.output = context.channel.allocator.buffer(capacity: 16 << 10)
    }

    /// After either side's GOAWAY, the connection closes once every accepted stream is answered.
    private func closeIfDone(context: ChannelHandlerContext) {
        guard !self.closed, self.state.isDone else { return }
        self.closed = true
        context.close(promise: nil)
    }

    // MARK: Requests

    private func answer(_ stream: HTTP2ConnectionState.Request, context: ChannelHandlerContext) {
        let streamID = stream.streamID
        let request = HTTP2Answers.Request(stream.headers)
        let credentials = self.answers.credentials(of: request, peer: self.peer)
        if let routes = self.shared.routes, routes.takes(path: request.path) {
            let response = routes.answer(
                method: request.method,
                path: request.path,
                fields: stream.headers.map { (name: $0.name, value: $0.value) },
                credentials: credentials,
                body: stream.payload,
                bodyBytes: stream.payloadBytes
            )
            self.followLimit(afterStatus: (200..<300).contains(response.status) ? 200 : response.status)
            self.state.writeResponse(
                headerBlock: response.headerBlock(allocator: ByteBufferAllocator()),
                body: response.body,
                on: streamID
            )
            return
        }
        let answer: HTTP2Answer
        var apnsID = request.apnsID
        switch self.answers.check(
            request,
            headers: stream.headers,
            credentials: credentials,
            payloadBytes: stream.payloadBytes
        ) {
        case .refused(let refusal, let echoesID):
            if !echoesID { apnsID = nil }
            answer = refusal
        case .passed(let passed):
            if let refusal = self.answers.refusal(of: passed) {
                answer = refusal
            } else if let error = self.faults.injectedError() {
                answer = error
            } else {
                self.accept(passed, payload: stream.payload)
                answer = .accepted
            }
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
        let goAway = self.faults.afterRequest(self.state.requests, goAwaySent: self.state.goAwayStreamID != nil) {
            self.state.announce($0)
        }
        if goAway { self.state.goAway() }
    }

    /// Records an accepted notification: in the ledger's batch, and a Live Activity's on the device side.
    private func accept(_ passed: HTTP2RequestCheck.Passed, payload: ByteBuffer) {
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
    }

    private func write(_ answer: HTTP2Answer, apnsID: String?, on streamID: UInt32) {
        self.answers.withAPNSID(echoing: apnsID, using: &self.faults.random) { id in
            self.state.writeAnswer(answer, apnsID: id, on: streamID)
        }
    }
}
