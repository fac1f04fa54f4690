import APNSWire
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS
import SalvoTestSupport

/// A load generator for measuring the gateway: one TLS connection that writes `count` command-2
/// frames as fast as the socket takes them, then a barrier frame (no token) whose error response
/// proves the gateway has read and validated everything before it.
///
/// It is not a sender (it has no journal and never retries): it exists to measure the simulator,
/// with frames pre-encoded through APNSWire's `FrameTemplate`, written in large batches and paced
/// by channel writability. Runs on its own event loop group so that it does not share the
/// simulator's threads.
public enum GatewayBlast {
    /// What one blast measured.
    public struct Result: Sendable, Codable {
        public var notifications: Int
        public var bytes: Int
        /// From the first write to the barrier's error response.
        public var seconds: Double
        /// The barrier's answer: 8 | 2 | count + 1 when all went well.
        public var response: [UInt8]
        public var notificationsPerSecond: Double { Double(self.notifications) / self.seconds }
    }

    /// Sends `count` notifications (tokens cycle through `distinctTokens` values) with `payload`
    /// to the gateway at `host`:`port`, identified by `identity`, trusting `caPEM`.
    public static func run(
        host: String = "127.0.0.1",
        port: Int,
        identity: CertificateFactory.Identity,
        caPEM: String,
        count: Int,
        distinctTokens: Int,
        payload: Payload,
        batchFrames: Int = 4096
    ) async throws -> Result {
        let template = try FrameTemplate(command: .framed, payload: payload, priority: .immediate)
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates([try NIOSSLCertificate(bytes: Array(caPEM.utf8), format: .pem)])
        tls.certificateVerification = .noHostnameVerification
        tls.certificateChain = [
            .certificate(try NIOSSLCertificate(bytes: Array(identity.certificatePEM.utf8), format: .pem))
        ]
        tls.privateKey = .privateKey(try NIOSSLPrivateKey(bytes: Array(identity.privateKeyPEM.utf8), format: .pem))
        let context = try NIOSSLContext(configuration: tls)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { group.shutdownGracefully { _ in } }
        let done = group.next().makePromise(of: Result.self)
        let channel = try await ClientBootstrap(group: group)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelOption(.writeBufferWaterMark, value: .init(low: 1 << 20, high: 4 << 20))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        NIOSSLClientHandler(context: context, serverHostname: nil)
                    )
                    try channel.pipeline.syncOperations.addHandler(
                        Pump(
                            template: template,
                            count: count,
                            distinctTokens: max(1, distinctTokens),
                            batchFrames: batchFrames,
                            done: done
                        )
                    )
                }
            }
            .connect(host: host, port: port)
            .get()
        let result = try await done.futureResult.get()
        try? await channel.close()
        return result
    }

    /// Writes batches while the channel is writable; collects the response. Confined to its loop.
    private final class Pump: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer

        private let template: FrameTemplate
        private let count: Int
        private let distinctTokens: Int
        private let batchFrames: Int
        private let done: EventLoopPromise<Result>
        private var sent = 0
        private var bytes = 0
        private var started: NIODeadline?
        private var response: [UInt8] = []
        private var finished = false

        init(template: FrameTemplate, count: Int, distinctTokens: Int, batchFrames: Int, done: EventLoopPromise<Result>)
        {
            self.template = template
            self.count = count
            self.distinctTokens = distinctTokens
            self.batchFrames = batchFrames
            self.done = done
        }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            // Until the handshake is done the TLS handler buffers every write without making the
            // channel unwritable, so pumping earlier would encode the whole blast into memory first.
            if case .handshakeCompleted = event as? TLSUserEvent, self.started == nil {
                self.started = .now()
                self.pump(context)
            }
            context.fireUserInboundEventTriggered(event)
        }

        func channelWritabilityChanged(context: ChannelHandlerContext) {
            if self.started != nil { self.pump(context) }
            context.fireChannelWritabilityChanged()
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let buffer = self.unwrapInboundIn(data)
            self.response += buffer.readableBytesView
            if self.response.count >= ErrorResponse.byteCount { self.finish(context) }
        }

        func channelInactive(context: ChannelHandlerContext) {
            self.finish(context)
            context.fireChannelInactive()
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            if !self.finished {
                self.finished = true
                self.done.fail(error)
            }
            context.close(promise: nil)
        }

        private func finish(_ context: ChannelHandlerContext) {
            guard !self.finished else { return }
            self.finished = true
            let seconds = Double((NIODeadline.now() - (self.started ?? .now())).nanoseconds) / 1e9
            self.done.succeed(
                Result(notifications: self.sent, bytes: self.bytes, seconds: seconds, response: self.response)
            )
        }

        private func pump(_ context: ChannelHandlerContext) {
            while context.channel.isWritable && self.sent < self.count {
                let frames = min(self.batchFrames, self.count - self.sent)
                let size = self.template.frameByteCount
                var buffer = context.channel.allocator.buffer(capacity: frames * size)
                let first = self.sent
                // The buffer holds the whole batch, so each `write` is one copy and two patches, no growth.
                var raw = [UInt8](repeating: 0, count: DeviceToken.byteCount)
                for index in 0..<frames {
                    let n = UInt64((first + index) % self.distinctTokens)
                    let token = raw.withUnsafeMutableBytes { bytes in
                        // Spread the index over the token so every word differs; first byte even.
                        bytes.storeBytes(of: (n &* 0x9E37_79B9_7F4A_7C15) & ~1, toByteOffset: 0, as: UInt64.self)
                        bytes.storeBytes(of: n, toByteOffset: 8, as: UInt64.self)
                        bytes.storeBytes(of: n ^ 0x5A5A_5A5A, toByteOffset: 16, as: UInt64.self)
                        bytes.storeBytes(of: ~n, toByteOffset: 24, as: UInt64.self)
                        return DeviceToken(unsafeBytes: UnsafeRawBufferPointer(bytes))
                    }
                    self.template.write(
                        token: token,
                        identifier: UInt32(truncatingIfNeeded: first + index + 1),
                        to: &buffer
                    )
                }
                self.sent += frames
                self.bytes += buffer.readableBytes
                context.write(self.wrapOutboundOut(buffer), promise: nil)
                if self.sent == self.count {
                    // The barrier: no token, so the gateway answers 8 | 2 | count + 1 once it got here.
                    var barrier = context.channel.allocator.buffer(capacity: 16)
                    BarrierFrame.write(
                        command: .framed,
                        identifier: UInt32(truncatingIfNeeded: self.count + 1),
                        to: &barrier
                    )
                    context.write(self.wrapOutboundOut(barrier), promise: nil)
                }
                context.flush()
            }
        }
    }
}
