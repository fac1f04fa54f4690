/// One row's fields as a payload template reads them: the field bytes (unescaped CSV text) and, per column of
/// the templates' column list, where the field starts and ends in them.
///
/// A view over memory its owner keeps alive for the call (a chunk's field store, a scratch buffer): nothing is
/// copied or retained.
public struct PayloadFields {
    /// A bound in `bounds` that marks a column the row does not have.
    public static let missing = UInt32.max

    @usableFromInline let bytes: UnsafeRawBufferPointer
    /// Two per column: start and end offsets into `bytes` (start `missing`: no such field).
    @usableFromInline let bounds: UnsafeBufferPointer<UInt32>
    /// The send time (UNIX seconds) a template's `"{{$now}}"` takes: read by the owner once per chunk of rows, never
    /// per row. 0 (none read) renders as `PayloadTemplate.sendTimeFloor`.
    public let sendTime: Int64

    @inlinable
    public init(bytes: UnsafeRawBufferPointer, bounds: UnsafeBufferPointer<UInt32>, sendTime: Int64 = 0) {
        self.bytes = bytes
        self.bounds = bounds
        self.sendTime = sendTime
    }

    /// The field of `column`, or nil when the row has none.
    @inlinable @inline(__always)
    public func field(_ column: Int) -> UnsafeRawBufferPointer? {
        let start = self.bounds[2 * column]
        guard start != Self.missing else { return nil }
        let end = Int(self.bounds[2 * column + 1])
        guard let base = self.bytes.baseAddress else { return UnsafeRawBufferPointer(start: nil, count: 0) }
        return UnsafeRawBufferPointer(start: base + Int(start), count: end - Int(start))
    }
}

/// JSON string escaping of raw UTF-8 field text, measured and written without allocating.
@usableFromInline
enum JSONEscaping {
    /// Whether any of the 8 bytes of `word` is one JSON escapes (a quote, a backslash, below 0x20) or one of UTF-8's
    /// (0x80 and above): a word without any is written as it is. `(x - n…n) & ~x & 0x80…80` is nonzero exactly when
    /// some byte of `x` is below `n` (for bytes below 0x80, which the first test has made sure of).
    @inlinable @inline(__always)
    static func needsLook(_ word: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        @inline(__always) func below(_ value: UInt64, _ bound: UInt8) -> UInt64 {
            (value &- ones &* UInt64(bound)) & ~value & highs
        }
        let quotes = word ^ (ones &* UInt64(UInt8(ascii: "\"")))
        let backslashes = word ^ (ones &* UInt64(UInt8(ascii: "\\")))
        return (word & highs) | below(word, 0x20) | below(quotes, 1) | below(backslashes, 1) != 0
    }

