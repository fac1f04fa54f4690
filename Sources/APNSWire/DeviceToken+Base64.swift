extension DeviceToken {
    /// Parses the 32 raw bytes written as base64 (standard or URL-safe alphabet): 43 characters, or 44 ending in
    /// `=`; spaces around are ignored. Decodes in place, with no allocation (it is on the per-row path).
    ///
    /// Columns in errors count from 1 within `base64UTF8`.
    public init(base64UTF8 text: UnsafeRawBufferPointer) throws(DeviceTokenError) {
        var start = 0
        var end = text.count
        while start < end && text[start] == 0x20 { start += 1 }
        while end > start && text[end - 1] == 0x20 { end -= 1 }
        if end - start == 44 && text[end - 1] == UInt8(ascii: "=") { end -= 1 }
        guard end - start == 43 else {
            throw DeviceTokenError(.wrongBase64Length, found: end - start)
        }
        var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        // The offset of the first bad character, or -1.
        let bad = withUnsafeMutableBytes(of: &words) { out -> Int in
            var accumulator: UInt32 = 0
            var bits = 0
            var written = 0
            for index in start..<end {
                let value = Self.base64Value(text[index])
                guard value < 64 else { return index }
                accumulator = accumulator << 6 | UInt32(value)
                bits += 6
                if bits >= 8 {
                    bits -= 8
                    out[written] = UInt8(truncatingIfNeeded: accumulator >> UInt32(bits))
                    written += 1
                    accumulator &= (1 << UInt32(bits)) - 1
                }
            }
            // 43 characters carry 258 bits: the last two must be zero for the text to be canonical.
            return accumulator == 0 ? -1 : end - 1
        }
        if bad >= 0 {
            throw DeviceTokenError(.invalidBase64Character, found: Int(text[bad]), column: bad + 1)
        }
        self.init(words: words)
    }

    /// The base64 form of the token's 32 bytes (44 characters with the `=`).
    public var base64String: String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(44)
        let bytes = self.bytes + [0]
        for group in stride(from: 0, to: 33, by: 3) {
            let value = UInt32(bytes[group]) << 16 | UInt32(bytes[group + 1]) << 8 | UInt32(bytes[group + 2])
            for shift in [18, 12, 6, 0] { out.append(alphabet[Int(value >> UInt32(shift) & 63)]) }
        }
        out[43] = UInt8(ascii: "=")
        return String(decoding: out, as: UTF8.self)
    }

    /// A base64 character's value, or 64 for anything else.
    @inline(__always)
    static func base64Value(_ character: UInt8) -> UInt8 {
        switch character {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): character - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): character - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): character - UInt8(ascii: "0") + 52
        case UInt8(ascii: "+"), UInt8(ascii: "-"): 62
        case UInt8(ascii: "/"), UInt8(ascii: "_"): 63
        default: 64
        }
    }
}
