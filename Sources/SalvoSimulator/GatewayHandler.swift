import APNSWire
import NIOCore
import NIOSSL
import NIOTLS

/// One gateway connection: decodes frames of commands 0, 1 and 2 straight from the inbound
/// buffers, checks each notification, records the accepted ones and answers the first bad one
/// with `8|status|identifier` before closing.
///
/// Per notification it copies one 64-byte record into the connection's `LedgerBatch` and hashes
/// the payload: no allocation, no lock. The batch goes to the shared ledger once per read.
/// After an error (or a planned reset or shutdown) every later frame on the connection is read,
/// counted as discarded and dropped. Confined to its channel's event loop.
final class GatewayHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private enum State {
        case open
        /// An error, shutdown or reset happened: everything after it is discarded.
        case failed
    }

    private let plan: CompiledFaultPlan
    private let ledger: DeliveryLedger
    private let connection: UInt32
    private let resetter: ConnectionResetHandler
    private let decoder = FrameDecoder()
    private let batch = LedgerBatch()
    private var progress: Progress
    /// The notification (1-based, on this connection) at which a doomed connection resets; 0 = never.
    private var resetAtNotification = 0
    private var topic: PeerTopic?
    private var state = State.open
    private var cumulation: ByteBuffer?
    private var framingLost = false
    private var readBytes = 0
    private var readDiscarded = 0

    /// What the decode loop changes per notification. The loop works on a local copy: every
    /// access to a class's stored `var` costs a dynamic exclusivity check, a local costs nothing.
    private struct Progress {
        var random: SeededGenerator
        var seen = 0
        var accepted = 0
        var acceptedInRead = 0
        var lastAcceptedIdentifier: UInt32 = 0
    }

    init(
        plan: CompiledFaultPlan,
        ledger: DeliveryLedger,
        connection: UInt32,
        resetter: ConnectionResetHandler
    ) {
        self.plan = plan
        self.ledger = ledger
        self.connection = connection
        self.resetter = resetter
        var random = SeededGenerator(seed: plan.plan.seed, stream: UInt64(connection))
        let reset = plan.plan.reset
        if reset.scope == .connection && random.chance(reset.probability) {
            self.resetAtNotification = Int.random(in: 1...max(1, reset.withinNotifications), using: &random)
        }
        self.progress = Progress(random: random)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .handshakeCompleted = event as? TLSUserEvent {
            self.topic = Self.peerTopic(context)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = self.unwrapInboundIn(data)
        self.readBytes += buffer.readableBytes
        if var cumulation = self.cumulation {
            self.cumulation = nil
            cumulation.writeBuffer(&buffer)
            buffer = cumulation
        }
        if self.state == .open {
            if self.topic == nil { self.topic = Self.peerTopic(context) }
            self.decodeAndCheck(&buffer, context: context)
        }
        if self.state == .failed { self.countDiscarded(&buffer) }
        if buffer.readableBytes > 0 {
            // Keep only the partial frame; a fresh copy lets the large read buffer go.
            self.cumulation = buffer.readableBytes < 4096 ? ByteBuffer(buffer: buffer) : buffer
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.flushRead()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.flushRead()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        // A handshake that fails (no client certificate, one from another CA) is a refused
        // connection; errors after a planned reset or an error response are expected noise.
        if self.topic == nil && self.progress.seen == 0 && error is NIOSSLError {
            self.ledger.recordConnectionRefused(reason: "tls")
        }
        context.close(promise: nil)
    }

    private func decodeAndCheck(_ buffer: inout ByteBuffer, context: ChannelHandlerContext) {
        var progress = self.progress
        defer { self.progress = progress }
        let topicStatus = self.topic?.errorStatus ?? (self.topic == nil ? .missingTopic : nil)
        while let result = self.decoder.decode(&buffer) {
            switch result {
            case .notification(let notification):
                guard self.check(notification, topicStatus: topicStatus, progress: &progress, context: context) else {
                    return
                }
            case .malformed(let frame):
                self.fail(context, status: frame.status, identifier: frame.identifier, command: frame.command)
                return
            }
        }
    }

    /// Checks and accepts one notification; false when the connection failed on it.
    @inline(__always)
    private func check(
        _ notification: DecodedNotification,
        topicStatus: ErrorStatus?,
        progress: inout Progress,
        context: ChannelHandlerContext
    ) -> Bool {
        progress.seen += 1
        let reset = self.plan.plan.reset
        if progress.seen == self.resetAtNotification
            || (reset.scope == .notification && reset.probability > 0 && progress.random.chance(reset.probability))
        {
            self.state = .failed
            self.readDiscarded += 1
            self.ledger.mergeFullBatch(self.batch)
            self.ledger.recordReset()
            self.resetter.reset()
            return false
        }
        var status = topicStatus
        if status == nil && notification.token.withUnsafeBytes({ self.plan.isInvalid($0.baseAddress!) }) {
            status = .invalidToken
        }
        if status == nil && notification.priority == NotificationPriority.immediate.rawValue
            && notification.payload.withUnsafeReadableBytes({ Payload.isContentAvailableOnly($0) })
        {
            status = .processingError
        }
        if let status {
            self.fail(context, status: status, identifier: notification.identifier, command: notification.command)
            return false
        }
        self.accept(notification, progress: &progress)
        let shutdown = self.plan.plan.shutdown
        if (shutdown.everyAccepted > 0 && progress.accepted % shutdown.everyAccepted == 0)
            || (shutdown.probability > 0 && progress.random.chance(shutdown.probability))
        {
            // Status 10 names the last notification that was accepted: this one.
            self.fail(
                context,
                status: .shutdown,
                identifier: progress.lastAcceptedIdentifier,
                command: notification.command
            )
            return false
        }
        return true
    }

    @inline(__always)
    private func accept(_ notification: DecodedNotification, progress: inout Progress) {
        if self.batch.isFull { self.ledger.mergeFullBatch(self.batch) }
        let digest = notification.payload.withUnsafeReadableBytes { TokenHash.digest($0) }
        notification.token.withUnsafeBytes { token in
            self.batch.append(
                token: token,
                identifier: notification.identifier,
                connection: self.connection,
                expiry: notification.expiry,
                priority: notification.priority,
                command: notification.command.rawValue,
                digest: digest
            )
        }
        progress.accepted += 1
        progress.acceptedInRead += 1
        progress.lastAcceptedIdentifier = notification.identifier
    }

    /// Answers `status` for `identifier` (command 0: no answer, just a close), after the plan's
    /// error delay, and closes. Notifications read meanwhile are discarded.
    private func fail(_ context: ChannelHandlerContext, status: ErrorStatus, identifier: UInt32, command: FrameCommand?)
    {
        self.state = .failed
        // Accepted notifications reach the ledger before the sender can see the error.
        self.ledger.mergeFullBatch(self.batch)
        var response: ByteBuffer?
        if command == .simple {
            self.ledger.recordClosedWithoutResponse()
        } else {
            self.ledger.recordErrorResponse(status: status.rawValue)
            var out = context.channel.allocator.buffer(capacity: ErrorResponse.byteCount)
            ErrorResponse(status: status, identifier: identifier).write(to: &out)
            response = out
        }
        let answer = {
            // A delayed answer may find the connection already closed by the peer.
            guard context.channel.isActive else { return }
            if let response {
                context.writeAndFlush(self.wrapOutboundOut(response)).assumeIsolated().whenComplete { _ in
                    context.close(promise: nil)
                }
            } else {
                context.close(promise: nil)
            }
        }
        let delay = self.plan.plan.errorDelayMilliseconds
        if delay > 0 {
            context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(Int64(delay)), answer)
        } else {
            answer()
        }
    }

    /// Reads and counts the frames after a failure; once framing is lost the rest is dropped.
    private func countDiscarded(_ buffer: inout ByteBuffer) {
        while !self.framingLost, let result = self.decoder.decode(&buffer) {
            self.readDiscarded += 1
            if case .malformed = result { self.framingLost = true }
        }
        if self.framingLost { buffer.moveReaderIndex(to: buffer.writerIndex) }
    }

    private func flushRead() {
        guard self.readBytes > 0 || self.batch.count > 0 || self.readDiscarded > 0 else { return }
        self.ledger.merge(
            self.batch,
            bytes: self.readBytes,
            accepted: self.progress.acceptedInRead,
            discarded: self.readDiscarded
        )
        self.readBytes = 0
        self.progress.acceptedInRead = 0
        self.readDiscarded = 0
    }

    private static func peerTopic(_ context: ChannelHandlerContext) -> PeerTopic? {
        guard let handler = try? context.pipeline.syncOperations.handler(type: NIOSSLServerHandler.self) else {
            return nil
        }
        return PeerTopic(peerCertificate: handler.peerCertificate)
    }
}
