internal import COpenSSL

#if canImport(Glibc)
import Glibc
#endif

/// Loads a certificate and private key into an `SSL_CTX`, turning OpenSSL's failures into errors that
/// say what to fix: wrong or missing passphrase, key that does not match the certificate, expired
/// certificate, unreadable file.
enum TLSCredentialLoader {
    static func load(_ credentials: TLSCredentials, into context: OpaquePointer) throws {
        switch credentials.source {
        case .pem(let chainFile, let keyFile, let passphrase):
            try loadPEM(chainFile: chainFile, keyFile: keyFile, passphrase: passphrase, into: context)
        case .pkcs12(let file, let passphrase):
            try loadPKCS12(file: file, passphrase: passphrase, into: context)
        }
        guard let leaf = SSL_CTX_get0_certificate(context) else {
            throw SalvoIOError(.unreadableCredential, "no certificate was loaded")
        }
        try checkValidity(leaf)
        OpenSSLErrors.clear()
        guard SSL_CTX_check_private_key(context) == 1 else {
            throw SalvoIOError(
                .keyMismatch,
                OpenSSLErrors.message(
                    "the private key does not belong to the certificate; pair each certificate with its own key",
                    details: OpenSSLErrors.drain()
                )
            )
        }
    }

    private static func loadPEM(
        chainFile: String,
        keyFile: String,
        passphrase: String?,
        into context: OpaquePointer
    )
        throws
    {
        OpenSSLErrors.clear()
        guard SSL_CTX_use_certificate_chain_file(context, chainFile) == 1 else {
            throw SalvoIOError(
                .unreadableCredential,
                OpenSSLErrors.message(
                    "cannot read a PEM certificate chain from \(chainFile)",
                    details: OpenSSLErrors.drain()
                )
            )
        }
        guard let bio = BIO_new_file(keyFile, "r") else {
            throw SalvoIOError(
                .unreadableCredential,
                OpenSSLErrors.message("cannot open the private key file \(keyFile)", details: OpenSSLErrors.drain())
            )
        }
        defer { BIO_free(bio) }
        let key = readPrivateKey(bio, passphrase: passphrase)
        guard let key else {
            let details = OpenSSLErrors.drain()
            if isEncryptedPEM(keyFile) {
                let what =
                    passphrase == nil
                    ? "the private key in \(keyFile) is encrypted; give its passphrase"
                    : "the passphrase for the private key in \(keyFile) is wrong"
                throw SalvoIOError(.wrongPassphrase, OpenSSLErrors.message(what, details: details))
            }
            throw SalvoIOError(
                .unreadableCredential,
                OpenSSLErrors.message("cannot read a PEM private key from \(keyFile)", details: details)
            )
        }
        defer { EVP_PKEY_free(key) }
        guard SSL_CTX_use_PrivateKey(context, key) == 1 else {
            throw SalvoIOError(
                .keyMismatch,
                OpenSSLErrors.message(
                    "the private key in \(keyFile) does not belong to the certificate in \(chainFile)",
                    details: OpenSSLErrors.drain()
                )
            )
        }
    }

    private static func readPrivateKey(_ bio: OpaquePointer, passphrase: String?) -> OpaquePointer? {
        // The callback copies the passphrase handed through `u`; without one it answers "no passphrase"
        // rather than letting OpenSSL prompt on the terminal.
        let callback: @convention(c) (UnsafeMutablePointer<CChar>?, Int32, Int32, UnsafeMutableRawPointer?) -> Int32 = {
            buffer,
            size,
            _,
            user in
            guard let buffer, let user else { return 0 }
            let length = min(Int(size), strlen(user.assumingMemoryBound(to: CChar.self)))
            memcpy(buffer, user, length)
            return Int32(length)
        }
        guard let passphrase else {
            return PEM_read_bio_PrivateKey(bio, nil, callback, nil)
        }
        var bytes = Array(passphrase.utf8CString)
        return bytes.withUnsafeMutableBytes { PEM_read_bio_PrivateKey(bio, nil, callback, $0.baseAddress) }
    }

    private static func isEncryptedPEM(_ path: String) -> Bool {
        guard let file = fopen(path, "r") else { return false }
        defer { fclose(file) }
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = fread(&buffer, 1, buffer.count - 1, file)
        let head = String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return head.contains("ENCRYPTED")
    }

