/// Lowercase hex for tokens and digests in ledgers and verdicts.
///
/// The simulator prints raw token bytes it holds in its own tables (never `DeviceToken` values), so
/// it needs this small encoder; parsing tokens goes through APNSWire's `DeviceToken(hex:)`.
enum Hex {
    private static let digits: [UInt8] = Array("0123456789abcdef".utf8)

    static func encode(_ bytes: UnsafeRawBufferPointer) -> String {
        String(unsafeUninitializedCapacity: bytes.count * 2) { out in
            for (i, byte) in bytes.enumerated() {
                out[2 * i] = digits[Int(byte >> 4)]
                out[2 * i + 1] = digits[Int(byte & 0x0F)]
            }
            return bytes.count * 2
        }
    }

    static func encode(_ value: UInt64) -> String {
        withUnsafeBytes(of: value.bigEndian) { encode($0) }
    }
}
