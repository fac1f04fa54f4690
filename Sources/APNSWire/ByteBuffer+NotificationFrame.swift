import NIOCore

extension ByteBuffer {
    /// Appends one notification frame in the layout of `command`, in a single unsafe write.
    ///
    /// This is the general encoder: it takes any payload up to 65535 bytes and checks no limit, so tests
    /// and the simulator can build frames the gateway must refuse. Senders encode through a
    /// `FrameTemplate`, which validates the payload once and then only patches token and identifier.
    ///
    /// - Parameters:
    ///   - identifier: ignored by command 0, which has none.
    ///   - expiry: UNIX seconds; 0 means "deliver once, do not store". Ignored by command 0.
    ///   - priority: command 2 only; commands 0 and 1 imply 10.
    /// - Returns: the number of bytes written.
    @discardableResult
    public mutating func writeNotificationFrame(
        command: FrameCommand,
        token: DeviceToken,
        payload: some Collection<UInt8>,
        identifier: UInt32 = 0,
        expiry: UInt32 = 0,
        priority: NotificationPriority = .immediate
    ) -> Int {
        precondition(payload.count <= Int(UInt16.max), "a payload field holds at most 65535 bytes")
        let layout = FrameLayout(command: command, payloadCount: payload.count)
        let bytes = Array(payload)
        return bytes.withUnsafeBytes { payloadBytes in
            self.writeWithUnsafeMutableBytes(minimumWritableBytes: layout.byteCount) { out in
                layout.encode(
                    into: out,
                    token: token,
                    payload: payloadBytes,
                    identifier: identifier,
                    expiry: expiry,
                    priority: priority.rawValue
                )
                return layout.byteCount
            }
        }
    }
}
