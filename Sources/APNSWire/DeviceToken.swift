import CSalvoHex

/// A device token: the 32 opaque bytes that name one app on one device.
///
/// Stored inline (four machine words), so tokens are cheap to copy, hash and compare and never allocate.
/// Parsed from the 64-character hex form that device-registration code usually stores (either case; the
/// spaces and angle brackets of Apple's `description` form, `<740f4707 bebcf74f …>`, are accepted too).
public struct DeviceToken: Hashable, Sendable {
    /// The number of bytes in a device token of the binary interface and the HTTP/2 API.
    public static let byteCount = 32

    // The bytes in order: `words.0` holds bytes 0–7 as they lie in memory, and so on.
    @usableFromInline
    var words: (UInt64, UInt64, UInt64, UInt64)

    @inlinable
    init(words: (UInt64, UInt64, UInt64, UInt64)) {
        self.words = words
    }

    /// Makes a token from exactly 32 bytes that the caller has already checked.
    ///
    /// - Precondition: `bytes.count == 32`.
    @inlinable
    public init(unsafeBytes bytes: UnsafeRawBufferPointer) {
        precondition(bytes.count == Self.byteCount, "a device token has 32 bytes")
        self.words = (
            bytes.loadUnaligned(fromByteOffset: 0, as: UInt64.self),
            bytes.loadUnaligned(fromByteOffset: 8, as: UInt64.self),
            bytes.loadUnaligned(fromByteOffset: 16, as: UInt64.self),
            bytes.loadUnaligned(fromByteOffset: 24, as: UInt64.self)
        )
    }

    /// Makes a token from its 32 raw bytes.
    public init(bytes: some Collection<UInt8>) throws(DeviceTokenError) {
        guard bytes.count == Self.byteCount else {
            throw DeviceTokenError(.wrongByteCount, found: bytes.count)
        }
        var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        withUnsafeMutableBytes(of: &words) { raw in
            raw.copyBytes(from: bytes)
        }
        self.words = words
    }

    /// Parses the hex form: 64 hex digits of either case; spaces anywhere and one pair of enclosing angle
    /// brackets are ignored.
    public init(hex: String) throws(DeviceTokenError) {
        var hex = hex
        let parsed = hex.withUTF8 { utf8 in
            Result { () throws(DeviceTokenError) in try DeviceToken(hexUTF8: UnsafeRawBufferPointer(utf8)) }
        }
        self = try parsed.get()
    }

    /// Parses the hex form from UTF-8 bytes (for example a field of a CSV file read into memory).
    ///
    /// Columns in errors count from 1 within `hexUTF8`.
    @inlinable
    public init(hexUTF8 text: UnsafeRawBufferPointer) throws(DeviceTokenError) {
        // The common case, 64 hex digits and nothing else, decodes without a branch per character.
        if text.count == 2 * Self.byteCount, let token = Self.decodeCompactHex(text) {
            self = token
            return
        }
        try self.init(generalHexUTF8: text)
    }

    /// The compact hex form only: exactly 64 hex digits of either case, nothing else; nil for any other text (which
    /// `init(hexUTF8:)` may still read, or name the fault of). The per-row path of a token file.
    @inlinable @inline(__always)
    public init?(compactHex text: UnsafeRawBufferPointer) {
        guard text.count == 2 * Self.byteCount, let token = Self.decodeCompactHex(text) else { return nil }
        self = token
    }

    /// Decodes exactly 64 hex digits; nil if any is not one (the general path then says which).
    ///
    /// Sixteen digits at a time in SSE2 registers where the processor has them (`salvo_decode_hex64`); elsewhere
    /// eight at a time in a 64-bit word (`decodeEightDigits`): 8 steps without a branch, not 32 of two digits.
    @inlinable
    static func decodeCompactHex(_ text: UnsafeRawBufferPointer) -> DeviceToken? {
        precondition(text.count == 2 * Self.byteCount)
        if salvo_hex64_available() {
            // Sixteen digits a step with SSE2 (`CSalvoHex`): every x86-64 processor; the words below elsewhere.
            var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
            let valid = withUnsafeMutableBytes(of: &words) { out in
                salvo_decode_hex64(
                    text.baseAddress!.assumingMemoryBound(to: UInt8.self),
                    out.baseAddress!.assumingMemoryBound(to: UInt8.self)
                )
            }
            return valid ? DeviceToken(words: words) : nil
        }
        return Self.decodeCompactHexByWords(text)
    }

