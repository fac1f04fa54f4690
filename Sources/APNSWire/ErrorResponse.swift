import NIOCore

/// The gateway's error response: `8 | status (1) | identifier (4)`, after which it closes the connection.
///
/// Every notification sent after `identifier` on that connection was discarded. For `.shutdown` the
/// identifier is instead the last notification the gateway accepted.
public struct ErrorResponse: Hashable, Sendable {
    /// The command byte of an error response.
    public static let command: UInt8 = 8
    /// The size of an error response on the wire.
    public static let byteCount = 6

    public var status: ErrorStatus
    public var identifier: UInt32

    public init(status: ErrorStatus, identifier: UInt32) {
        self.status = status
        self.identifier = identifier
    }

    /// Appends the six bytes to `buffer`.
    public func write(to buffer: inout ByteBuffer) {
        buffer.writeInteger(Self.command)
        buffer.writeInteger(self.status.rawValue)
        buffer.writeInteger(self.identifier)
    }

    /// Reads one error response from the front of `buffer`.
    ///
    /// - Returns: nil, with `buffer` untouched, while fewer than six bytes are readable.
    /// - Throws: `WireError.unexpectedCommand` when the first byte is not 8; nothing is consumed.
    public static func read(from buffer: inout ByteBuffer) throws(WireError) -> ErrorResponse? {
        guard buffer.readableBytes >= Self.byteCount else { return nil }
        let start = buffer.readerIndex
        let command = buffer.getInteger(at: start, as: UInt8.self)!
        guard command == Self.command else {
            throw WireError(.unexpectedCommand, value: Int(command))
        }
        let status = buffer.getInteger(at: start + 1, as: UInt8.self)!
        let identifier = buffer.getInteger(at: start + 2, as: UInt32.self)!
        buffer.moveReaderIndex(forwardBy: Self.byteCount)
        return ErrorResponse(status: ErrorStatus(rawValue: status), identifier: identifier)
    }
}
