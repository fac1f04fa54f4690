/// A job that cannot run or cannot go on, for both protocols: the input cannot be read, an output cannot be
/// written, the configuration cannot work, the credentials are refused, the gateway cannot be reached after every
/// retry. Compared by `code`; `message` says what happened and what to fix. Refused rows are never errors: they
/// are counted in the report.
public struct JobError: Error, Hashable, CustomStringConvertible, Sendable {
    /// What kind of failure: a value compared for equality, open to new kinds.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let description: String
        private init(_ description: String) { self.description = description }

        /// An input file cannot be read, or changed during the job (not a bad row: those are reported and skipped).
        public static let input = Code("input")
        /// An output path cannot be written, or would overwrite an input or another output.
        public static let output = Code("output")
        /// The configuration cannot work (a payload over its limit, headers every request would fail for).
        public static let configuration = Code("configuration")
        /// The gateway refused the credentials (or its own identity did not check out).
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