    /// `decodeCompactHex` eight digits at a time in a 64-bit word, on any processor (and tested against the vector
    /// form on one that has it).
    @inlinable
    package static func decodeCompactHexByWords(_ text: UnsafeRawBufferPointer) -> DeviceToken? {
        precondition(text.count == 2 * Self.byteCount)
        var invalid: UInt64 = 0
        @inline(__always)
        func word(_ index: Int) -> UInt64 {
            let low = Self.decodeEightDigits(text.loadUnaligned(fromByteOffset: 16 &* index, as: UInt64.self))
            let high = Self.decodeEightDigits(text.loadUnaligned(fromByteOffset: 16 &* index &+ 8, as: UInt64.self))
            invalid |= low.invalid | high.invalid
            // Bytes in memory order, as `words` keeps them.
            return (UInt64(low.bytes) | UInt64(high.bytes) << 32).littleEndian
        }
        let words = (word(0), word(1), word(2), word(3))
        return invalid == 0 ? DeviceToken(words: words) : nil
    }

    /// Eight hex digits as loaded from memory (`raw`, native byte order) to the four bytes they write, the first
    /// digit pair in the low 8 bits; `invalid` is nonzero when any of the eight is not a hex digit.
    ///
    /// Bytes at or above 0x80 are invalid; below, `x + (0x80 - bound)` sets a byte's top bit exactly when it is at
    /// least `bound` and never carries into the next byte, which tells the ranges 0-9, a-f and (folded) A-F apart.
    @inlinable @inline(__always)
    static func decodeEightDigits(_ raw: UInt64) -> (bytes: UInt32, invalid: UInt64) {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let tops: UInt64 = 0x8080_8080_8080_8080
        let word = UInt64(littleEndian: raw)
        let ascii = word & ~tops
        @inline(__always)
        func atLeast(_ value: UInt64, _ bound: UInt8) -> UInt64 {
            (value &+ ones &* UInt64(0x80 &- bound)) & tops
        }
        let digit = atLeast(ascii, UInt8(ascii: "0")) & ~atLeast(ascii, UInt8(ascii: "9") &+ 1)
        let folded = ascii | (ones &* 0x20)
        let letter = atLeast(folded, UInt8(ascii: "a")) & ~atLeast(folded, UInt8(ascii: "f") &+ 1)
        let invalid = (word & tops) | ((digit | letter) ^ tops)
        // A digit's value is its low 4 bits; a letter's (bit 0x40 set) is its low 4 bits plus 9.
        let values = (ascii & (ones &* 0x0F)) &+ ((ascii >> 6) & ones) &* 9
        // Pairs of nibbles to bytes, one per 16-bit lane, then the four lanes' bytes side by side.
        var packed = ((values << 4) | (values >> 8)) & 0x00FF_00FF_00FF_00FF
        packed = (packed | packed >> 8) & 0x0000_FFFF_0000_FFFF
        packed = (packed | packed >> 16) & 0xFFFF_FFFF
        return (UInt32(truncatingIfNeeded: packed), invalid)
    }

    /// A hex digit's value, or 0xF0 for any other byte (so that invalid digits can be OR-ed together).
    @inlinable @inline(__always)
    static func nibbleOrInvalid(_ character: UInt8) -> UInt8 {
        let digit = character &- UInt8(ascii: "0")
        let letter = (character | 0x20) &- UInt8(ascii: "a")
        return digit < 10 ? digit : (letter < 6 ? letter &+ 10 : 0xF0)
    }

    /// The general form: spaces anywhere, optional angle brackets, errors with their column.
    @usableFromInline
    init(generalHexUTF8 text: UnsafeRawBufferPointer) throws(DeviceTokenError) {
        var start = 0
        var end = text.count
        while start < end, text[start] == UInt8(ascii: " ") { start += 1 }
        while end > start, text[end - 1] == UInt8(ascii: " ") { end -= 1 }
        if start < end, text[start] == UInt8(ascii: "<") {
            guard text[end - 1] == UInt8(ascii: ">") else {
                throw DeviceTokenError(.unbalancedBracket, found: end - start, column: start + 1)
            }
            start += 1
            end -= 1
        }

        var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        var digits = 0
        var high: UInt8 = 0
        try withUnsafeMutableBytes(of: &words) { (raw: UnsafeMutableRawBufferPointer) throws(DeviceTokenError) in
            var index = start
            while index < end {
                let character = text[index]
                index += 1
                if character == UInt8(ascii: " ") { continue }
                guard let value = Self.nibble(character) else {
                    throw DeviceTokenError(.invalidCharacter, found: Int(character), column: index)
                }
                if digits < 2 * Self.byteCount {
                    if digits & 1 == 0 {
                        high = value << 4
                    } else {
                        raw[digits >> 1] = high | value
                    }
                }
                digits += 1
            }
        }
        guard digits == 2 * Self.byteCount else {
            throw DeviceTokenError(.wrongLength, found: digits)
        }
        self.words = words
    }

