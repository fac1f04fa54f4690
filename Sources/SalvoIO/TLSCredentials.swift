/// A certificate with its private key: PEM files (the key possibly encrypted) or a PKCS#12 bundle.
public struct TLSCredentials: Sendable {
    enum Source: Sendable {
        case pem(certificateChainFile: String, privateKeyFile: String, passphrase: String?)
        case pkcs12(file: String, passphrase: String?)
    }

    let source: Source

    /// A PEM certificate chain (leaf first) and a PEM private key, encrypted if `passphrase` is given.
    public static func pem(certificateChainFile: String, privateKeyFile: String, passphrase: String? = nil) -> Self {
        Self(
            source: .pem(
                certificateChainFile: certificateChainFile,
                privateKeyFile: privateKeyFile,
                passphrase: passphrase
            )
        )
    }

    /// A PKCS#12 (`.p12`) bundle holding the certificate, its key and optionally the chain.
    public static func pkcs12(file: String, passphrase: String?) -> Self {
        Self(source: .pkcs12(file: file, passphrase: passphrase))
    }
}
