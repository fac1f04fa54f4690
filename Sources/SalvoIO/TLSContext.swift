internal import COpenSSL
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#endif

/// An OpenSSL `SSL_CTX` set up from a `TLSConfiguration`: protocol floor (TLS 1.2), credentials, trust,
/// verification, and for clients a cache of one resumable session per peer.
///
/// Thread-safe once created: connections on any queue may share one context. The session cache is
/// guarded by a lock; everything else is read-only after `init`.
public final class TLSContext: @unchecked Sendable {
    /// Client or server.
    public let role: TLSRole
    let context: OpaquePointer
    private let lock = NIOLock()
    // peer key ("host:port") → SSL_SESSION we hold one reference to.
    private var sessions: [String: OpaquePointer] = [:]

    /// Builds the context, loading every file now so that configuration mistakes surface here with a
    /// message that says what to fix (wrong passphrase, key that does not match, expired certificate).
    public init(configuration: TLSConfiguration) throws {
        role = configuration.role
        OpenSSLErrors.clear()
        guard let method = configuration.role == .client ? TLS_client_method() : TLS_server_method(),
            let context = SSL_CTX_new(method)
        else {
            throw SalvoIOError(
                .invalidConfiguration,
                OpenSSLErrors.message(
                    "SSL_CTX_new failed",
                    details: OpenSSLErrors.drain()
                )
            )
        }
        self.context = context
        // On failure the object is released and `deinit` frees the SSL_CTX.
        try configure(configuration)
    }

    deinit {
        for session in sessions.values {
            SSL_SESSION_free(session)
        }
        SSL_CTX_free(context)
    }

    private func configure(_ configuration: TLSConfiguration) throws {
        guard CSalvoSSL_SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION) == 1 else {
            throw configurationError("cannot set TLS 1.2 as the minimum version")
        }
        if configuration.maximumVersion == "TLS1.2" {
            _ = CSalvoSSL_SSL_CTX_set_max_proto_version(context, TLS1_2_VERSION)
        }
        // Large plaintext writes go out as few full records; read-ahead lets one BIO read take many.
        CSalvoSSL_SSL_CTX_set_read_ahead(context, 1)
        if let suites = configuration.cipherSuites, SSL_CTX_set_ciphersuites(context, suites) != 1 {
            throw configurationError("cipher suites \"\(suites)\" are not understood by OpenSSL")
        }
        if let list = configuration.cipherList, SSL_CTX_set_cipher_list(context, list) != 1 {
            throw configurationError("cipher list \"\(list)\" is not understood by OpenSSL")
        }
        if let credentials = configuration.credentials {
            try TLSCredentialLoader.load(credentials, into: context)
        } else if configuration.role == .server {
            throw SalvoIOError(.invalidConfiguration, "a TLS server needs a certificate and key (credentials)")
        }
        if configuration.verifyPeer {
            if let caFile = configuration.trustedCAFile {
                guard SSL_CTX_load_verify_locations(context, caFile, nil) == 1 else {
                    throw SalvoIOError(
                        .unreadableCredential,
                        OpenSSLErrors.message(
                            "cannot load trusted CAs from \(caFile); is it a PEM file?",
                            details: OpenSSLErrors.drain()
                        )
                    )
                }
                if configuration.role == .server, let names = SSL_load_client_CA_file(caFile) {
                    SSL_CTX_set_client_CA_list(context, names)
                }
            } else if SSL_CTX_set_default_verify_paths(context) != 1 {
                throw configurationError("cannot load the system's trusted CAs")
            }
            var mode = SSL_VERIFY_PEER
            if configuration.role == .server {
                mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT
            }
            SSL_CTX_set_verify(context, mode, nil)
        } else {
            SSL_CTX_set_verify(context, SSL_VERIFY_NONE, nil)
        }
        if configuration.role == .server {
            // Needed for resumption when client certificates are verified; any constant works.
            let id: [UInt8] = Array("salvo".utf8)
            _ = SSL_CTX_set_session_id_context(context, id, UInt32(id.count))
        } else {
            // Keep sessions ourselves (one per peer) and resume with them on reconnect.
            _ = CSalvoSSL_SSL_CTX_set_session_cache_mode(
                context,
                Int(SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE)
            )
            SSL_CTX_sess_set_new_cb(context) { ssl, session in
                guard let ssl, let session, let owner = CSalvoSSL_SSL_get_app_data(ssl) else { return 0 }
                let tlsSession = Unmanaged<TLSSession>.fromOpaque(owner).takeUnretainedValue()
                guard let key = tlsSession.peerKey else { return 0 }
                tlsSession.context.storeSession(session, for: key)
                // 1: we keep the reference OpenSSL handed us.
                return 1
            }
        }
    }

    private func configurationError(_ message: String) -> SalvoIOError {
        SalvoIOError(.invalidConfiguration, OpenSSLErrors.message(message, details: OpenSSLErrors.drain()))
    }

    func storeSession(_ session: OpaquePointer, for key: String) {
        let previous = lock.withLock { () -> OpaquePointer? in
            let previous = sessions[key]
            sessions[key] = session
            return previous
        }
        if let previous {
            SSL_SESSION_free(previous)
        }
    }

    /// Sets the cached session for `key` on `ssl` (SSL_set_session takes its own reference).
    func resume(_ ssl: OpaquePointer, key: String) {
        lock.withLock {
            if let session = sessions[key] {
                _ = SSL_set_session(ssl, session)
            }
        }
    }

    /// Forgets the cached session for `host:port`, so that the next handshake is a full one (tests of
    /// resumption use it; OpenSSL itself drops a session the peer refused).
    package func forgetSession(forHost host: String, port: Int) {
        let previous = lock.withLock { sessions.removeValue(forKey: "\(host):\(port)") }
        if let previous {
            SSL_SESSION_free(previous)
        }
    }
}
