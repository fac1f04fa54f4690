import APNSWire

/// A device token of 32 equal bytes: rows whose tokens are told apart by one byte.
func token(_ byte: UInt8) -> DeviceToken {
    try! DeviceToken(bytes: [UInt8](repeating: byte, count: 32))
}
