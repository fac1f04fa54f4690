internal import COpenSSL
import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// One TLS session (client or server role) over buffers, with no I/O of its own: the connection lends
/// it received ciphertext (`receive`), and collects what it produced from `buffers.outbound`.
///
/// Confined to its connection's queue. OpenSSL's error queue is per thread, so each call clears it
/// first and drains it before returning.
final class TLSSession {
    /// What a handshake or read step came to.
    enum Step {
        /// The handshake finished.
        case complete
        /// More ciphertext from the peer is needed.
        case wantRead
        /// The peer sent close_notify.
        case closed
        /// The session failed; nothing more can be done with it.
        case failed(SalvoIOError)
    }

    let context: TLSContext
    let buffers: TLSBIOBuffers
    /// "host:port" under which the client caches its session for resumption (nil: no resumption).
    let peerKey: String?
    private let ssl: OpaquePointer

    init(context: TLSContext, serverName: String?, peerKey: String?, outboundCapacity: Int) throws {
        self.context = context
        self.peerKey = peerKey
        buffers = TLSBIOBuffers(outboundCapacity: outboundCapacity)
        OpenSSLErrors.clear()
        guard let ssl = SSL_new(context.context) else {
            throw SalvoIOError(
                .invalidConfiguration,
                OpenSSLErrors.message(
                    "SSL_new failed",
                    details: OpenSSLErrors.drain()
                )
            )
        }
        self.ssl = ssl
        guard let bio = TLSBIO.make(buffers) else {
            SSL_free(ssl)
            throw SalvoIOError(.invalidConfiguration, "BIO_new failed")
        }
        // One BIO for both directions: SSL_set_bio takes a single reference in that case.
        SSL_set_bio(ssl, bio, bio)
        if context.role == .client {
            SSL_set_connect_state(ssl)
            if let serverName {
                try setPeerIdentity(serverName)
            }
            if let peerKey {
                context.resume(ssl, key: peerKey)
            }
        } else {
            SSL_set_accept_state(ssl)
        }
        CSalvoSSL_SSL_set_app_data(ssl, Unmanaged.passUnretained(self).toOpaque())
    }

    deinit {
        SSL_free(ssl)
    }

