import NIOCore

/// One entry of the feedback service: `timestamp (4) | token length (2) | token`.
///
/// The timestamp (UNIX seconds) is when the service found the app gone from the device; a provider drops
/// the token unless the device registered it again after that time. The token keeps whatever length the
/// service sent (the format allows any), so a caller decides what to do with a token that is not 32 bytes.
public struct FeedbackTuple: Hashable, Sendable {
    public var timestamp: UInt32
    public var token: [UInt8]

    public init(timestamp: UInt32, token: [UInt8]) {
        self.timestamp = timestamp
        self.token = token
    }

    public init(timestamp: UInt32, token: DeviceToken) {
        self.init(timestamp: timestamp, token: token.bytes)
    }

    /// The token as a `DeviceToken`, when it has the standard 32 bytes.
    public var deviceToken: DeviceToken? {
        try? DeviceToken(bytes: self.token)
    }

    /// Appends the tuple to `buffer`.
    ///
    /// - Precondition: the token is at most 65535 bytes.
    public func write(to buffer: inout ByteBuffer) {
        precondition(self.token.count <= Int(UInt16.max), "a feedback token is at most 65535 bytes")
        buffer.writeInteger(self.timestamp)
        buffer.writeInteger(UInt16(self.token.count))
        buffer.writeBytes(self.token)
    }

    /// Reads one tuple from the front of `buffer`.
    ///
    /// - Returns: nil, with `buffer` untouched, until the whole tuple is readable.
    public static func read(from buffer: inout ByteBuffer) -> FeedbackTuple? {
        let start = buffer.readerIndex
        guard let timestamp = buffer.getInteger(at: start, as: UInt32.self),
            let length = buffer.getInteger(at: start + 4, as: UInt16.self),
            let token = buffer.getBytes(at: start + 6, length: Int(length))
        else { return nil }
        buffer.moveReaderIndex(forwardBy: 6 + Int(length))
        return FeedbackTuple(timestamp: timestamp, token: token)
    }
}
