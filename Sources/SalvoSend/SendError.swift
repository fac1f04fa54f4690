/// A send that could not run, or could not finish: what went wrong and what to fix. Compared by `code`.
///
/// Refused rows are never errors: they are counted in the result.
public struct SendError: Error, Hashable, Sendable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let description: String
        private init(_ description: String) { self.description = description }

        /// A token file cannot be read or parsed (not a bad row: those are reported and skipped).
        public static let input = Code("input")
        /// An output path cannot be written, or would overwrite an input or another output.
        public static let output = Code("output")
        /// The configuration cannot work (a payload over its limit, headers every request would fail for).
        public static let configuration = Code("configuration")
        /// The credentials were refused or cannot be read.
        public static let credentials = Code("credentials")
        /// The gateway could not be reached, or kept closing connections, after every retry.
        public static let unreachable = Code("unreachable")
    }

    public let code: Code
    public let message: String
    public var description: String { self.message }

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }
}
