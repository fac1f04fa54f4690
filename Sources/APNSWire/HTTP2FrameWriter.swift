import NIOCore

/// Writes a server's HTTP/2 frames into an output buffer (RFC 9113 §6), APNs answers' header blocks included: the
/// simulator's HTTP/2 endpoint and the benchmark sink write with it.
///
/// An answer's header block is a handful of HPACK representations with no dynamic table (RFC 7541): `:status` as a
/// static-table index where the table has the code (200, 400, 404, 500) and as a literal with an indexed name
/// otherwise, `apns-id` and `retry-after` as literals without indexing. Never indexing keeps the client's decoder
/// table untouched, so the endpoint needs no HPACK encoder state and writes an answer in a few stores.
public enum HTTP2FrameWriter {
    public static func frameHeader(
        length: Int,
        type: UInt8,
        flags: UInt8,
        streamID: UInt32,
        into buffer: inout ByteBuffer
    ) {
        buffer.writeInteger(UInt32(length) << 8 | UInt32(type))
        buffer.writeInteger(flags)
        buffer.writeInteger(streamID)
    }

    /// A header block as a HEADERS frame and, past `maximumFrameSize` bytes, CONTINUATION frames (RFC 9113 §6.10);
    /// `flags` (END_STREAM) go on the HEADERS frame, END_HEADERS on the last.
    public static func headerBlock(
        _ block: ByteBuffer,
        streamID: UInt32,
        flags: UInt8,
        maximumFrameSize: Int = HTTP2FrameReader.maximumFrameSize,
        into buffer: inout ByteBuffer
    ) {
        var block = block
        var type: UInt8 = 1
        var flags = flags
        while let chunk = block.readSlice(length: min(maximumFrameSize, block.readableBytes)) {
            let last = block.readableBytes == 0
            Self.frameHeader(
                length: chunk.readableBytes,
                type: type,
                flags: flags | (last ? 0x4 : 0),
                streamID: streamID,
                into: &buffer
            )
            buffer.writeImmutableBuffer(chunk)
            if last { break }
            type = 9
            flags = 0
        }
    }

    public static func settings(
        _ settings: [(parameter: HTTP2SettingIdentifier, value: UInt32)],
        into buffer: inout ByteBuffer
    ) {
        self.frameHeader(length: 6 * settings.count, type: 4, flags: 0, streamID: 0, into: &buffer)
        for setting in settings {
            buffer.writeInteger(setting.parameter.rawValue)
            buffer.writeInteger(setting.value)
        }
    }

    public static func settingsAcknowledgement(into buffer: inout ByteBuffer) {
        self.frameHeader(length: 0, type: 4, flags: 0x1, streamID: 0, into: &buffer)
    }

    public static func pingAcknowledgement(_ data: UInt64, into buffer: inout ByteBuffer) {
        self.frameHeader(length: 8, type: 6, flags: 0x1, streamID: 0, into: &buffer)
        buffer.writeInteger(data)
    }

    public static func windowUpdate(streamID: UInt32, increment: Int, into buffer: inout ByteBuffer) {
        self.frameHeader(length: 4, type: 8, flags: 0, streamID: streamID, into: &buffer)
        buffer.writeInteger(UInt32(increment) & 0x7FFF_FFFF)
    }

    public static func resetStream(_ streamID: UInt32, code: HTTP2ConnectionError.Code, into buffer: inout ByteBuffer) {
        self.frameHeader(length: 4, type: 3, flags: 0, streamID: streamID, into: &buffer)
        buffer.writeInteger(code.rawValue)
    }

    public static func goAway(lastStreamID: UInt32, code: HTTP2ConnectionError.Code, into buffer: inout ByteBuffer) {
        self.frameHeader(length: 8, type: 7, flags: 0, streamID: 0, into: &buffer)
        buffer.writeInteger(lastStreamID)
        buffer.writeInteger(code.rawValue)
    }

    public static func data(_ bytes: [UInt8], streamID: UInt32, endStream: Bool, into buffer: inout ByteBuffer) {
        self.frameHeader(length: bytes.count, type: 0, flags: endStream ? 0x1 : 0, streamID: streamID, into: &buffer)
        buffer.writeBytes(bytes)
    }

    /// A HEADERS frame answering `streamID`: `:status`, `apns-id` (36 bytes, lowercase UUID text) and, when given,
    /// `retry-after`. END_STREAM when no body follows.
    public static func responseHeaders(
        status: Int,
        apnsID: UnsafeRawBufferPointer,
        retryAfter: Int?,
        streamID: UInt32,
        endStream: Bool,
        into buffer: inout ByteBuffer
    ) {
        let lengthIndex = buffer.writerIndex
        self.frameHeader(length: 0, type: 1, flags: 0x4 | (endStream ? 0x1 : 0), streamID: streamID, into: &buffer)
        let blockStart = buffer.writerIndex
        switch status {
        case 200: buffer.writeInteger(UInt8(0x88))
        case 400: buffer.writeInteger(UInt8(0x8C))
        case 404: buffer.writeInteger(UInt8(0x8D))
        case 500: buffer.writeInteger(UInt8(0x8E))
        default:
            // Literal without indexing, name = static entry 8 (`:status`), 3-digit value.
            buffer.writeInteger(UInt8(0x08))
            buffer.writeInteger(UInt8(3))
            self.writeDecimal(status, into: &buffer)
        }
        // Literal without indexing, new name.
        buffer.writeInteger(UInt8(0x00))
        buffer.writeInteger(UInt8(7))
        buffer.writeStaticString("apns-id")
        buffer.writeInteger(UInt8(apnsID.count))
        buffer.writeBytes(apnsID)
        if let retryAfter {
            // Literal without indexing, name = static entry 53 (`retry-after`): 4-bit prefix 15, then 38.
            buffer.writeInteger(UInt8(0x0F))
            buffer.writeInteger(UInt8(38))
            let digits = String(retryAfter)
            buffer.writeInteger(UInt8(digits.utf8.count))
            buffer.writeString(digits)
        }
        let length = buffer.writerIndex - blockStart
        buffer.setInteger(UInt32(length) << 8 | 1, at: lengthIndex)
    }

    private static func writeDecimal(_ value: Int, into buffer: inout ByteBuffer) {
        buffer.writeInteger(UInt8(0x30 + value / 100 % 10))
        buffer.writeInteger(UInt8(0x30 + value / 10 % 10))
        buffer.writeInteger(UInt8(0x30 + value % 10))
    }
}
