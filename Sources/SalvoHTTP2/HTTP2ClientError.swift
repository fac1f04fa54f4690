/// An error of the HTTP/2 client: bad credentials or configuration, a connection that cannot be made, or a
/// job that cannot go on.
///
/// A struct with a code rather than an enum, so new kinds can be added without breaking callers. APNs
/// reasons are not thrown: they are values in a job's report.
public struct HTTP2ClientError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What kind of failure this is; compare codes, not messages.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        fileprivate let name: String

        /// A signing key that cannot be read (not PKCS#8 PEM of a P-256 key), or a bad key id or team id.
        public static let signingKey = Code(name: "signingKey")
        /// Certificates, keys or trust roots that cannot be loaded.
        public static let credentials = Code(name: "credentials")
        /// A configuration value out of range.
        public static let configuration = Code(name: "configuration")
        /// No connection could be made or kept (after the reconnect policy gave up).
        public static let connection = Code(name: "connection")
        /// The server did not negotiate HTTP/2 with ALPN.
        public static let protocolNegotiation = Code(name: "protocolNegotiation")

        public var description: String { self.name }
    }

    public let code: Code
    /// What went wrong and what to do, for a person.
    public let message: String
    public let file: String
    public let line: Int

    public init(_ code: Code, _ message: String, file: String = #fileID, line: Int = #line) {
        self.code = code
        self.message = message
        self.file = file
        self.line = line
    }

    public var description: String { self.message }

    public static func == (lhs: HTTP2ClientError, rhs: HTTP2ClientError) -> Bool {
        lhs.code == rhs.code && lhs.message == rhs.message
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(self.code)
        hasher.combine(self.message)
    }
}
