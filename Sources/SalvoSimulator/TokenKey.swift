import APNSWire

/// A device token's 32 bytes as a small hashable value, for the few dictionaries keyed by token
/// outside the hot path (offline devices in the QoS model).
struct TokenKey: Hashable, Sendable {
    let a: UInt64
    let b: UInt64
    let c: UInt64
    let d: UInt64

    init(_ token: UnsafeRawPointer) {
        self.a = token.loadUnaligned(fromByteOffset: 0, as: UInt64.self)
        self.b = token.loadUnaligned(fromByteOffset: 8, as: UInt64.self)
        self.c = token.loadUnaligned(fromByteOffset: 16, as: UInt64.self)
        self.d = token.loadUnaligned(fromByteOffset: 24, as: UInt64.self)
    }

    var token: DeviceToken {
        withUnsafeBytes(of: self) { DeviceToken(unsafeBytes: $0) }
    }
}
