import APNSWire
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOTLS
import SalvoEngine

/// Speaks HTTP/2 on one connection by itself (the `wire` engine) and drives its `HTTP2ConnectionStateMachine`
/// exactly as `HTTP2ConnectionHandler` does behind `NIOHTTP2Handler`: the same events, the same actions, so rows
/// end the same way with either engine.
///
/// Hand-written rather than `NIOHTTP2Handler`: a bulk sender on two cores shared with the server spends most of
/// its time in NIOHTTP2's per-stream upkeep (a stream state machine, flow-control windows and events per stream,
/// an HPACK encode of every header per request, a write per frame). A request here is a few stores into one
/// output buffer: a HEADERS frame whose block is the `:path` literal followed by the rest of the headers,
/// encoded once per connection and token (HPACK dynamic-table indices after the first request), and a DATA frame
/// with the shared payload; one write and one flush per batch, so TLS seals one record per 16 KiB. Frames are
/// cut by APNSWire's `HTTP2FrameReader` (the simulator's server uses the same), header blocks are decoded with
/// NIOHPACK.
///
/// What this handler keeps of the protocol beyond the machine (RFC 9113): the client preface and SETTINGS, SETTINGS
/// and PING acknowledgements, the peer's `SETTINGS_HEADER_TABLE_SIZE` and `SETTINGS_INITIAL_WINDOW_SIZE`, the
/// connection's send window (a request is written only when its whole DATA fits; WINDOW_UPDATE opens it), and the
/// receive window (topped up with WINDOW_UPDATE when half is used). Streams send all their DATA at once, so no
/// per-stream send window is kept; a peer whose stream window is smaller than one payload stops the job (the
/// machine decides it from SETTINGS; the default window is 64 KiB; an APNs payload is at most 5 KiB).
///
/// Answers' header blocks are read by `HTTP2AnswerDecoder`, up to the `SETTINGS_MAX_HEADER_LIST_SIZE` this client
/// announces: far above what APNs sends, so that a proxy's or gateway's larger headers on an answer are still read
/// rather than fail the connection and lose the answers.
///
/// Sits right after TLS (or alone in cleartext mode); reads and writes bytes. Confined to its channel's event
/// loop; not `Sendable`.
final class HTTP2WireConnectionHandler: ChannelInboundHandler, HTTP2ConnectionDriver {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// Called on the event loop when the connection takes no more rows (GOAWAY, stream ids used up): the pool
    /// opens a replacement.
    var onGoAway: (() -> Void)?
    /// Called on the event loop when the server's first SETTINGS arrive: TLS and HTTP/2 are up.
    var onReady: (() -> Void)?
    /// Whether the server's SETTINGS have arrived on this connection.
    var isReady: Bool { self.machine.isReady }
    /// Whether the connection read any answer.
    var answered: Bool { self.machine.answers > 0 }
    /// Why this connection failed before it was ready in a way retrying cannot heal, if it did.
    var hopeless: String?
    /// Whether the connection closed because the job had no row left for it.
    var finished: Bool { self.machine.finished }

    private let job: HTTP2JobContext
    private var machine: HTTP2ConnectionStateMachine
    private var context: ChannelHandlerContext?
    private var timer: Scheduled<Void>?
    private var wakeUp: Scheduled<Void>?

    /// Reads header blocks as large as the header list the client announces.
    private var reader = HTTP2FrameReader(fromServer: true, headerBlockLimit: HTTP2AnswerDecoder.maximumHeaderList)
    /// Whether this connection wrote a request yet (the job's start is timed by each connection's first).
    private var wroteFirst = false
    /// When TCP connected, to time the TLS handshake (the first measure of the distance, for the sizer).
    private var activeAt: NIODeadline?
    /// Bytes read and not yet cut into frames.
    private var inbound: ByteBuffer?
    /// Frames written since the last flush.
    private var outbound: ByteBuffer
    private var decoder: HTTP2AnswerDecoder
    private var encoder: HPACKEncoder
    /// The header block after `:path` for `blockAuthorization`, indexed fields only (the encoder's table holds
    /// their entries, and sending the block changes no table); nil until the first request, after the table size
    /// changed, when the table is too small to hold the headers, and while encoding them again would still insert.
    private var steadyBlock: ByteBuffer?
    private var blockAuthorization: String?

