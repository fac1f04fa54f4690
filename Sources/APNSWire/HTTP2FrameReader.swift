import NIOCore

/// An HTTP/2 connection error (RFC 9113 §5.4.1): the endpoint answers it with GOAWAY carrying `code` and closes.
public struct HTTP2ConnectionError: Error, Equatable {
    /// RFC 9113 §7 error codes the endpoints send.
    public enum Code: UInt32, Sendable {
        case noError = 0x0
        case protocolError = 0x1
        case flowControlError = 0x3
        case frameSizeError = 0x6
        case refusedStream = 0x7
        case cancel = 0x8
        case compressionError = 0x9
        case enhanceYourCalm = 0xB
    }

    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }
}

/// HTTP/2 framing (RFC 9113 §4, §6), on the server's side by default: checks the client preface, cuts frames out
/// of the bytes read, strips padding and priority fields, joins a header block split over CONTINUATION frames, and
/// refuses what a conforming peer never sends with the connection error the RFC names.
///
/// Hand-written rather than `NIOHTTP2Handler`: the simulator has to answer well over 100 k requests/s while the
/// sender shares its two cores, and NIOHTTP2's per-stream state machines cost more per request than the whole
/// APNs check. Header blocks are left to the caller (the simulator decodes them with NIOHPACK; the benchmark sink
/// never reads them); this type only frames. With `init(fromServer: true)` it reads a server's frames for the HTTP/2
/// client's wire engine. Pure and synchronous.
public struct HTTP2FrameReader {
    public static let preface: [UInt8] = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    /// What a frame means to the endpoint; PRIORITY and unknown frame types are skipped.
    public enum Frame {
        /// A whole header block (HEADERS plus any CONTINUATION frames), padding and priority removed.
        case headers(streamID: UInt32, block: ByteBuffer, endStream: Bool)
        /// DATA without padding; `flowControlled` is the whole frame payload, padding included (§6.9.1).
        case data(streamID: UInt32, payload: ByteBuffer, endStream: Bool, flowControlled: Int)
        case settings([(parameter: HTTP2SettingIdentifier, value: UInt32)])
        case settingsAcknowledged
        case ping(UInt64)
        case pingAcknowledged
        /// An increment of 0 comes only on a stream: that stream's error (RFC 9113 §6.9), which the endpoint
        /// answers with RST_STREAM PROTOCOL_ERROR; on the connection it is a connection error, thrown.
        case windowUpdate(streamID: UInt32, increment: Int)
        case resetStream(streamID: UInt32, code: UInt32)
        case goAway(lastStreamID: UInt32, code: UInt32)
    }

    /// The largest frame payload the endpoint accepts: the default `SETTINGS_MAX_FRAME_SIZE`, which it never raises.
    public static let maximumFrameSize = 16_384
    /// A header block longer than this (over CONTINUATION frames) ends the connection: APNs headers are small.
    public static let maximumHeaderBlock = 64 << 10

    /// The longest header block this reader takes (`maximumHeaderBlock` unless the reader was made with another).
    public let headerBlockLimit: Int

    private var sawPreface = false
    private var sawSettings = false
    private var continuing: (streamID: UInt32, block: ByteBuffer, endStream: Bool)?
    /// The debug data of the last GOAWAY returned (APNs puts its JSON reason there), empty when it had none.
    public private(set) var goAwayDebugData = ByteBuffer()

    /// A reader of the frames a client sends (after the client preface).
    public init() { self.headerBlockLimit = Self.maximumHeaderBlock }

    /// With `fromServer`, a reader of the frames a server sends: no preface, SETTINGS first (RFC 9113 §3.4), as
    /// the HTTP/2 client engine reads them.
    ///
    /// - Parameter headerBlockLimit: the longest header block taken (a client that announces a large
    ///   `SETTINGS_MAX_HEADER_LIST_SIZE` reads blocks that large).
    public init(fromServer: Bool, headerBlockLimit: Int = HTTP2FrameReader.maximumHeaderBlock) {
        self.sawPreface = fromServer
        self.headerBlockLimit = headerBlockLimit
    }

