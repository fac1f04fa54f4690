/// Why a device token could not be read.
///
/// An extensible struct rather than an enum: `code` is compared for equality, and the message names what
/// was wrong and where, so a report line can be shown to a person as it is.
public struct DeviceTokenError: Error, Hashable, Sendable {
    /// What kind of problem this is.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let name: String
        /// A character that is neither a hex digit nor a space.
        public static let invalidCharacter = Code(name: "invalidCharacter")
        /// Not 64 hex digits.
        public static let wrongLength = Code(name: "wrongLength")
        /// Raw bytes that are not 32.
        public static let wrongByteCount = Code(name: "wrongByteCount")
        /// A `<` without its `>`.
        public static let unbalancedBracket = Code(name: "unbalancedBracket")
        /// A character outside the base64 alphabets (`--token-encoding base64`).
        public static let invalidBase64Character = Code(name: "invalidBase64Character")
        /// Base64 that is not 32 bytes (43 characters, or 44 ending in `=`).
        public static let wrongBase64Length = Code(name: "wrongBase64Length")
        public var description: String { self.name }
    }

    /// What kind of problem this is.
    public let code: Code
    /// The offending value: the character's code point for `invalidCharacter`, the count otherwise.
    public let found: Int
    /// The 1-based column within the token text, when the problem has a place.
    public let column: Int?

    @usableFromInline
    init(_ code: Code, found: Int, column: Int? = nil) {
        self.code = code
        self.found = found
        self.column = column
    }
}

extension DeviceTokenError: CustomStringConvertible {
    public var description: String {
        switch self.code {
        case .invalidCharacter:
            let scalar = Unicode.Scalar(UInt8(truncatingIfNeeded: self.found))
            let shown =
                self.found >= 0x21 && self.found < 0x7f
                ? "'\(Character(scalar))'" : "byte 0x\(String(self.found, radix: 16))"
            return "invalid character \(shown) at column \(self.column ?? 0): a token is 64 hex digits (0-9, a-f)"
        case .wrongLength:
            return "a token has 64 hex digits; this one has \(self.found)"
        case .wrongByteCount:
            return "a token has 32 bytes; this one has \(self.found)"
        case .unbalancedBracket:
            return "'<' at column \(self.column ?? 0) has no closing '>'"
        case .invalidBase64Character:
            let shown =
                self.found >= 0x21 && self.found < 0x7f
                ? "'\(Character(Unicode.Scalar(UInt8(truncatingIfNeeded: self.found))))'"
                : "byte 0x\(String(self.found, radix: 16))"
            return
                "invalid character \(shown) at column \(self.column ?? 0): a base64 token uses A-Z, a-z, 0-9, + and /"
        case .wrongBase64Length:
            return "a base64 token has 43 characters, or 44 ending in '='; this one has \(self.found)"
        default:
            return "\(self.code) (\(self.found))"
        }
    }
}