    /// The connection's send window (RFC 9113 §6.9): 65,535 until WINDOW_UPDATE opens it.
    private var sendWindow = 65_535
    /// The peer's `SETTINGS_INITIAL_WINDOW_SIZE`: each stream's send window.
    private var streamWindow = 65_535
    /// Inbound DATA since the last WINDOW_UPDATE we sent.
    private var received = 0
    /// Inbound connection and stream window: the connection's is topped up when half is used.
    private let windowTarget = 1 << 20
    private let payload: ByteBuffer

    /// - Parameters:
    ///   - firstStreamID: the first stream's id: 1, or near the end of the id space in tests.
    ///   - random: this connection's generator (backoff jitter).
    init(job: HTTP2JobContext, firstStreamID: Int32 = 1, random: SplitMix64) {
        self.job = job
        self.machine = HTTP2ConnectionStateMachine(
            configuration: job.connectionConfiguration,
            outcomes: job.emptyOutcomes,
            firstStreamID: firstStreamID,
            random: random,
            now: .now()
        )
        let allocator = ByteBufferAllocator()
        self.outbound = allocator.buffer(capacity: 16 << 10)
        self.decoder = HTTP2AnswerDecoder(allocator: allocator)
        self.encoder = HPACKEncoder(allocator: allocator)
        self.payload = job.template.payload
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        self.outbound = context.channel.allocator.buffer(capacity: 16 << 10)
    }

    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    func channelActive(context: ChannelHandlerContext) {
        self.activeAt = .now()
        self.machine.opened(now: .now())
        self.scheduleTick(context: context)
        self.outbound.writeBytes(HTTP2FrameReader.preface)
        HTTP2FrameWriter.settings(
            [
                (.enablePush, 0),
                (.maxConcurrentStreams, 0),
                (.initialWindowSize, UInt32(self.windowTarget)),
                (.maxHeaderListSize, UInt32(HTTP2AnswerDecoder.maximumHeaderList)),
            ],
            into: &self.outbound
        )
        // Raises the connection window from 64 KiB, so error bodies never stall.
        HTTP2FrameWriter.windowUpdate(streamID: 0, increment: self.windowTarget, into: &self.outbound)
        self.flush()
        context.fireChannelActive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted = event, let activeAt = self.activeAt {
            self.job.noteHandshake(NIODeadline.now() - activeAt)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.timer?.cancel()
        self.timer = nil
        self.wakeUp?.cancel()
        self.wakeUp = nil
        self.perform(self.machine.closed(now: .now()))
        self.job.connectionClosed(ObjectIdentifier(self))
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = self.unwrapInboundIn(data)
        if self.inbound == nil || self.inbound!.readableBytes == 0 {
            self.inbound = bytes
        } else {
            self.inbound!.writeBuffer(&bytes)
        }
        guard self.machine.state != .closed else { return }
        do {
            while var buffer = self.inbound {
                self.inbound = nil  // uniquely referenced while the reader advances it
                let frame = try self.reader.next(from: &buffer)
                self.inbound = buffer
                guard let frame else { break }
                try self.handle(frame)
            }
        } catch {
            self.inbound = nil
            HTTP2FrameWriter.goAway(lastStreamID: 0, code: error.code, into: &self.outbound)
            self.flush()
            self.perform(self.machine.failed("HTTP/2 protocol error from the server: \(error.message)", now: .now()))
            return
        }
        if self.inbound?.readableBytes == 0 {
            self.inbound = nil
        } else if (self.inbound?.readerIndex ?? 0) > 64 << 10 {
            self.inbound!.discardReadBytes()
        }
    }

    private func handle(_ frame: HTTP2FrameReader.Frame) throws(HTTP2ConnectionError) {
        let now = NIODeadline.now()
        switch frame {
        case .headers(let streamID, var block, let endStream):
            let fields = try self.decoder.decode(&block)
            self.perform(
                self.machine.headersReceived(
                    streamID: Int32(streamID),
                    status: fields.status,
                    apnsID: fields.apnsID,
                    retryAfter: fields.retryAfter,
                    endStream: endStream,
                    now: now
                )
            )
        case .data(let streamID, let payload, let endStream, let flowControlled):
            self.received += flowControlled
            self.perform(
                self.machine.dataReceived(streamID: Int32(streamID), bytes: payload, endStream: endStream, now: now)
            )
        case .resetStream(let streamID, let code):
            self.perform(
                self.machine.streamClosed(
                    streamID: Int32(streamID),
                    code: HTTP2ErrorCode(networkCode: Int(code)),
                    now: now
                )
            )
        case .settings(let settings):
            var maximum: Int?
            var initialWindow: Int?
            for (parameter, value) in settings {
                switch parameter {
                case .maxConcurrentStreams:
                    maximum = Int(value)
                case .initialWindowSize:
                    guard value <= UInt32(Int32.max) else {
                        throw HTTP2ConnectionError(.flowControlError, "SETTINGS_INITIAL_WINDOW_SIZE of \(value)")
                    }
                    self.streamWindow = Int(value)
                    initialWindow = Int(value)
                case .headerTableSize:
                    let size = min(Int(value), HPACKEncoder.defaultDynamicTableSize)
                    if size != self.encoder.allowedDynamicTableSize {
                        // The size update goes at the start of the next block, which the encoder writes.
                        try? self.encoder.setDynamicTableSize(size)
                        self.steadyBlock = nil
                        self.blockAuthorization = nil
                    }
                default:
                    break
                }
            }
            HTTP2FrameWriter.settingsAcknowledgement(into: &self.outbound)
            self.perform(
                self.machine.settingsReceived(
                    maximumConcurrentStreams: maximum,
                    initialWindowSize: initialWindow,
                    now: now
                )
            )
        case .settingsAcknowledged:
            self.machine.frameReceived(now: now)
        case .ping(let data):
            HTTP2FrameWriter.pingAcknowledgement(data, into: &self.outbound)
            self.machine.frameReceived(now: now)
        case .pingAcknowledged:
            self.perform(self.machine.pingAcknowledged(now: now))
        case .windowUpdate(let streamID, let increment):
            if streamID == 0 {
                self.sendWindow += increment
                guard self.sendWindow <= Int(Int32.max) else {
                    throw HTTP2ConnectionError(.flowControlError, "the connection window over 2^31 - 1")
                }
            } else if increment == 0 {
                // A stream error (RFC 9113 §6.9): that stream is reset, its answer will not come (the row may or
                // may not have been delivered), and the connection goes on. A stream already ended is left be.
                guard self.machine.isInFlight(streamID: Int32(streamID)) else { return }
                HTTP2FrameWriter.resetStream(streamID, code: .protocolError, into: &self.outbound)
                self.perform(
                    self.machine.streamClosed(streamID: Int32(streamID), code: .protocolError, now: now)
                )
                return
            }
            self.machine.frameReceived(now: now)
        case .goAway(let lastStreamID, _):
            let debug = self.reader.goAwayDebugData
            let reason =
                debug.readableBytes > 0 ? APNSErrorBody(jsonBytes: Array(debug.readableBytesView))?.reason : nil
            self.perform(self.machine.goAwayReceived(lastStreamID: Int32(lastStreamID), reason: reason, now: now))
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if self.received >= self.windowTarget / 2 {
            HTTP2FrameWriter.windowUpdate(streamID: 0, increment: self.received, into: &self.outbound)
            self.received = 0
        }
        self.perform(self.machine.readComplete())
        self.flush()
        context.fireChannelReadComplete()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            self.writeRequests()
            self.flush()
        }
        context.fireChannelWritabilityChanged()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        if self.hopeless == nil && !self.isReady {
            self.hopeless = HTTP2ConnectFailure.hopeless(connectionError: error)
        }
        self.perform(self.machine.failed("\(error)", now: .now()))
    }

    /// Writes what was gathered since the last flush, in one write.
    private func flush() {
        guard let context = self.context, self.outbound.readableBytes > 0 else { return }
        // Emptied before the write, not after: writing may come back into this handler (the socket takes the bytes
        // at once, the channel turns writable again, and `channelWritabilityChanged` writes and flushes the next
        // requests), and those must follow these, never carry them a second time. A buffer still referenced below
        // (TLS, the socket's queue) is left to them, and the next requests start a new one.
        let bytes = self.outbound
        self.outbound.clear()
        context.writeAndFlush(self.wrapOutboundOut(bytes), promise: nil)
    }

    /// Carries out the machine's actions, in the order `Actions` documents.
    private func perform(_ actions: HTTP2ConnectionStateMachine.Actions) {
        guard let context = self.context else { return }
        for id in actions.resetStreams {
            HTTP2FrameWriter.resetStream(UInt32(id), code: .cancel, into: &self.outbound)
        }
        if actions.sendPing {
            HTTP2FrameWriter.frameHeader(length: 8, type: 6, flags: 0, streamID: 0, into: &self.outbound)
            self.outbound.writeInteger(UInt64(1))
        }
        if actions.sendPing || !actions.resetStreams.isEmpty { self.flush() }
        if let note = actions.note { self.job.noteConnectionError(note) }
        if let stop = actions.stopJob { self.job.work.stop(stop) }
        if let renewal = actions.renewToken {
            let result = self.job.token?.renew(after: renewal.bearer) ?? .refused("no provider token to renew")
            self.perform(self.machine.tokenRenewed(renewal, result: result, now: .now()))
        }
        // The results go back before the connection closes, so the job never finishes without them.
        if actions.giveBack, let results = self.machine.takeResults() {
            self.job.record(results, from: ObjectIdentifier(self))
        }
        if actions.ready {
            self.onReady?()
            self.onReady = nil
        }
        if actions.retire {
            self.onGoAway?()
            self.onGoAway = nil
        }
        if actions.close {
            // Done with the job: the server is told so (GOAWAY, no error) in the close's flush.
            if self.machine.finished { HTTP2FrameWriter.goAway(lastStreamID: 0, code: .noError, into: &self.outbound) }
            self.flush()
            context.close(promise: nil)
        }
        if actions.writeRequests { self.writeRequests() }
    }

    /// Takes as many rows as the machine and the send window have room for and writes them into the output
    /// buffer; the caller flushes.
    private func writeRequests() {
        guard let context = self.context else { return }
        // Nothing in flight here and no row left for any connection: this one closes now, not with the last.
        if self.machine.openStreams == 0, self.job.work.noRowsLeft {
            self.perform(self.machine.noRowsLeft(now: .now()))
            return
        }
        var room = self.machine.roomToWrite(isWritable: context.channel.isWritable)
        // Rows with bodies of their own (a payload template) are checked against the stream window at the longest
        // they may be, and taken while their own bodies fit the send window.
        let rowBodies = self.job.work.maximumBodyLength
        let dataLength = rowBodies ?? self.payload.readableBytes
        if dataLength > 0 {
            // A stream's DATA goes whole: none is written into a stream window too small for it (the machine stops
            // the job when SETTINGS announce one).
            guard dataLength <= self.streamWindow else { return }
            if rowBodies == nil { room = min(room, self.sendWindow / dataLength) }
        }
        guard room > 0, self.sendWindow > 0 || dataLength == 0 else { return }
        let now = NIODeadline.now()
        let (items, rateLimited, nextDelayed) = self.job.take(
            room: room,
            maximumBytes: rowBodies == nil ? Int.max : self.sendWindow,
            now: now
        )
        guard !items.isEmpty else {
            guard !self.job.work.isDone else { return }
            self.scheduleWakeUp(at: self.machine.noRowsReady(now: now, nextDelayed: nextDelayed))
            return
        }
        let bearer = self.job.token?.current()
        let (first, actions) = self.machine.writing(items, bearer: bearer, now: now)
        var id = UInt32(first)
        var written = 0
        for item in items {
            let body = item.payload ?? self.payload
            self.writeRequest(streamID: id, token: item.row.token, authorization: bearer?.authorization, body: body)
            written += body.readableBytes
            id &+= 2
        }
        self.sendWindow -= written
        if !self.wroteFirst {
            self.wroteFirst = true
            self.job.noteFirstRequest(now: now)
        }
        self.perform(actions)
        // Held back by the rate: look again when the bucket has refilled, not only when answers come.
        if rateLimited, let slot = self.job.nextRateSlot(now: now) {
            self.scheduleWakeUp(at: self.machine.noRowsReady(now: now, nextDelayed: slot))
        }
    }

    /// One request: HEADERS (`:path`, then the block the other headers share, then `content-length`) and DATA with
    /// END_STREAM.
    private func writeRequest(streamID: UInt32, token: DeviceToken, authorization: String?, body: ByteBuffer) {
        let headerIndex = self.outbound.writerIndex
        let endStream: UInt8 = body.readableBytes == 0 ? 0x1 : 0
        HTTP2FrameWriter.frameHeader(
            length: 0,
            type: 1,
            flags: 0x4 | endStream,
            streamID: streamID,
            into: &self.outbound
        )
        let blockStart = self.outbound.writerIndex
        if let steady = self.steadyBlock, self.blockAuthorization == authorization {
            // `:path` as a literal without indexing with the static table's name (index 4): never the same twice,
            // so kept out of the dynamic table where it would evict the shared headers.
            self.outbound.writeInteger(UInt8(0x04))
            self.outbound.writeInteger(UInt8(Self.pathLength))
            Self.writePath(token, into: &self.outbound)
            self.outbound.writeImmutableBuffer(steady)
        } else {
            self.writeEncodedBlock(token: token, authorization: authorization)
        }
        Self.writeContentLength(body.readableBytes, into: &self.outbound)
        let blockLength = self.outbound.writerIndex - blockStart
        if blockLength <= Self.maximumFrameSize {
            self.outbound.setInteger(UInt32(blockLength) << 8 | 1, at: headerIndex)
        } else {
            self.splitHeaderBlock(frameAt: headerIndex, streamID: streamID, endStream: endStream)
        }
        guard endStream == 0 else { return }
        if body.readableBytes <= Self.maximumFrameSize {
            // Every APNs payload (at most 5 KiB): one frame.
            HTTP2FrameWriter.frameHeader(
                length: body.readableBytes,
                type: 0,
                flags: 0x1,
                streamID: streamID,
                into: &self.outbound
            )
            self.outbound.writeImmutableBuffer(body)
            return
        }
        var rest = body
        while let chunk = rest.readSlice(length: min(Self.maximumFrameSize, rest.readableBytes)) {
            let last: UInt8 = rest.readableBytes == 0 ? 0x1 : 0
            HTTP2FrameWriter.frameHeader(
                length: chunk.readableBytes,
                type: 0,
                flags: last,
                streamID: streamID,
                into: &self.outbound
            )
            self.outbound.writeImmutableBuffer(chunk)
            if last != 0 { break }
        }
    }

    /// The largest frame payload every peer takes: `SETTINGS_MAX_FRAME_SIZE` is never below 16,384 (RFC 9113
    /// §4.2, §6.5.2), and a larger one announced is not needed, so it is not followed.
    static let maximumFrameSize = 16_384

    /// Cuts the header block of the HEADERS frame at `headerIndex` (the last thing written) into HEADERS and
    /// CONTINUATION frames of at most `maximumFrameSize` bytes (§6.10). APNs' headers never come near it; a
    /// block this long would otherwise be a frame the peer refuses.
    private func splitHeaderBlock(frameAt headerIndex: Int, streamID: UInt32, endStream: UInt8) {
        let blockStart = headerIndex + 9
        // A slice of the output buffer's storage: the writes below copy the storage first, so it stays intact.
        let block = self.outbound.getSlice(at: blockStart, length: self.outbound.writerIndex - blockStart)!
        self.outbound.moveWriterIndex(to: headerIndex)
        HTTP2FrameWriter.headerBlock(
            block,
            streamID: streamID,
            flags: endStream,
            maximumFrameSize: Self.maximumFrameSize,
            into: &self.outbound
        )
    }

    /// `content-length` as a literal without indexing, named by the static table (index 28, RFC 7541 §6.2.2): the
    /// length differs from row to row with payload templates, so it stays out of the shared block and the table.
    private static func writeContentLength(_ length: Int, into buffer: inout ByteBuffer) {
        var count = 1
        var divisor = 1
        while length / divisor >= 10 {
            divisor *= 10
            count += 1
        }
        // 0000 1111 then 28 − 15 = 13: the name index continued past the 4-bit prefix.
        buffer.writeInteger(UInt8(0x0F))
        buffer.writeInteger(UInt8(13))
        buffer.writeInteger(UInt8(count))
        while divisor > 0 {
            buffer.writeInteger(UInt8(ascii: "0") + UInt8(length / divisor % 10))
            divisor /= 10
        }
    }

    /// A request's whole header block through the encoder (the first request, after the token or the table size
    /// changed, or always when the table cannot hold the shared headers): the encoder puts a table size update
    /// first, as RFC 7541 §4.2 requires, the shared headers enter its dynamic table, and `:path` stays out of it.
    ///
    /// Encoding the shared headers once more then gives the block later requests copy after their `:path`, which is
    /// valid only if it changes no table: indexed fields alone. It is not always so: a new `authorization` entering
    /// a small table evicts the oldest entries, among them shared headers this very block named by index, and a
    /// second encode would insert those again (a literal with incremental indexing). Sent with every request, such
    /// a block would make the server insert a duplicate each time that the encoder never knew of, and the indices
    /// of later blocks would name the wrong headers. So the second encode runs on a copy of the encoder, and the
    /// block is kept only when it is one indexed field per shared header; otherwise the encoder is left as the
    /// server's table is, and the next request is encoded in full again, until a block of indices verifies.
    private func writeEncodedBlock(token: DeviceToken, authorization: String?) {
        let shared = self.sharedHeaders(authorization: authorization)
        var headers = HPACKHeaders()
        headers.reserveCapacity(1 + shared.count)
        var path = ByteBuffer()
        Self.writePath(token, into: &path)
        headers.add(name: ":path", value: String(buffer: path), indexing: .nonIndexable)
        headers.add(contentsOf: shared)
        var block = ByteBuffer()
        do {
            try self.encoder.encode(headers: headers, to: &block)
            self.outbound.writeBuffer(&block)
            self.steadyBlock = nil
            self.blockAuthorization = nil
            // RFC 7541 §4.1: an entry takes its name, its value and 32 bytes. Counted for every shared header, also
            // those the static table holds: a table that cannot hold them all is not tried.
            let size = shared.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 32 }
            guard size <= self.encoder.allowedDynamicTableSize else { return }
            // A copy: the encoder is a value, and a block that fails the check must leave no trace in its table.
            var trial = self.encoder
            var steady = ByteBuffer()
            try trial.encode(headers: shared, to: &steady)
            guard Self.isIndexedFieldsOnly(steady, count: shared.count) else { return }
            self.steadyBlock = steady
            self.blockAuthorization = authorization
        } catch {
            // The encoder fails only when used wrongly (begun twice); nothing more to send then.
            self.job.noteConnectionError("HPACK encoding failed: \(error)")
        }
    }

