/// An error from the transport layer: a `code` to compare for equality and a `message` that says what
/// went wrong and what to do about it.
///
/// A struct rather than an enum so that new codes can be added without breaking callers that switch
/// over the ones they know.
public struct SalvoIOError: Error, CustomStringConvertible, Sendable {
    /// What kind of failure this is. Compare with `==`; new codes may appear in later versions.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String

        private init(_ name: String) {
            self.name = name
        }

        public var description: String { name }

        /// A system call failed with an errno that has no more specific code.
        public static let systemCall = Code("systemCall")
        /// io_uring cannot be used here (old kernel, seccomp, `kernel.io_uring_disabled`).
        public static let ioUringUnavailable = Code("ioUringUnavailable")
        /// The peer refused the TCP connection.
        public static let connectionRefused = Code("connectionRefused")
        /// The TCP connection or the handshake did not finish within the timeout.
        public static let timedOut = Code("timedOut")
        /// The peer reset the connection (ECONNRESET, EPIPE).
        public static let connectionReset = Code("connectionReset")
        /// The connection is closed or closing; nothing more can be written.
        public static let connectionClosed = Code("connectionClosed")
        /// A TLS setting is invalid (bad cipher list, unreadable file, unusable address).
        public static let invalidConfiguration = Code("invalidConfiguration")
        /// A certificate or key file could not be read or parsed.
        public static let unreadableCredential = Code("unreadableCredential")
        /// The private key or PKCS#12 bundle is encrypted and the passphrase is missing or wrong.
        public static let wrongPassphrase = Code("wrongPassphrase")
        /// The private key does not belong to the certificate.
        public static let keyMismatch = Code("keyMismatch")
        /// A certificate (ours or the peer's) is expired or not yet valid.
        public static let certificateExpired = Code("certificateExpired")
        /// The peer's certificate is not signed by a trusted CA.
        public static let unknownCA = Code("unknownCA")
        /// The peer's certificate does not name the host or IP address we connected to.
        public static let hostnameMismatch = Code("hostnameMismatch")
        /// The peer's certificate failed verification for another reason.
        public static let certificateRejected = Code("certificateRejected")
        /// We are the server, a client certificate is required and the client sent none.
        public static let peerCertificateMissing = Code("peerCertificateMissing")
        /// The peer sent a fatal alert: it refused our handshake (often: our client certificate).
        public static let handshakeRefused = Code("handshakeRefused")
        /// The TLS handshake failed for another reason (protocol version, ciphers, garbage).
        public static let handshakeFailed = Code("handshakeFailed")
        /// The peer answered the handshake with something that is not TLS as we speak it (a plain-text service,
        /// another protocol on that port): retrying cannot help.
        public static let protocolMismatch = Code("protocolMismatch")
        /// The host name cannot be resolved.
        public static let nameResolution = Code("nameResolution")
        /// A TLS record could not be processed after the handshake.
        public static let tlsProtocol = Code("tlsProtocol")
        /// The proxy refused the tunnel (its credentials, the gateway's port, its SOCKS5 methods) or does not speak
        /// its protocol: retrying cannot help.
        public static let proxyRefused = Code("proxyRefused")
    }

    /// What kind of failure this is.
    public var code: Code
    /// What went wrong and what to do about it, including OpenSSL's own error strings where relevant.
    public var message: String
    /// The errno, when a system call or an io_uring completion reported one.
    public var errno: Int32?
    /// Where the error was raised, for bug reports.
    public var location: String

    /// An error with `code` and a `message` that says what to fix; `file`/`line` record where it arose.
    public init(
        _ code: Code,
        _ message: String,
        errno: Int32? = nil,
        file: StaticString = #fileID,
        line: UInt = #line
    ) {
        self.code = code
        self.message = message
        self.errno = errno
        self.location = "\(file):\(line)"
    }

    public var description: String { "\(code): \(message)" }
}
