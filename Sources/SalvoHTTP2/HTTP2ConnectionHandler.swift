import APNSWire
import NIOCore
import NIOHPACK
import NIOHTTP2
import SalvoRows

/// The `nio` engine's codec: turns NIOHTTP2's frames and events into its `HTTP2ConnectionMachine`'s events, and
/// writes what the machine's actions ask for as NIOHTTP2 frames (HEADERS + DATA on new streams, one flush per
/// batch; PINGs; resets). Driving the machine is shared with the `wire` engine (`HTTP2ConnectionCodec`).
///
/// Sits behind `NIOHTTP2Handler` (frame level, no stream channels: a stream is a dictionary entry in the
/// machine, not a child channel), which keeps the frame-level protocol state (windows, SETTINGS, HPACK) itself.
/// Confined to its channel's event loop; not `Sendable`.
final class HTTP2ConnectionHandler: ChannelInboundHandler, HTTP2ConnectionCodec {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    var core: HTTP2ConnectionDriverCore
    /// Decides the inbound connection window's top-ups (NIOHTTP2 keeps the rest of the frame-level state).
    private let framing = HTTP2FramingState()

    /// - Parameters:
    ///   - firstStreamID: the first stream's id: 1, or near the end of the id space in tests.
    ///   - random: this connection's generator (backoff jitter).
    init(job: HTTP2JobContext, firstStreamID: Int32 = 1, random: SplitMix64) {
        self.core = HTTP2ConnectionDriverCore(job: job, firstStreamID: firstStreamID, random: random)
    }

    private var machine: HTTP2ConnectionMachine {
        get { self.core.machine }
        _modify { yield &self.core.machine }
    }

    /// What the `NIOHTTP2Handler` in front of this one is set up with: push off, 1 MiB stream windows, and answers'
    /// header blocks read up to `HTTP2AnswerDecoder.maximumHeaderList` bytes over as many CONTINUATION frames as that
    /// takes (a larger header block than APNs sends is read, not a connection error that loses the answers).
    static var `protocol`: NIOHTTP2Handler.ConnectionConfiguration {
        var configuration = NIOHTTP2Handler.ConnectionConfiguration()
        configuration.initialSettings = [
            HTTP2Setting(parameter: .enablePush, value: 0),
            HTTP2Setting(parameter: .maxConcurrentStreams, value: 0),
            HTTP2Setting(parameter: .initialWindowSize, value: HTTP2FramingState().windowTarget),
            HTTP2Setting(parameter: .maxHeaderListSize, value: HTTP2AnswerDecoder.maximumHeaderList),
        ]
        // Enough CONTINUATION frames of 1 KiB for the whole list: a server may cut its blocks small.
        configuration.maximumSequentialContinuationFrames = HTTP2AnswerDecoder.maximumHeaderList / 1024
        // Answers to streams this client reset (their request timed out) are passed over only while NIOHTTP2 still
        // remembers the reset, 32 streams by default: a stall that timed out more streams than that, then answered
        // them, ended the connection with a protocol error and sent its rows in flight again. Every stream a server
        // lets a connection have (APNs announces 500-1,500) is remembered.
        configuration.maximumRecentlyResetStreams = Self.rememberedResets
        // The request headers are built by `HTTP2RequestTemplate`, valid by construction; checking them again costs
        // a few percent per request.
        configuration.headerBlockValidation = .disabled
        configuration.contentLengthValidation = .disabled
        return configuration
    }

    /// The streams reset by this client whose late frames NIOHTTP2 passes over (`protocol`).
    static let rememberedResets = 10_000

    func handlerAdded(context: ChannelHandlerContext) { self.driverAdded(context: context) }

    func handlerRemoved(context: ChannelHandlerContext) { self.driverRemoved() }

