/// Which side of the TLS handshake a session plays.
public struct TLSRole: Hashable, Sendable, CustomStringConvertible {
    private let name: String

    private init(_ name: String) {
        self.name = name
    }

    public var description: String { name }

    /// Connects, verifies the server, presents a client certificate if configured.
    public static let client = TLSRole("client")
    /// Accepts, presents its certificate, optionally requires and verifies a client certificate.
    public static let server = TLSRole("server")
}