    /// The next frame in `buffer` (advancing its reader index), or nil when it needs more bytes.
    public mutating func next(from buffer: inout ByteBuffer) throws(HTTP2ConnectionError) -> Frame? {
        if !self.sawPreface {
            guard buffer.readableBytes >= Self.preface.count else {
                let prefix = buffer.readableBytesView
                guard prefix.elementsEqual(Self.preface.prefix(prefix.count)) else {
                    throw HTTP2ConnectionError(.protocolError, "not an HTTP/2 client preface")
                }
                return nil
            }
            guard buffer.readableBytesView.prefix(Self.preface.count).elementsEqual(Self.preface) else {
                throw HTTP2ConnectionError(.protocolError, "not an HTTP/2 client preface")
            }
            buffer.moveReaderIndex(forwardBy: Self.preface.count)
            self.sawPreface = true
        }
        while buffer.readableBytes >= 9 {
            let start = buffer.readerIndex
            let word = buffer.getInteger(at: start, as: UInt32.self)!
            let length = Int(word >> 8)
            let type = UInt8(truncatingIfNeeded: word)
            guard length <= Self.maximumFrameSize else {
                throw HTTP2ConnectionError(.frameSizeError, "a frame of \(length) bytes")
            }
            guard buffer.readableBytes >= 9 + length else { return nil }
            let flags = buffer.getInteger(at: start + 4, as: UInt8.self)!
            let streamID = buffer.getInteger(at: start + 5, as: UInt32.self)! & 0x7FFF_FFFF
            var payload = buffer.getSlice(at: start + 9, length: length)!
            buffer.moveReaderIndex(forwardBy: 9 + length)
            if let frame = try self.interpret(type: type, flags: flags, streamID: streamID, payload: &payload) {
                return frame
            }
        }
        return nil
    }