    @inlinable @inline(__always)
    static func nibble(_ character: UInt8) -> UInt8? {
        let digit = character &- UInt8(ascii: "0")
        if digit < 10 { return digit }
        let letter = (character | 0x20) &- UInt8(ascii: "a")
        if letter < 6 { return letter &+ 10 }
        return nil
    }

    /// Calls `body` with the token's 32 bytes.
    @inlinable
    public func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        try Swift.withUnsafeBytes(of: self.words, body)
    }

    /// The token's bytes as an array (for reports and tests; the hot path uses `withUnsafeBytes`).
    public var bytes: [UInt8] {
        self.withUnsafeBytes { Array($0) }
    }

    /// The 64-character lowercase hex form, as reports and the HTTP/2 path (`/3/device/<hex>`) use it.
    public var hexString: String {
        String(unsafeUninitializedCapacity: 2 * Self.byteCount) { out in
            self.writeHex(to: out.baseAddress!)
            return 2 * Self.byteCount
        }
    }

    /// Writes the 64 lowercase hex digits at `out` (room for 64 bytes): the one hex writer of reports, the HTTP/2
    /// request path and the unsettled file, with no string made on the way.
    @inlinable
    public func writeHex(to out: UnsafeMutablePointer<UInt8>) {
        self.withUnsafeBytes { Hex.write($0, to: out) }
    }

    @inlinable
    public static func == (lhs: DeviceToken, rhs: DeviceToken) -> Bool {
        lhs.words.0 == rhs.words.0 && lhs.words.1 == rhs.words.1 && lhs.words.2 == rhs.words.2
            && lhs.words.3 == rhs.words.3
    }

    @inlinable
    public func hash(into hasher: inout Hasher) {
        hasher.combine(self.words.0)
        hasher.combine(self.words.1)
        hasher.combine(self.words.2)
        hasher.combine(self.words.3)
    }
}

extension DeviceToken: CustomStringConvertible {
    public var description: String { self.hexString }
}

/// Lowercase hex: the one writer (and reader) of the hex forms Salvo prints and keeps (device tokens, job
/// identities, digests, control tokens).
public enum Hex {
    /// Writes two lowercase hex digits per byte of `bytes` at `out` (room for `2 * bytes.count` bytes), with no
    /// string made on the way.
    @inlinable
    public static func write(_ bytes: UnsafeRawBufferPointer, to out: UnsafeMutablePointer<UInt8>) {
        let digits: StaticString = "0123456789abcdef"
        let table = digits.utf8Start
        for (index, byte) in bytes.enumerated() {
            out[2 * index] = table[Int(byte >> 4)]
            out[2 * index + 1] = table[Int(byte & 0x0f)]
        }
    }

    /// `bytes` as lowercase hex digits, two per byte.
    public static func string(_ bytes: some Sequence<UInt8>) -> String {
        let bytes = Array(bytes)
        guard !bytes.isEmpty else { return "" }
        return String(unsafeUninitializedCapacity: 2 * bytes.count) { out in
            bytes.withUnsafeBytes { Hex.write($0, to: out.baseAddress!) }
            return 2 * bytes.count
        }
    }

    /// The bytes of `text` read as lowercase hex digits, two per byte (the form `string` writes); nil for an odd
    /// count or any other character.
    public static func bytes(_ text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let high = Self.lowercaseDigit(digits[index]), let low = Self.lowercaseDigit(digits[index + 1]) else {
                return nil
            }
            bytes.append(high << 4 | low)
        }
        return bytes
    }

    private static func lowercaseDigit(_ character: UInt8) -> UInt8? {
        switch character {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return character - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return character - UInt8(ascii: "a") + 10
        default: return nil
        }
    }
}
