/// How a `TLSContext` is set up. TLS 1.2 is the minimum, always.
public struct TLSConfiguration: Sendable {
    /// Client or server.
    public var role: TLSRole
    /// Our certificate and key: the APNs client certificate, or the server's certificate.
    public var credentials: TLSCredentials?
    /// PEM file of CAs to trust for the peer's certificate; nil means the system store.
    public var trustedCAFile: String?
    /// Verify the peer's certificate. Clients always should; a server sets this to require a client
    /// certificate signed by `trustedCAFile` (the handshake fails without one).
    public var verifyPeer: Bool
    /// TLS 1.3 cipher suites (OpenSSL syntax), nil for OpenSSL's defaults.
    public var cipherSuites: String?
    /// TLS 1.2 cipher list (OpenSSL syntax), nil for OpenSSL's defaults.
    public var cipherList: String?
    /// Highest protocol version to offer: nil for TLS 1.3, or `"TLS1.2"` to stay on TLS 1.2.
    public var maximumVersion: String?

    /// A client that verifies the server against `trustedCAFile` (or the system store) and presents
    /// `credentials` if given.
    public static func client(credentials: TLSCredentials?, trustedCAFile: String? = nil) -> Self {
        Self(role: .client, credentials: credentials, trustedCAFile: trustedCAFile, verifyPeer: true)
    }

    /// A server presenting `credentials`; with `clientCAFile` it requires client certificates signed by
    /// those CAs.
    public static func server(credentials: TLSCredentials, clientCAFile: String? = nil) -> Self {
        Self(role: .server, credentials: credentials, trustedCAFile: clientCAFile, verifyPeer: clientCAFile != nil)
    }

    /// Every setting spelled out; prefer `client(…)` and `server(…)`.
    public init(
        role: TLSRole,
        credentials: TLSCredentials?,
        trustedCAFile: String?,
        verifyPeer: Bool,
        cipherSuites: String? = nil,
        cipherList: String? = nil,
        maximumVersion: String? = nil
    ) {
        self.role = role
        self.credentials = credentials
        self.trustedCAFile = trustedCAFile
        self.verifyPeer = verifyPeer
        self.cipherSuites = cipherSuites
        self.cipherList = cipherList
        self.maximumVersion = maximumVersion
    }
}
