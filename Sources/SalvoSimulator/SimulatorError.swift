/// An error from the simulator: a code to compare, a reason for people, and where it was raised.
///
/// A struct rather than an enum so that new codes never break a caller's `switch`. APNs status
/// codes are not errors here: they are values the simulator sends and counts.
public struct SimulatorError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What went wrong, comparable across releases.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let name: String
        public var description: String { self.name }

        /// A fault plan file or option could not be read or had a bad value.
        public static let invalidFaultPlan = Code(name: "invalidFaultPlan")
        /// Certificates could not be made, written or read.
        public static let certificates = Code(name: "certificates")
        /// An expected-token file could not be read.
        public static let expectedTokens = Code(name: "expectedTokens")
        /// The server could not bind or start.
        public static let startup = Code(name: "startup")
    }

    public var code: Code
    public var reason: String
    public var file: String
    public var line: Int

    public init(_ code: Code, _ reason: String, file: String = #fileID, line: Int = #line) {
        self.code = code
        self.reason = reason
        self.file = file
        self.line = line
    }

    public var description: String { "\(self.code): \(self.reason)" }

    public static func == (lhs: SimulatorError, rhs: SimulatorError) -> Bool {
        lhs.code == rhs.code && lhs.reason == rhs.reason
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(self.code)
        hasher.combine(self.reason)
    }
}
