import APNSWire
import SalvoTestTraits
import Testing

/// The 64-digit form is decoded eight digits to a word; these check it against a digit-by-digit reading.
@Suite(.tags(.pure), .runs(.pure)) struct DeviceTokenCompactHexTests {
    /// A digit's value read the plain way, nil for any other byte.
    private static func nibble(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// The 32 bytes of 64 digits, nil when one is not a digit.
    private static func reference(_ digits: [UInt8]) -> [UInt8]? {
        var bytes: [UInt8] = []
        for pair in stride(from: 0, to: digits.count, by: 2) {
            guard let high = nibble(digits[pair]), let low = nibble(digits[pair + 1]) else { return nil }
            bytes.append(high << 4 | low)
        }
        return bytes
    }

    private static func parse(_ digits: [UInt8]) -> [UInt8]? {
        digits.withUnsafeBytes { try? DeviceToken(hexUTF8: $0) }.map { Array($0.bytes) }
    }

    @Test func everyByteAtEveryPlaceIsReadAsADigitOrRefused() {
        let base = Array("0123456789abcdefABCDEF0123456789fedcba9876543210FEDCBA9876543210".utf8)
        #expect(base.count == 64)
        var mismatches = 0
        for place in 0..<64 {
            for byte in 0...UInt8.max {
                var digits = base
                digits[place] = byte
                // A space or bracket alone is a wrong length for the general form: refused as a non-digit is.
                if Self.parse(digits) != Self.reference(digits) { mismatches += 1 }
            }
        }
        #expect(mismatches == 0)
    }

    /// Both compact decoders alone (no general reading behind them to make up for a digit refused): the vector one
    /// this processor uses (`init(compactHex:)`) and the word one of a processor without it.
    @Test func bothCompactDecodersReadEveryByteAtEveryPlaceAsTheReferenceDoes() {
        let base = Array("fedcba9876543210FEDCBA98765432100123456789abcdefABCDEF0123456789".utf8)
        var mismatches: [String: Int] = [:]
        for place in 0..<64 {
            for byte in 0...UInt8.max {
                var digits = base
                digits[place] = byte
                let expected = Self.reference(digits)
                let vector = digits.withUnsafeBytes { DeviceToken(compactHex: $0) }.map { Array($0.bytes) }
                let words = digits.withUnsafeBytes { DeviceToken.decodeCompactHexByWords($0) }.map { Array($0.bytes) }
                if vector != expected { mismatches["compactHex", default: 0] += 1 }
                if words != expected { mismatches["words", default: 0] += 1 }
            }
        }
        #expect(mismatches == [:])
    }

    @Test func tokensOfEveryCaseRoundTrip() throws {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        for round in 0..<2000 {
            var bytes: [UInt8] = []
            for _ in 0..<4 {
                state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                withUnsafeBytes(of: state) { bytes.append(contentsOf: $0) }
            }
            let lower = bytes.map { String($0, radix: 16) }.map { $0.count == 1 ? "0" + $0 : $0 }.joined()
            // Every third token upper case, every third mixed.
            let text =
                switch round % 3 {
                case 0: lower
                case 1: lower.uppercased()
                default:
                    String(
                        lower.enumerated().map { $0.offset % 2 == 0 ? Character($0.element.uppercased()) : $0.element }
                    )
                }
            let token = try DeviceToken(hex: text)
            #expect(Array(token.bytes) == bytes)
            #expect(token.hexString == lower)
        }
    }
}
