import NIOCore

/// Writes the endpoint's HTTP/2 frames into an output buffer, header blocks included.
///
/// An answer's header block is a handful of HPACK representations with no dynamic table (RFC 7541): `:status` as a
/// static-table index where the table has the code (200, 400, 404, 500) and as a literal with an indexed name
/// otherwise, `apns-id` and `retry-after` as literals without indexing. Never indexing keeps the client's decoder
/// table untouched, so the endpoint needs no HPACK encoder state and writes an answer in a few stores.
enum HTTP2FrameWriter {
    static func frameHeader(length: Int, type: UInt8, flags: UInt8, streamID: UInt32, into buffer: inout ByteBuffer) {
        buffer.writeInteger(UInt32(length) << 8 | UInt32(type))
        buffer.writeInteger(flags)
        buffer.writeInteger(streamID)
    }

    static func settings(_ settings: [(parameter: UInt16, value: UInt32)], into buffer: inout ByteBuffer) {
        self.frameHeader(length: 6 * settings.count, type: 4, flags: 0, streamID: 0, into: &buffer)
        for setting in settings {
            buffer.writeInteger(setting.parameter)
            buffer.writeInteger(setting.value)
        }
    }

    static func settingsAcknowledgement(into buffer: inout ByteBuffer) {
        self.frameHeader(length: 0, type: 4, flags: 0x1, streamID: 0, into: &buffer)
    }

    static func pingAcknowledgement(_ data: UInt64, into buffer: inout ByteBuffer) {
        self.frameHeader(length: 8, type: 6, flags: 0x1, streamID: 0, into: &buffer)
        buffer.writeInteger(data)
    }

    static func windowUpdate(streamID: UInt32, increment: Int, into buffer: inout ByteBuffer) {
        self.frameHeader(length: 4, type: 8, flags: 0, streamID: streamID, into: &buffer)
        buffer.writeInteger(UInt32(increment) & 0x7FFF_FFFF)
    }

    static func resetStream(_ streamID: UInt32, code: HTTP2ConnectionError.Code, into buffer: inout ByteBuffer) {
        self.frameHeader(length: 4, type: 3, flags: 0, streamID: streamID, into: &buffer)
        buffer.writeInteger(code.rawValue)
    }

    static func goAway(lastStreamID: UInt32, code: HTTP2ConnectionError.Code, into buffer: inout ByteBuffer) {
        self.frameHeader(length: 8, type: 7, flags: 0, streamID: 0, into: &buffer)
        buffer.writeInteger(lastStreamID)
        buffer.writeInteger(code.rawValue)
    }

    static func data(_ bytes: [UInt8], streamID: UInt32, endStream: Bool, into buffer: inout ByteBuffer) {
        self.frameHeader(length: bytes.count, type: 0, flags: endStream ? 0x1 : 0, streamID: streamID, into: &buffer)
        buffer.writeBytes(bytes)
    }

    /// A HEADERS frame answering `streamID`: `:status`, `apns-id` (36 bytes, lowercase UUID text) and, when given,
    /// `retry-after`. END_STREAM when no body follows.
    static func responseHeaders(
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

/// Makes the `apns-id` of answers to requests that carried none: a version-4 UUID in lowercase 8-4-4-4-12 text,
/// from the connection's seeded generator (Foundation's `UUID()` reads the system's random source per call and
/// formats through `printf`, which at this rate was a tenth of the endpoint's time).
struct APNSIDMaker {
    private var text: [UInt8] = Array(repeating: 0x2D, count: 36)
    private static let hex: [UInt8] = Array("0123456789abcdef".utf8)

    /// Calls `body` with a new identifier's 36 bytes.
    mutating func withNext<Result>(
        using random: inout SeededGenerator,
        _ body: (UnsafeRawBufferPointer) -> Result
    ) -> Result {
        let high = (random.next() & ~0xF000) | 0x4000  // version 4
        let low = (random.next() & ~(0xC << 60)) | (0x8 << 60)  // RFC 4122 variant
        var position = 35
        for digit in 0..<32 {
            if position == 23 || position == 18 || position == 13 || position == 8 { position -= 1 }
            let nibble = digit < 16 ? low >> (4 * digit) : high >> (4 * (digit - 16))
            self.text[position] = Self.hex[Int(nibble & 0xF)]
            position -= 1
        }
        return self.text.withUnsafeBytes(body)
    }
}
