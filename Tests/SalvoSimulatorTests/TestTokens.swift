/// Crafted device tokens for tests: 32 bytes, `seed` spread so that tokens differ in every word.
enum TestTokens {
    static func token(_ n: UInt32, first: UInt8 = 0x10) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: 32)
        bytes[0] = first
        for i in 0..<4 {
            let v = n &* UInt32(2_654_435_761 &+ UInt32(i))
            bytes[1 + i * 4] = UInt8(truncatingIfNeeded: v >> 24)
            bytes[2 + i * 4] = UInt8(truncatingIfNeeded: v >> 16)
            bytes[3 + i * 4] = UInt8(truncatingIfNeeded: v >> 8)
            bytes[4 + i * 4] = UInt8(truncatingIfNeeded: v)
        }
        bytes[28] = UInt8(truncatingIfNeeded: n >> 24)
        bytes[29] = UInt8(truncatingIfNeeded: n >> 16)
        bytes[30] = UInt8(truncatingIfNeeded: n >> 8)
        bytes[31] = UInt8(truncatingIfNeeded: n)
        return bytes
    }

    static func hex(_ bytes: [UInt8]) -> String {
        bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
    }
}