    private mutating func interpret(
        type: UInt8,
        flags: UInt8,
        streamID: UInt32,
        payload: inout ByteBuffer
    ) throws(HTTP2ConnectionError) -> Frame? {
        if !self.sawSettings {
            guard type == 4, flags & 0x1 == 0 else {
                throw HTTP2ConnectionError(.protocolError, "the preface must be followed by SETTINGS")
            }
            self.sawSettings = true
        }
        if let continuing = self.continuing {
            guard type == 9, streamID == continuing.streamID else {
                throw HTTP2ConnectionError(.protocolError, "a header block was interrupted")
            }
        }
        switch type {
        case 0:  // DATA
            guard streamID != 0 else { throw HTTP2ConnectionError(.protocolError, "DATA on stream 0") }
            let flowControlled = payload.readableBytes
            try Self.removePadding(flags: flags, from: &payload)
            return .data(
                streamID: streamID,
                payload: payload,
                endStream: flags & 0x1 != 0,
                flowControlled: flowControlled
            )
        case 1:  // HEADERS
            guard streamID != 0 else { throw HTTP2ConnectionError(.protocolError, "HEADERS on stream 0") }
            try Self.removePadding(flags: flags, from: &payload)
            if flags & 0x20 != 0 {  // PRIORITY: stream dependency and weight
                guard payload.readableBytes >= 5 else {
                    throw HTTP2ConnectionError(.frameSizeError, "HEADERS too short for its priority")
                }
                payload.moveReaderIndex(forwardBy: 5)
            }
            if flags & 0x4 != 0 {
                return .headers(streamID: streamID, block: payload, endStream: flags & 0x1 != 0)
            }
            self.continuing = (streamID, payload, flags & 0x1 != 0)
            return nil
        case 9:  // CONTINUATION
            guard var continuing = self.continuing else {
                throw HTTP2ConnectionError(.protocolError, "CONTINUATION without HEADERS")
            }
            guard continuing.block.readableBytes + payload.readableBytes <= self.headerBlockLimit else {
                throw HTTP2ConnectionError(.enhanceYourCalm, "a header block over \(self.headerBlockLimit) bytes")
            }
            self.continuing = nil
            continuing.block.writeBuffer(&payload)
            if flags & 0x4 != 0 {
                return .headers(streamID: continuing.streamID, block: continuing.block, endStream: continuing.endStream)
            }
            self.continuing = continuing
            return nil
        case 2:  // PRIORITY: advisory, ignored
            guard streamID != 0 else { throw HTTP2ConnectionError(.protocolError, "PRIORITY on stream 0") }
            return nil
        case 3:  // RST_STREAM
            guard streamID != 0 else { throw HTTP2ConnectionError(.protocolError, "RST_STREAM on stream 0") }
            guard payload.readableBytes == 4 else { throw HTTP2ConnectionError(.frameSizeError, "RST_STREAM size") }
            return .resetStream(streamID: streamID, code: payload.readInteger(as: UInt32.self)!)
        case 4:  // SETTINGS
            guard streamID == 0 else { throw HTTP2ConnectionError(.protocolError, "SETTINGS on a stream") }
            if flags & 0x1 != 0 {
                guard payload.readableBytes == 0 else {
                    throw HTTP2ConnectionError(.frameSizeError, "SETTINGS acknowledgement with a payload")
                }
                return .settingsAcknowledged
            }
            guard payload.readableBytes % 6 == 0 else { throw HTTP2ConnectionError(.frameSizeError, "SETTINGS size") }
            var settings: [(parameter: HTTP2SettingIdentifier, value: UInt32)] = []
            while let parameter = payload.readInteger(as: UInt16.self), let value = payload.readInteger(as: UInt32.self)
            {
                settings.append((HTTP2SettingIdentifier(rawValue: parameter), value))
            }
            return .settings(settings)
        case 5:  // PUSH_PROMISE: a client may not push, and the client engine turns push off
            throw HTTP2ConnectionError(.protocolError, "PUSH_PROMISE was not allowed")
        case 6:  // PING
            guard streamID == 0 else { throw HTTP2ConnectionError(.protocolError, "PING on a stream") }
            guard payload.readableBytes == 8 else { throw HTTP2ConnectionError(.frameSizeError, "PING size") }
            let data = payload.readInteger(as: UInt64.self)!
            return flags & 0x1 != 0 ? .pingAcknowledged : .ping(data)
        case 7:  // GOAWAY
            guard streamID == 0 else { throw HTTP2ConnectionError(.protocolError, "GOAWAY on a stream") }
            guard payload.readableBytes >= 8 else { throw HTTP2ConnectionError(.frameSizeError, "GOAWAY size") }
            let last = payload.readInteger(as: UInt32.self)! & 0x7FFF_FFFF
            let code = payload.readInteger(as: UInt32.self)!
            self.goAwayDebugData = payload
            return .goAway(lastStreamID: last, code: code)
        case 8:  // WINDOW_UPDATE
            guard payload.readableBytes == 4 else { throw HTTP2ConnectionError(.frameSizeError, "WINDOW_UPDATE size") }
            let increment = Int(payload.readInteger(as: UInt32.self)! & 0x7FFF_FFFF)
            // §6.9: an increment of 0 is a stream error on a stream (the caller resets it), a connection error
            // on the connection's window.
            guard increment > 0 || streamID != 0 else {
                throw HTTP2ConnectionError(.protocolError, "WINDOW_UPDATE of 0")
            }
            return .windowUpdate(streamID: streamID, increment: increment)
        default:  // unknown frame types are ignored (§5.5)
            return nil
        }
    }

    private static func removePadding(flags: UInt8, from payload: inout ByteBuffer) throws(HTTP2ConnectionError) {
        guard flags & 0x8 != 0 else { return }
        guard let padding = payload.readInteger(as: UInt8.self), Int(padding) <= payload.readableBytes else {
            throw HTTP2ConnectionError(.protocolError, "padding longer than the frame")
        }
        payload.moveWriterIndex(to: payload.writerIndex - Int(padding))
    }
}
