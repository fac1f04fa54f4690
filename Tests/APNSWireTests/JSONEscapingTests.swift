import Foundation
import SalvoTestTraits
import Testing

@testable import APNSWire

/// A field's JSON escaping, eight bytes at a time where none needs a look: the same size and bytes as one byte at a
/// time, at every length and alignment, whatever bytes the field holds.
@Suite(.tags(.pure), .runs(.pure)) struct JSONEscapingTests {
    /// The escaping one byte at a time: what the word-wise paths must agree with (UTF-8 sequences passed whole).
    static func reference(_ bytes: [UInt8]) -> [UInt8]? {
        guard String(validating: bytes, as: UTF8.self) != nil else { return nil }
        var out: [UInt8] = []
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "\""): out += Array(#"\""#.utf8)
            case UInt8(ascii: "\\"): out += Array(#"\\"#.utf8)
            case 0x08: out += Array(#"\b"#.utf8)
            case 0x09: out += Array(#"\t"#.utf8)
            case 0x0A: out += Array(#"\n"#.utf8)
            case 0x0C: out += Array(#"\f"#.utf8)
            case 0x0D: out += Array(#"\r"#.utf8)
            case 0..<0x20: out += Array(String(format: "\\u%04x", Int(byte)).utf8)
            default: out.append(byte)
            }
        }
        return out
    }

    /// A field of at least `length` bytes: mostly plain text, so that whole plain words occur; one step in `oneIn`
    /// any of `pieces`.
    static func field(
        length: Int,
        pieces: [[UInt8]],
        oneIn: Int,
        using random: inout SystemRandomNumberGenerator
    ) -> [UInt8] {
        var field: [UInt8] = []
        while field.count < length {
            if Int.random(in: 0..<oneIn, using: &random) == 0 {
                field += pieces.randomElement(using: &random)!
            } else {
                field += Array(Array("Customer 42".utf8).shuffled(using: &random).prefix(3))
            }
        }
        return field
    }

    @Test func everyLengthAndAlignmentMatchesTheByteAtATimeEscaping() {
        // Plain bytes, the bytes JSON escapes, bytes next to them (0x1F, 0x20, 0x21, 0x5B, 0x5D) and UTF-8.
        let pieces: [[UInt8]] = [
            Array("a".utf8), Array("Z".utf8), Array(" ".utf8), Array("!".utf8), Array("\"".utf8), Array("\\".utf8),
            [0x1F], [0x00], [0x0A], [0x7F], Array("[".utf8), Array("]".utf8), Array("é".utf8), Array("€".utf8),
            Array("😀".utf8), [0xFF], [0xC3],
        ]
        var random = SystemRandomNumberGenerator()
        var checked = 0
        for length in 0..<40 {
            for _ in 0..<60 {
                let field = Self.field(length: length, pieces: pieces, oneIn: 4, using: &random)
                let expected = Self.reference(field)
                for shift in 0..<3 {
                    // At an offset into its memory, so that the words are loaded at every alignment.
                    let padded = [UInt8](repeating: 0x41, count: shift) + field
                    padded.withUnsafeBytes { all in
                        let text = UnsafeRawBufferPointer(rebasing: all[shift...])
                        let count = JSONEscaping.escapedCount(text)
                        #expect(count == expected?.count, "\(field)")
                        guard let count, let expected else { return }
                        var out = [UInt8](repeating: 0, count: count + 5)
                        let end = out.withUnsafeMutableBytes { JSONEscaping.escapeChecked(text, into: $0, at: 5) }
                        #expect(end == count + 5)
                        #expect(Array(out[5...]) == expected, "\(field)")
                        checked += 1
                    }
                }
            }
        }
        #expect(checked > 3000)
    }

    /// The escaping that checks as it writes: the reference's bytes when the text is UTF-8 and the room holds them,
    /// -1 when it is not or does not (one byte short of the room it needs, and none at all).
    @Test func theCheckedEscapingAgreesAndRefusesWhatDoesNotFitOrIsNotUTF8() {
        let pieces: [[UInt8]] = [
            Array("a".utf8), Array(" ".utf8), Array("\"".utf8), Array("\\".utf8), [0x1F], [0x00], [0x0A], [0x7F],
            Array("é".utf8), Array("€".utf8), Array("😀".utf8), [0xFF], [0xC3], [0xE2, 0x82], [0xED, 0xA0, 0x80],
        ]
        var random = SystemRandomNumberGenerator()
        var checked = (fits: 0, short: 0, refused: 0)
        for length in 0..<40 {
            for _ in 0..<40 {
                let field = Self.field(length: length, pieces: pieces, oneIn: 5, using: &random)
                let expected = Self.reference(field)
                let shift = Int.random(in: 0..<3, using: &random)
                let padded = [UInt8](repeating: 0x41, count: shift) + field
                padded.withUnsafeBytes { all in
                    let text = UnsafeRawBufferPointer(rebasing: all[shift...])
                    guard let expected else {
                        var out = [UInt8](repeating: 0, count: 6 * field.count + 8)
                        #expect(out.withUnsafeMutableBytes { JSONEscaping.escapeChecked(text, into: $0, at: 3) } == -1)
                        checked.refused += 1
                        return
                    }
                    var out = [UInt8](repeating: 0xEE, count: expected.count + 3)
                    let end = out.withUnsafeMutableBytes { JSONEscaping.escapeChecked(text, into: $0, at: 3) }
                    #expect(end == expected.count + 3, "\(field)")
                    #expect(Array(out[3...]) == expected, "\(field)")
                    checked.fits += 1
                    if !expected.isEmpty {
                        var short = [UInt8](repeating: 0, count: expected.count + 2)
                        #expect(
                            short.withUnsafeMutableBytes { JSONEscaping.escapeChecked(text, into: $0, at: 3) } == -1
                        )
                        checked.short += 1
                    }
                }
            }
        }
        #expect(checked.fits > 300 && checked.short > 300 && checked.refused > 100)
    }
}
