/// Why a payload cannot be sent. The message says what is wrong and where, for a person to fix it.
public struct PayloadError: Error, Hashable, Sendable {
    /// What kind of problem this is.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let name: String
        /// Not JSON (the message gives line and column).
        public static let invalidJSON = Code(name: "invalidJSON")
        /// JSON, but not an object with an `aps` object.
        public static let missingAPS = Code(name: "missingAPS")
        /// A known key with a value of the wrong type.
        public static let wrongType = Code(name: "wrongType")
        /// Larger than the format's limit.
        public static let tooLarge = Code(name: "tooLarge")
        /// Empty.
        public static let empty = Code(name: "empty")
        /// Priority 10 with an `aps` that holds only `content-available`.
        public static let backgroundAtImmediatePriority = Code(name: "backgroundAtImmediatePriority")
        /// A priority the format does not know.
        public static let invalidPriority = Code(name: "invalidPriority")
        public var description: String { self.name }
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }
}

extension PayloadError: CustomStringConvertible {
    public var description: String { self.message }
}
