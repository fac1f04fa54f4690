import NIOCore

/// A deliberately invalid notification (it has no device token) whose error response proves that everything
/// written before it on the connection was accepted: the gateway answers in order, and answers this one with
/// status 2 (missing device token) naming its identifier.
///
/// Command 0 carries no identifier and cannot serve as a barrier.
public enum BarrierFrame {
    /// The encoded size for `command` (nil for command 0).
    public static func byteCount(for command: FrameCommand) -> Int? {
        switch command {
        case .framed: 12
        case .enhanced: 13
        case .simple: nil
        }
    }

    /// Appends the barrier for `command` with `identifier` to `buffer`.
    ///
    /// - Precondition: `command` is `.enhanced` or `.framed`.
    public static func write(command: FrameCommand, identifier: UInt32, to buffer: inout ByteBuffer) {
        switch command {
        case .framed:
            // 2 | frame length 7 | item 3 (identifier) only.
            buffer.writeInteger(FrameCommand.framed.rawValue)
            buffer.writeInteger(UInt32(7))
            buffer.writeInteger(UInt8(3))
            buffer.writeInteger(UInt16(4))
            buffer.writeInteger(identifier)
        case .enhanced:
            // 1 | identifier | expiry 0 | token length 0 | payload length 0.
            buffer.writeInteger(FrameCommand.enhanced.rawValue)
            buffer.writeInteger(identifier)
            buffer.writeInteger(UInt32(0))
            buffer.writeInteger(UInt16(0))
            buffer.writeInteger(UInt16(0))
        case .simple:
            preconditionFailure("command 0 has no identifier to answer a barrier with")
        }
    }
}