    func channelActive(context: ChannelHandlerContext) {
        self.driverActive(context: context)
        // The first WINDOW_UPDATE raises the connection window from 64 KiB, so error bodies never stall.
        let increment = self.framing.initialWindowUpdate
        let frame = HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: increment))
        context.writeAndFlush(self.wrapOutboundOut(frame), promise: nil)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.driverInactive()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = self.unwrapInboundIn(data)
        let now = self.core.job.now()
        let id = Int32(Int(frame.streamID))
        switch frame.payload {
        case .headers(let headers):
            let fields = headers.headers
            self.perform(
                self.machine.headersReceived(
                    streamID: id,
                    status: fields.first(name: ":status").flatMap { Int($0) },
                    apnsID: fields.first(name: "apns-id"),
                    apnsUniqueID: fields.first(name: "apns-unique-id"),
                    retryAfter: fields.first(name: "retry-after").flatMap { Int64($0) },
                    endStream: headers.endStream,
                    now: now
                )
            )
        case .data(let data):
            guard case .byteBuffer(let bytes) = data.data else { return self.machine.frameReceived(now: now) }
            self.perform(self.machine.dataReceived(streamID: id, bytes: bytes, endStream: data.endStream, now: now))
        case .rstStream(let code):
            self.perform(self.machine.streamClosed(streamID: id, code: code, now: now))
        case .settings(.settings(let settings)):
            let maximum = settings.last { $0.parameter == .maxConcurrentStreams }?.value
            let window = settings.last { $0.parameter == .initialWindowSize }?.value
            self.perform(
                self.machine.settingsReceived(maximumConcurrentStreams: maximum, initialWindowSize: window, now: now)
            )
        case .goAway(let lastStreamID, _, let opaqueData):
            let reason = opaqueData.flatMap { APNSErrorBody(jsonBytes: Array($0.readableBytesView))?.reason }
            self.perform(self.machine.goAwayReceived(lastStreamID: Int32(Int(lastStreamID)), reason: reason, now: now))
        case .ping(_, ack: true):
            self.perform(self.machine.pingAcknowledged(now: now))
        default:
            self.machine.frameReceived(now: now)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.driverReadComplete()
        context.fireChannelReadComplete()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        self.driverWritabilityChanged(context: context)
        context.fireChannelWritabilityChanged()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // NIOHTTP2 raises a few events per stream (created, window updated, closed); ours is the last handler,
        // so the per-stream ones stop here rather than walk on to the pipeline's tail.
        switch event {
        case let closed as StreamClosedEvent:
            // A stream the protocol layer closed before its answer reached us (a stream error, or the streams a
            // GOAWAY cut off); a stream that got its answer is already gone from the machine.
            let id = Int32(Int(closed.streamID))
            self.perform(
                self.machine.streamClosed(streamID: id, code: closed.reason ?? .cancel, now: self.core.job.now())
            )
        case let window as NIOHTTP2WindowUpdatedEvent:
            if window.streamID == .rootStream, let size = window.inboundWindowSize,
                case .windowUpdate(let increment) = self.framing.inboundWindowChanged(to: size)
            {
                let frame = HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: increment))
                context.writeAndFlush(self.wrapOutboundOut(frame), promise: nil)
            }
        case is NIOHTTP2StreamCreatedEvent:
            break
        default:
            self.driverEvent(event)
            context.fireUserInboundEventTriggered(event)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        // Stream errors only end their stream (the StreamClosedEvent settles it); anything else ends the
        // connection.
        if error is NIOHTTP2Errors.StreamError { return }
        self.driverFailed(error)
    }

    // MARK: The codec

    func flushOutput() { self.core.context?.flush() }

    func writeResetStream(_ streamID: Int32) {
        let frame = HTTP2Frame(streamID: HTTP2StreamID(streamID), payload: .rstStream(.cancel))
        self.core.context?.write(self.wrapOutboundOut(frame), promise: nil)
    }

    func writePing() {
        let frame = HTTP2Frame(streamID: .rootStream, payload: .ping(HTTP2PingData(withInteger: 1), ack: false))
        self.core.context?.write(self.wrapOutboundOut(frame), promise: nil)
    }

    func closeConnection(context: ChannelHandlerContext) { context.close(promise: nil) }

    /// NIOHTTP2 keeps the flow-control windows and queues what they do not take.
    func admit(room: Int) -> (requests: Int, bytes: Int) { (room, Int.max) }

    func writeRequests(
        _ items: [HTTP2WorkItem],
        firstStreamID: Int32,
        bearer: ProviderToken.Bearer?,
        context: ChannelHandlerContext
    ) {
        let template = self.core.job.template
        let payload = HTTP2Frame.FramePayload.data(.init(data: .byteBuffer(template.payload), endStream: true))
        var id = Int(firstStreamID)
        for item in items {
            let streamID = HTTP2StreamID(Int32(id))
            let headers = template.headers(
                token: item.row.token,
                authorization: bearer?.authorization,
                bodyLength: item.payload?.readableBytes,
                rowHeaders: item.headers
            )
            context.write(
                self.wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers)))),
                promise: nil
            )
            // A row's own body (a payload template's rendering), or the job's one payload.
            let body = item.payload.map { HTTP2Frame.FramePayload.data(.init(data: .byteBuffer($0), endStream: true)) }
            context.write(self.wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: body ?? payload)), promise: nil)
            id += 2
        }
        context.flush()
    }
}