    /// The escaped size of `text`, or nil when it is not UTF-8.
    ///
    /// Eight bytes at a time while none needs a look (`needsLook`): each such byte counts as itself.
    @inlinable
    static func escapedCount(_ text: UnsafeRawBufferPointer) -> Int? {
        var index = 0
        while index &+ 8 <= text.count,
            !Self.needsLook(text.loadUnaligned(fromByteOffset: index, as: UInt64.self))
        {
            index &+= 8
        }
        var count = index
        while index < text.count {
            let byte = text[index]
            if byte < 0x80 {
                if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                    count += 2
                } else if byte < 0x20 {
                    count += Self.shortEscape(byte) != 0 ? 2 : 6
                } else {
                    count += 1
                }
                index += 1
                continue
            }
            let length = Self.sequenceLength(text, at: index)
            guard length > 0 else { return nil }
            count += length
            index += length
        }
        return count
    }

    /// The length of the UTF-8 sequence starting at `index` (its first byte ≥ 0x80), or 0 when it is malformed.
    @inlinable
    static func sequenceLength(_ text: UnsafeRawBufferPointer, at index: Int) -> Int {
        let first = text[index]
        let length: Int
        let low: UInt8
        let high: UInt8
        switch first {
        case 0xC2...0xDF: (length, low, high) = (2, 0x80, 0xBF)
        case 0xE0: (length, low, high) = (3, 0xA0, 0xBF)
        case 0xE1...0xEC, 0xEE...0xEF: (length, low, high) = (3, 0x80, 0xBF)
        case 0xED: (length, low, high) = (3, 0x80, 0x9F)
        case 0xF0: (length, low, high) = (4, 0x90, 0xBF)
        case 0xF1...0xF3: (length, low, high) = (4, 0x80, 0xBF)
        case 0xF4: (length, low, high) = (4, 0x80, 0x8F)
        default: return 0
        }
        guard index + length <= text.count else { return 0 }
        let second = text[index + 1]
        guard second >= low && second <= high else { return 0 }
        for offset in 2..<max(2, length) where text[index + offset] & 0xC0 != 0x80 { return 0 }
        return length
    }

    /// The letter of a two-byte escape for a control byte (`\n`, …), or 0 when it takes `\u00XX`.
    @inlinable @inline(__always)
    static func shortEscape(_ byte: UInt8) -> UInt8 {
        switch byte {
        case 0x08: UInt8(ascii: "b")
        case 0x09: UInt8(ascii: "t")
        case 0x0A: UInt8(ascii: "n")
        case 0x0C: UInt8(ascii: "f")
        case 0x0D: UInt8(ascii: "r")
        default: 0
        }
    }

    /// Writes `text` escaped into `out` at `offset`, checking as it goes what `escapedCount` checks and that `out`
    /// has room: the offset after the text, or -1 when it is not UTF-8 or does not fit.
    ///
    /// Eight bytes at a time while none needs a look; a field whose bytes all pass is ended with one overlapping
    /// word (its last eight bytes) rather than a byte at a time.
    @inlinable
    static func escapeChecked(
        _ text: UnsafeRawBufferPointer,
        into out: UnsafeMutableRawBufferPointer,
        at offset: Int
    ) -> Int {
        let first = offset
        var offset = offset
        var index = 0
        while index &+ 8 <= text.count {
            let word = text.loadUnaligned(fromByteOffset: index, as: UInt64.self)
            if Self.needsLook(word) { break }
            guard offset &+ 8 <= out.count else { return -1 }
            out.storeBytes(of: word, toByteOffset: offset, as: UInt64.self)
            offset &+= 8
            index &+= 8
        }
        if index < text.count && index &+ 8 > text.count && text.count >= 8 {
            // Every byte so far was copied as it is (offset - first == index): the last word lands at the same
            // distance from `first` as it lies from the text's start.
            let word = text.loadUnaligned(fromByteOffset: text.count &- 8, as: UInt64.self)
            if !Self.needsLook(word) {
                guard first &+ text.count <= out.count else { return -1 }
                out.storeBytes(of: word, toByteOffset: first &+ text.count &- 8, as: UInt64.self)
                return first &+ text.count
            }
        }
        while index < text.count {
            let byte = text[index]
            if byte >= 0x80 {
                let length = Self.sequenceLength(text, at: index)
                guard length > 0, offset &+ length <= out.count else { return -1 }
                (out.baseAddress! + offset).copyMemory(from: text.baseAddress! + index, byteCount: length)
                offset &+= length
                index &+= length
                continue
            }
            index &+= 1
            if byte >= 0x20 && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: "\\") {
                guard offset < out.count else { return -1 }
                out[offset] = byte
                offset &+= 1
                continue
            }
            let short = byte < 0x20 ? Self.shortEscape(byte) : byte
            if short != 0 {
                guard offset &+ 2 <= out.count else { return -1 }
                out[offset] = UInt8(ascii: "\\")
                out[offset &+ 1] = short
                offset &+= 2
            } else {
                guard offset &+ 6 <= out.count else { return -1 }
                let hex: StaticString = "0123456789abcdef"
                out[offset] = UInt8(ascii: "\\")
                out[offset &+ 1] = UInt8(ascii: "u")
                out[offset &+ 2] = UInt8(ascii: "0")
                out[offset &+ 3] = UInt8(ascii: "0")
                out[offset &+ 4] = hex.utf8Start[Int(byte >> 4)]
                out[offset &+ 5] = hex.utf8Start[Int(byte & 0xF)]
                offset &+= 6
            }
        }
        return offset
    }

    /// Whether `text` is a JSON integer: an optional minus, then 0 or digits not starting with 0 (at most 19).
    @inlinable
    static func isInteger(_ text: UnsafeRawBufferPointer) -> Bool {
        var index = 0
        if index < text.count && text[index] == UInt8(ascii: "-") { index += 1 }
        let digits = text.count - index
        guard digits >= 1 && digits <= 19 else { return false }
        if text[index] == UInt8(ascii: "0") && digits > 1 { return false }
        while index < text.count {
            guard text[index] >= UInt8(ascii: "0") && text[index] <= UInt8(ascii: "9") else { return false }
            index += 1
        }
        return true
    }
}