    /// Whether `block` is exactly `count` indexed header fields (RFC 7541 §6.1: the high bit set, the index in a
    /// 7-bit prefix and continuation bytes), so that decoding it changes no table.
    static func isIndexedFieldsOnly(_ block: ByteBuffer, count: Int) -> Bool {
        var fields = 0
        var index = block.readerIndex
        let end = block.writerIndex
        while index < end {
            // Index 0 is not a field (§6.1).
            guard let first = block.getInteger(at: index, as: UInt8.self), first & 0x80 != 0, first != 0x80 else {
                return false
            }
            index += 1
            if first & 0x7F == 0x7F {
                // The index continues: 7 bits a byte while the high bit is set, up to a last byte without it.
                var ended = false
                while !ended, index < end, let next = block.getInteger(at: index, as: UInt8.self) {
                    index += 1
                    ended = next & 0x80 == 0
                }
                guard ended else { return false }
            }
            fields += 1
        }
        return index == end && fields == count
    }

    private func sharedHeaders(authorization: String?) -> HPACKHeaders {
        let template = self.job.template
        var headers = HPACKHeaders()
        headers.reserveCapacity(4 + template.fields.count)
        headers.add(name: ":method", value: "POST")
        headers.add(name: ":scheme", value: template.scheme)
        headers.add(name: ":authority", value: template.authority)
        if let authorization { headers.add(name: "authorization", value: authorization) }
        for field in template.fields { headers.add(name: field.name, value: field.value) }
        return headers
    }

    private static let pathLength = 10 + 2 * DeviceToken.byteCount

    /// `/3/device/<64 hex digits>`, written straight into the buffer.
    private static func writePath(_ token: DeviceToken, into buffer: inout ByteBuffer) {
        _ = buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: Self.pathLength) { out in
            let prefix: StaticString = "/3/device/"
            let base = out.baseAddress!.assumingMemoryBound(to: UInt8.self)
            base.initialize(from: prefix.utf8Start, count: 10)
            token.writeHex(to: base + 10)
            return 10 + 2 * DeviceToken.byteCount
        }
    }

    private func scheduleWakeUp(at deadline: NIODeadline?) {
        guard let deadline, let context = self.context else { return }
        self.wakeUp = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) {
            self.wakeUp = nil
            self.perform(self.machine.wokeUp())
            self.flush()
        }
    }

    /// One timer per connection, not one per request.
    private func scheduleTick(context: ChannelHandlerContext) {
        self.timer = context.eventLoop.assumeIsolated().scheduleTask(in: self.machine.tickInterval) {
            guard self.machine.state != .closed else { return }
            self.perform(self.machine.tick(now: .now()))
            self.flush()
            if let context = self.context { self.scheduleTick(context: context) }
        }
    }
}
