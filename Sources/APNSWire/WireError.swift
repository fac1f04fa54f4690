/// A byte stream that is not the protocol it should be (as opposed to a protocol-level status).
public struct WireError: Error, Hashable, Sendable {
    /// What kind of problem this is.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let name: String
        /// The first byte is not the command this stream carries.
        public static let unexpectedCommand = Code(name: "unexpectedCommand")
        public var description: String { self.name }
    }

    public let code: Code
    /// The offending value (for `unexpectedCommand`, the command byte).
    public let value: Int

    public init(_ code: Code, value: Int) {
        self.code = code
        self.value = value
    }
}

extension WireError: CustomStringConvertible {
    public var description: String {
        switch self.code {
        case .unexpectedCommand: "unexpected command byte \(self.value) in the gateway's answer"
        default: "\(self.code) (\(self.value))"
        }
    }
}
