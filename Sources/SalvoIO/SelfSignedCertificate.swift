internal import COpenSSL

#if canImport(Glibc)
import Glibc
#endif

/// A throwaway P-256 key and self-signed certificate written as PEM files into a fresh temporary
/// directory, for local TLS peers that need no trust (the benchmark's sink). The files hold a private
/// key: `remove()` deletes them.
struct SelfSignedCertificate {
    let directory: String
    var certificateFile: String { directory + "/cert.pem" }
    var keyFile: String { directory + "/key.pem" }

    /// Generates the key and a certificate for `commonName`, valid for one day.
    init(commonName: String) throws {
        var template = Array("/tmp/salvo-cert-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else {
            throw Errno.error("mkdtemp", Glibc.errno)
        }
        directory = String(cString: made)
        OpenSSLErrors.clear()
        guard let key = Self.generateKey() else {
            throw SalvoIOError(
                .invalidConfiguration,
                OpenSSLErrors.message(
                    "cannot generate a P-256 key",
                    details: OpenSSLErrors.drain()
                )
            )
        }
        defer { EVP_PKEY_free(key) }
        guard let certificate = X509_new() else {
            throw SalvoIOError(.invalidConfiguration, "X509_new failed")
        }
        defer { X509_free(certificate) }
        X509_set_version(certificate, 2)
        ASN1_INTEGER_set(X509_get_serialNumber(certificate), 1)
        X509_gmtime_adj(X509_getm_notBefore(certificate), -60)
        X509_gmtime_adj(X509_getm_notAfter(certificate), 86_400)
        X509_set_pubkey(certificate, key)
        let name = X509_get_subject_name(certificate)
        _ = X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, commonName, -1, -1, 0)
        X509_set_issuer_name(certificate, name)
        guard X509_sign(certificate, key, EVP_sha256()) > 0 else {
            throw SalvoIOError(
                .invalidConfiguration,
                OpenSSLErrors.message(
                    "cannot sign the certificate",
                    details: OpenSSLErrors.drain()
                )
            )
        }
        try Self.write(to: certificateFile) { PEM_write_bio_X509($0, certificate) }
        try Self.write(to: keyFile) { PEM_write_bio_PrivateKey($0, key, nil, nil, 0, nil, nil) }
    }

    /// Deletes the files.
    func remove() {
        unlink(certificateFile)
        unlink(keyFile)
        rmdir(directory)
    }

    private static func generateKey() -> OpaquePointer? {
        guard let context = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else { return nil }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_keygen_init(context) == 1,
            EVP_PKEY_CTX_set_group_name(context, "P-256") == 1
        else { return nil }
        var key: OpaquePointer?
        guard EVP_PKEY_generate(context, &key) == 1 else { return nil }
        return key
    }

    private static func write(to path: String, _ body: (OpaquePointer) -> Int32) throws {
        guard let bio = BIO_new_file(path, "w") else {
            throw SalvoIOError(.invalidConfiguration, "cannot write \(path)")
        }
        defer { BIO_free(bio) }
        guard body(bio) == 1 else {
            throw SalvoIOError(
                .invalidConfiguration,
                OpenSSLErrors.message(
                    "cannot write PEM to \(path)",
                    details: OpenSSLErrors.drain()
                )
            )
        }
    }
}
