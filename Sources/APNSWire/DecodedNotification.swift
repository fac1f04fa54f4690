import NIOCore

/// A notification as a gateway reads it off the wire.
///
/// `payload` is a slice of the connection's inbound buffer, not a copy: keep it only as long as that is
/// acceptable (a ledger keeps a digest, not the slice).
public struct DecodedNotification: Sendable {
    public var command: FrameCommand
    public var token: DeviceToken
    public var payload: ByteBuffer
    /// 0 for command 0, which has no identifier (and for a command 2 frame without one).
    public var identifier: UInt32
    /// UNIX seconds; 0 = deliver once, do not store. 0 for command 0.
    public var expiry: UInt32
    /// 10 for commands 0 and 1 and for a command 2 frame without a priority item.
    public var priority: UInt8

    public init(
        command: FrameCommand,
        token: DeviceToken,
        payload: ByteBuffer,
        identifier: UInt32,
        expiry: UInt32,
        priority: UInt8
    ) {
        self.command = command
        self.token = token
        self.payload = payload
        self.identifier = identifier
        self.expiry = expiry
        self.priority = priority
    }
}

/// A frame the gateway must refuse: the status it answers with and the identifier it names.
public struct MalformedFrame: Hashable, Sendable {
    public var status: ErrorStatus
    /// The frame's identifier when it could be read, else 0.
    public var identifier: UInt32
    /// nil when the command byte itself is unknown.
    public var command: FrameCommand?

    public init(status: ErrorStatus, identifier: UInt32, command: FrameCommand?) {
        self.status = status
        self.identifier = identifier
        self.command = command
    }
}
