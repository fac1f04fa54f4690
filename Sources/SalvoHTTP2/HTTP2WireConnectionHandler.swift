import APNSWire
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOTLS
import SalvoRows

/// Speaks HTTP/2 on one connection by itself (the `wire` engine) and drives its `HTTP2ConnectionMachine`
/// exactly as `HTTP2ConnectionHandler` does behind `NIOHTTP2Handler`: the driving is theirs in common
/// (`HTTP2ConnectionCodec`), so rows end the same way with either engine; this type is only the codec.
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
/// The frame-level protocol state (RFC 9113: the send and stream windows, the peer's SETTINGS, the HPACK table
/// size, the receive window's top-ups, flow-control errors) is `HTTP2FramingState`'s, a value this handler feeds
/// and obeys; what it keeps itself is codec: the bytes not yet cut into frames, the output buffer, the HPACK
/// encoder and the header block it caches. A peer whose stream window is smaller than one payload stops the job
/// (the machine decides it from SETTINGS; the default window is 64 KiB; an APNs payload is at most 5 KiB).
///
/// Answers' header blocks are read by `HTTP2AnswerDecoder`, up to the `SETTINGS_MAX_HEADER_LIST_SIZE` this client
/// announces: far above what APNs sends, so that a proxy's or gateway's larger headers on an answer are still read
/// rather than fail the connection and lose the answers.
///
/// Sits right after TLS (or alone in cleartext mode); reads and writes bytes. Confined to its channel's event
/// loop; not `Sendable`.
final class HTTP2WireConnectionHandler: ChannelInboundHandler, HTTP2ConnectionCodec {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    var core: HTTP2ConnectionDriverCore

    /// Reads header blocks as large as the header list the client announces.
    private var reader = HTTP2FrameReader(fromServer: true, headerBlockLimit: HTTP2AnswerDecoder.maximumHeaderList)
    /// Windows, the peer's SETTINGS and the HPACK table size.
    private var framing = HTTP2FramingState()
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
    private let payload: ByteBuffer

    /// - Parameters:
    ///   - firstStreamID: the first stream's id: 1, or near the end of the id space in tests.
    ///   - random: this connection's generator (backoff jitter).
    init(job: HTTP2JobContext, firstStreamID: Int32 = 1, random: SplitMix64) {
        self.core = HTTP2ConnectionDriverCore(job: job, firstStreamID: firstStreamID, random: random)
        let allocator = ByteBufferAllocator()
        self.outbound = allocator.buffer(capacity: 16 << 10)
        self.decoder = HTTP2AnswerDecoder(allocator: allocator)
        self.encoder = HPACKEncoder(allocator: allocator)
        self.payload = job.template.payload
    }

    private var machine: HTTP2ConnectionMachine {
        get { self.core.machine }
        _modify { yield &self.core.machine }
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.driverAdded(context: context)
        self.outbound = context.channel.allocator.buffer(capacity: 16 << 10)
    }

    func handlerRemoved(context: ChannelHandlerContext) { self.driverRemoved() }