    /// Verifies the server's certificate against `name`: an IP address is checked with
    /// `X509_VERIFY_PARAM_set1_ip_asc`, a host name with `SSL_set1_host` (and sent as SNI).
    private func setPeerIdentity(_ name: String) throws {
        var v6 = in6_addr()
        let isIP = Socket.Address(numericHost: name, port: 0) != nil || inet_pton(AF_INET6, name, &v6) == 1
        if isIP {
            guard X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name) == 1 else {
                throw SalvoIOError(.invalidConfiguration, "cannot verify against IP address \(name)")
            }
        } else {
            guard SSL_set1_host(ssl, name) == 1, CSalvoSSL_SSL_set_tlsext_host_name(ssl, name) == 1 else {
                throw SalvoIOError(.invalidConfiguration, "cannot verify against host name \(name)")
            }
        }
    }

    /// Lends received ciphertext to the BIO for the next calls. Everything is consumed by the time a
    /// step returns `.wantRead`.
    func receive(_ ciphertext: UnsafeRawBufferPointer) {
        buffers.inbound = ciphertext
        buffers.inboundOffset = 0
    }

    /// Forgets lent ciphertext (after the receive buffer is reused).
    func releaseInbound() {
        buffers.inbound = UnsafeRawBufferPointer(start: nil, count: 0)
        buffers.inboundOffset = 0
    }

    /// Advances the handshake with whatever ciphertext is lent; output lands in `buffers.outbound`.
    func handshake() -> Step {
        OpenSSLErrors.clear()
        let rc = SSL_do_handshake(ssl)
        if rc == 1 {
            return .complete
        }
        let code = SSL_get_error(ssl, rc)
        if code == SSL_ERROR_WANT_READ {
            return .wantRead
        }
        return .failed(failure(code, inHandshake: true))
    }

    /// Encrypts all of `plaintext` with one SSL_write (records of up to 16 KiB each) straight into
    /// `buffers.outbound`, reserving room first so the buffer does not grow record by record.
    func write(_ plaintext: UnsafeRawBufferPointer) throws {
        guard plaintext.count > 0 else { return }
        let records = plaintext.count / 16_384 + 1
        buffers.outbound.reserveCapacity(minimumWritableBytes: plaintext.count + records * 64)
        OpenSSLErrors.clear()
        var offset = 0
        // Bounded: SSL_write takes an Int32 length, so at most a few passes for any buffer.
        while offset < plaintext.count {
            let chunk = min(plaintext.count - offset, 1 << 30)
            let rc = SSL_write(ssl, plaintext.baseAddress! + offset, Int32(chunk))
            guard rc > 0 else {
                throw failure(SSL_get_error(ssl, rc), inHandshake: false)
            }
            offset += Int(rc)
        }
    }

    /// Decrypts what the lent ciphertext holds into `plaintext`, up to `limit` readable bytes.
    /// Returns `.wantRead` when the ciphertext is used up, `.complete` when `plaintext` reached the limit
    /// (call again after delivering it), `.closed` on close_notify.
    func read(into plaintext: inout ByteBuffer, limit: Int) -> Step {
        OpenSSLErrors.clear()
        // Bounded by `limit`: every pass adds at least one byte or returns.
        while plaintext.readableBytes < limit {
            let room = limit - plaintext.readableBytes
            var code: Int32 = 0
            let count = plaintext.writeWithUnsafeMutableBytes(minimumWritableBytes: room) { target -> Int in
                let rc = SSL_read(ssl, target.baseAddress, Int32(min(room, target.count)))
                if rc > 0 {
                    return Int(rc)
                }
                code = SSL_get_error(ssl, rc)
                return 0
            }
            if count > 0 {
                continue
            }
            switch code {
            case SSL_ERROR_WANT_READ: return .wantRead
            case SSL_ERROR_ZERO_RETURN: return .closed
            default: return .failed(failure(code, inHandshake: false))
            }
        }
        return .complete
    }

    /// Queues close_notify into `buffers.outbound`.
    func shutdown() {
        OpenSSLErrors.clear()
        _ = SSL_shutdown(ssl)
        OpenSSLErrors.clear()
    }

    /// Whether this handshake resumed a cached session (no full handshake).
    var isSessionReused: Bool { SSL_session_reused(ssl) == 1 }

    /// The negotiated protocol version, e.g. "TLSv1.3".
    var protocolVersion: String { String(cString: SSL_get_version(ssl)) }

    /// The negotiated cipher suite, e.g. "TLS_AES_128_GCM_SHA256".
    var cipherName: String {
        guard let cipher = SSL_get_current_cipher(ssl) else { return "" }
        return String(cString: SSL_CIPHER_get_name(cipher))
    }

    /// The UID attribute (OID 0.9.2342.19200300.100.1.1) of the peer certificate's subject; APNs
    /// certificates carry the app's topic (bundle id) there.
    var peerSubjectUID: String? {
        guard let certificate = SSL_get1_peer_certificate(ssl) else { return nil }
        defer { X509_free(certificate) }
        guard let name = X509_get_subject_name(certificate) else { return nil }
        let index = X509_NAME_get_index_by_NID(name, NID_userId, -1)
        guard index >= 0, let entry = X509_NAME_get_entry(name, index),
            let data = X509_NAME_ENTRY_get_data(entry)
        else { return nil }
        var utf8: UnsafeMutablePointer<UInt8>?
        let length = ASN1_STRING_to_UTF8(&utf8, data)
        guard length >= 0, let utf8 else { return nil }
        defer { CSalvoSSL_OPENSSL_free(utf8) }
        return String(decoding: UnsafeBufferPointer(start: utf8, count: Int(length)), as: UTF8.self)
    }

    /// The peer certificate's subject as one line, or nil without a peer certificate.
    var peerSubject: String? {
        guard let certificate = SSL_get1_peer_certificate(ssl) else { return nil }
        defer { X509_free(certificate) }
        return TLSCredentialLoader.subject(of: certificate)
    }

    /// Turns an SSL_get_error code plus the error queue and the verification result into an error that
    /// says what happened and what to fix.
    private func failure(_ code: Int32, inHandshake: Bool) -> SalvoIOError {
        let (reasons, details) = OpenSSLErrors.drainWithReasons()
        let verify = Int32(SSL_get_verify_result(ssl))
        let peer = context.role == .client ? "the server's certificate" : "the client's certificate"
        if inHandshake, verify != X509_V_OK {
            let why = String(cString: X509_verify_cert_error_string(Int(verify)))
            let text = OpenSSLErrors.message("\(peer) was rejected: \(why)", details: details)
            switch verify {
            case X509_V_ERR_CERT_HAS_EXPIRED, X509_V_ERR_CERT_NOT_YET_VALID:
                return SalvoIOError(.certificateExpired, text + "; the peer must renew it (or check the clock)")
            case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY, X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT,
                X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT, X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN,
                X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
                return SalvoIOError(.unknownCA, text + "; trust the CA that signed it (CA file)")
            case X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH:
                return SalvoIOError(.hostnameMismatch, text + "; connect with the name the certificate names")
            default:
                return SalvoIOError(.certificateRejected, text)
            }
        }
        if reasons.contains(SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE) {
            return SalvoIOError(
                .peerCertificateMissing,
                OpenSSLErrors.message("the client sent no certificate, and one is required", details: details)
            )
        }
        // Reasons from 1000 up are alerts the peer sent (SSL_AD_REASON_OFFSET + alert number).
        if let alert = reasons.first(where: { $0 >= SSL_AD_REASON_OFFSET && $0 < SSL_AD_REASON_OFFSET + 256 }) {
            let hint: String
            switch alert - SSL_AD_REASON_OFFSET {
            case SSL3_AD_BAD_CERTIFICATE, TLS1_AD_UNKNOWN_CA, SSL_AD_CERTIFICATE_REQUIRED,
                SSL3_AD_CERTIFICATE_UNKNOWN, SSL3_AD_CERTIFICATE_EXPIRED:
                hint =
                    "the peer did not accept our certificate: check that the client certificate is configured, "
                    + "valid, and issued by a CA the peer trusts"
            case SSL3_AD_HANDSHAKE_FAILURE, TLS1_AD_PROTOCOL_VERSION, TLS1_AD_INSUFFICIENT_SECURITY:
                hint = "no common protocol version or cipher, or the peer requires a client certificate"
            default:
                hint = "the peer ended the handshake"
            }
            return SalvoIOError(
                .handshakeRefused,
                OpenSSLErrors.message(
                    "handshake refused: \(hint)",
                    details: details
                )
            )
        }
        if code == SSL_ERROR_SYSCALL || code == SSL_ERROR_ZERO_RETURN {
            let what =
                inHandshake
                ? "the peer closed the connection during the TLS handshake"
                : "the peer closed the connection without close_notify"
            return SalvoIOError(
                inHandshake ? .handshakeFailed : .tlsProtocol,
                OpenSSLErrors.message(what, details: details)
            )
        }
        let what =
            inHandshake
            ? "TLS handshake failed: the peer's answer is not a TLS handshake we accept (another protocol on this "
                + "port, or no common TLS version)"
            : "TLS error"
        return SalvoIOError(
            inHandshake ? .protocolMismatch : .tlsProtocol,
            OpenSSLErrors.message(what, details: details)
        )
    }
}