    private static func loadPKCS12(file: String, passphrase: String?, into context: OpaquePointer) throws {
        OpenSSLErrors.clear()
        guard let bio = BIO_new_file(file, "rb") else {
            throw SalvoIOError(
                .unreadableCredential,
                OpenSSLErrors.message("cannot open the PKCS#12 file \(file)", details: OpenSSLErrors.drain())
            )
        }
        defer { BIO_free(bio) }
        guard let bundle = d2i_PKCS12_bio(bio, nil) else {
            throw SalvoIOError(
                .unreadableCredential,
                OpenSSLErrors.message("\(file) is not a PKCS#12 (.p12) file", details: OpenSSLErrors.drain())
            )
        }
        defer { PKCS12_free(bundle) }
        guard PKCS12_verify_mac(bundle, passphrase, -1) == 1 else {
            throw SalvoIOError(
                .wrongPassphrase,
                OpenSSLErrors.message(
                    passphrase == nil
                        ? "the PKCS#12 file \(file) is protected; give its passphrase"
                        : "the passphrase for the PKCS#12 file \(file) is wrong",
                    details: OpenSSLErrors.drain()
                )
            )
        }
        var key: OpaquePointer?
        var certificate: OpaquePointer?
        var chain: OpaquePointer?
        guard PKCS12_parse(bundle, passphrase, &key, &certificate, &chain) == 1, let key, let certificate else {
            throw SalvoIOError(
                .unreadableCredential,
                OpenSSLErrors.message(
                    "cannot decode the PKCS#12 file \(file) (unsupported legacy algorithm?)",
                    details: OpenSSLErrors.drain()
                )
            )
        }
        defer {
            EVP_PKEY_free(key)
            X509_free(certificate)
            if let chain {
                OPENSSL_sk_pop_free(chain) { X509_free(OpaquePointer($0)) }
            }
        }
        guard SSL_CTX_use_certificate(context, certificate) == 1 else {
            throw SalvoIOError(
                .unreadableCredential,
                OpenSSLErrors.message("cannot use the certificate from \(file)", details: OpenSSLErrors.drain())
            )
        }
        guard SSL_CTX_use_PrivateKey(context, key) == 1 else {
            throw SalvoIOError(
                .keyMismatch,
                OpenSSLErrors.message(
                    "the key in \(file) does not belong to its certificate",
                    details: OpenSSLErrors.drain()
                )
            )
        }
        if let chain {
            let count = OPENSSL_sk_num(chain)
            for index in 0..<count {
                if let extra = OPENSSL_sk_value(chain, index) {
                    _ = CSalvoSSL_SSL_CTX_add1_chain_cert(context, OpaquePointer(extra))
                }
            }
        }
    }

    /// Refuses a certificate that is expired or not yet valid, with the date, before any handshake.
    private static func checkValidity(_ certificate: OpaquePointer) throws {
        if X509_cmp_current_time(X509_get0_notAfter(certificate)) < 0 {
            throw SalvoIOError(
                .certificateExpired,
                "our certificate (\(subject(of: certificate))) expired on \(notAfter(of: certificate)); renew it"
            )
        }
        if X509_cmp_current_time(X509_get0_notBefore(certificate)) > 0 {
            throw SalvoIOError(
                .certificateExpired,
                "our certificate (\(subject(of: certificate))) is not valid yet; check the clock or the certificate"
            )
        }
    }

    static func subject(of certificate: OpaquePointer) -> String {
        guard let name = X509_get_subject_name(certificate),
            let text = X509_NAME_oneline(name, nil, 0)
        else { return "?" }
        defer { CSalvoSSL_OPENSSL_free(text) }
        return String(cString: text)
    }

    private static func notAfter(of certificate: OpaquePointer) -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { return "?" }
        defer { BIO_free(bio) }
        _ = ASN1_TIME_print(bio, X509_get0_notAfter(certificate))
        var buffer = [CChar](repeating: 0, count: 64)
        let count = BIO_read(bio, &buffer, Int32(buffer.count - 1))
        return count > 0 ? String(decoding: buffer[0..<Int(count)].map { UInt8(bitPattern: $0) }, as: UTF8.self) : "?"
    }
}