    func channelActive(context: ChannelHandlerContext) {
        self.driverActive(context: context)
        self.outbound.writeBytes(HTTP2FrameReader.preface)
        HTTP2FrameWriter.settings(self.framing.initialSettings, into: &self.outbound)
        HTTP2FrameWriter.windowUpdate(streamID: 0, increment: self.framing.initialWindowUpdate, into: &self.outbound)
        self.flushOutput()
        context.fireChannelActive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        self.driverEvent(event)
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.driverInactive()
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
            self.flushOutput()
            self.perform(
                self.machine.failed("HTTP/2 protocol error from the server: \(error.message)", now: self.core.job.now())
            )
            return
        }
        if self.inbound?.readableBytes == 0 {
            self.inbound = nil
        } else if (self.inbound?.readerIndex ?? 0) > 64 << 10 {
            self.inbound!.discardReadBytes()
        }
    }

    private func handle(_ frame: HTTP2FrameReader.Frame) throws(HTTP2ConnectionError) {
        let now = self.core.job.now()
        switch frame {
        case .headers(let streamID, var block, let endStream):
            let fields = try self.decoder.decode(&block)
            self.perform(
                self.machine.headersReceived(
                    streamID: Int32(streamID),
                    status: fields.status,
                    apnsID: fields.apnsID,
                    apnsUniqueID: fields.apnsUniqueID,
                    retryAfter: fields.retryAfter,
                    endStream: endStream,
                    now: now
                )
            )
        case .data(let streamID, let payload, let endStream, let flowControlled):
            self.framing.dataReceived(flowControlled: flowControlled)
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
            let changed = try self.framing.settingsReceived(settings)
            if let size = changed.headerTableSize {
                // The size update goes at the start of the next block, which the encoder writes.
                try? self.encoder.setDynamicTableSize(size)
                self.steadyBlock = nil
                self.blockAuthorization = nil
            }
            HTTP2FrameWriter.settingsAcknowledgement(into: &self.outbound)
            self.perform(
                self.machine.settingsReceived(
                    maximumConcurrentStreams: changed.maximumConcurrentStreams,
                    initialWindowSize: changed.initialWindowSize,
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
            let action = try self.framing.windowUpdateReceived(
                streamID: streamID,
                increment: increment,
                streamInFlight: self.machine.isInFlight(streamID: Int32(streamID))
            )
            switch action {
            case .resetStream(let id, let code):
                HTTP2FrameWriter.resetStream(id, code: code, into: &self.outbound)
                self.perform(
                    self.machine.streamClosed(
                        streamID: Int32(id),
                        code: HTTP2ErrorCode(networkCode: Int(code.rawValue)),
                        now: now
                    )
                )
            case .none, .windowUpdate:
                self.machine.frameReceived(now: now)
            }
        case .goAway(let lastStreamID, _):
            let debug = self.reader.goAwayDebugData
            let reason =
                debug.readableBytes > 0 ? APNSErrorBody(jsonBytes: Array(debug.readableBytesView))?.reason : nil
            self.perform(self.machine.goAwayReceived(lastStreamID: Int32(lastStreamID), reason: reason, now: now))
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if case .windowUpdate(let increment) = self.framing.readComplete() {
            HTTP2FrameWriter.windowUpdate(streamID: 0, increment: increment, into: &self.outbound)
        }
        self.driverReadComplete()
        context.fireChannelReadComplete()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        self.driverWritabilityChanged(context: context)
        context.fireChannelWritabilityChanged()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        self.driverFailed(error)
    }

    // MARK: The codec

    /// Writes what was gathered since the last flush, in one write.
    func flushOutput() {
        guard let context = self.core.context, self.outbound.readableBytes > 0 else { return }
        // Emptied before the write, not after: writing may come back into this handler (the socket takes the bytes
        // at once, the channel turns writable again, and `channelWritabilityChanged` writes and flushes the next
        // requests), and those must follow these, never carry them a second time. A buffer still referenced below
        // (TLS, the socket's queue) is left to them, and the next requests start a new one.
        let bytes = self.outbound
        self.outbound.clear()
        context.writeAndFlush(self.wrapOutboundOut(bytes), promise: nil)
    }

    func writeResetStream(_ streamID: Int32) {
        HTTP2FrameWriter.resetStream(UInt32(streamID), code: .cancel, into: &self.outbound)
    }

    func writePing() {
        HTTP2FrameWriter.frameHeader(length: 8, type: 6, flags: 0, streamID: 0, into: &self.outbound)
        self.outbound.writeInteger(UInt64(1))
    }

    func closeConnection(context: ChannelHandlerContext) {
        // Done with the job: the server is told so (GOAWAY, no error) in the close's flush.
        if self.machine.finished { HTTP2FrameWriter.goAway(lastStreamID: 0, code: .noError, into: &self.outbound) }
        self.flushOutput()
        context.close(promise: nil)
    }

    /// Rows with bodies of their own (a payload template) are checked against the stream window at the longest
    /// they may be, and taken while their own bodies fit the send window; the job's one payload, as many as the
    /// send window holds whole.
    func admit(room: Int) -> (requests: Int, bytes: Int) {
        let rowBodies = self.core.job.work.maximumBodyLength
        return self.framing.admits(
            room: room,
            fixedBody: rowBodies == nil ? self.payload.readableBytes : nil,
            longestBody: rowBodies ?? 0
        )
    }

    func writeRequests(
        _ items: [HTTP2WorkItem],
        firstStreamID: Int32,
        bearer: ProviderToken.Bearer?,
        context: ChannelHandlerContext
    ) {
        var id = UInt32(firstStreamID)
        var written = 0
        for item in items {
            let body = item.payload ?? self.payload
            self.writeRequest(
                streamID: id,
                token: item.row.token,
                authorization: bearer?.authorization,
                rowHeaders: item.headers,
                body: body
            )
            written += body.readableBytes
            id &+= 2
        }
        self.framing.wrote(bodyBytes: written)
    }

    /// One request: HEADERS (`:path`, then the block the other headers share, then the row's own headers, then
    /// `content-length`) and DATA with END_STREAM.
    private func writeRequest(
        streamID: UInt32,
        token: DeviceToken,
        authorization: String?,
        rowHeaders: HTTP2RowHeaders?,
        body: ByteBuffer
    ) {
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
        if let rowHeaders {
            for field in rowHeaders.fields {
                Self.writeLiteral(name: field.name, value: field.value, into: &self.outbound)
            }
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

    /// The largest frame payload every peer takes (`HTTP2FramingState.maximumFrameSize`).
    static let maximumFrameSize = HTTP2FramingState.maximumFrameSize

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

    /// A row's own header as a literal without indexing with a literal name (RFC 7541 §6.2.2): it changes no table,
    /// so the block the shared headers reuse stays valid, and a value seen once (`apns-id`) evicts nothing.
    static func writeLiteral(name: String, value: String, into buffer: inout ByteBuffer) {
        buffer.writeInteger(UInt8(0))
        Self.writeStringLength(name.utf8.count, into: &buffer)
        buffer.writeString(name)
        Self.writeStringLength(value.utf8.count, into: &buffer)
        buffer.writeString(value)
    }

    /// A string's length as an HPACK integer with a 7-bit prefix and no Huffman coding (RFC 7541 §5.1, §5.2).
    private static func writeStringLength(_ length: Int, into buffer: inout ByteBuffer) {
        guard length >= 127 else {
            buffer.writeInteger(UInt8(length))
            return
        }
        buffer.writeInteger(UInt8(127))
        var rest = length - 127
        while rest >= 128 {
            buffer.writeInteger(UInt8(rest & 0x7F | 0x80))
            rest >>= 7
        }
        buffer.writeInteger(UInt8(rest))
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
            self.core.job.noteConnectionError("HPACK encoding failed: \(error)")
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
        let template = self.core.job.template
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
}
