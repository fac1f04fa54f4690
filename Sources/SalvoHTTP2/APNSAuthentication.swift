import NIOSSL

/// How a job proves who it is to APNs: a client certificate in the TLS handshake, or a provider token in every
/// request's `authorization` header.
public struct APNSAuthentication: Sendable {
    enum Storage: Sendable {
        case certificate(chain: [NIOSSLCertificate], key: NIOSSLPrivateKey)
        case token(ProviderToken)
    }

    let storage: Storage

    /// A client certificate (leaf first, then any intermediates) and its private key.
    public static func certificate(chain: [NIOSSLCertificate], key: NIOSSLPrivateKey) -> APNSAuthentication {
        APNSAuthentication(storage: .certificate(chain: chain, key: key))
    }

    /// A client certificate from PEM files; `keyFile` may be the certificate file when it holds both.
    public static func certificate(
        pemFile: String,
        keyFile: String,
        passphrase: String? = nil
    ) throws(HTTP2ClientError) -> APNSAuthentication {
        let chain: [NIOSSLCertificate]
        do {
            chain = try NIOSSLCertificate.fromPEMFile(pemFile)
        } catch {
            throw HTTP2ClientError(.credentials, "cannot read a PEM certificate from \(pemFile): \(error)")
        }
        guard !chain.isEmpty else {
            throw HTTP2ClientError(.credentials, "\(pemFile) holds no PEM certificate")
        }
        let key: NIOSSLPrivateKey
        do {
            if let passphrase {
                key = try NIOSSLPrivateKey(file: keyFile, format: .pem) { provide in provide(Array(passphrase.utf8)) }
            } else {
                key = try NIOSSLPrivateKey(file: keyFile, format: .pem)
            }
        } catch {
            throw HTTP2ClientError(
                .credentials,
                "cannot read the private key \(keyFile)\(passphrase == nil ? " (encrypted? give its passphrase)" : ""): \(error)"
            )
        }
        return .certificate(chain: chain, key: key)
    }

    /// A client certificate and key from a PKCS#12 (`.p12`) file, as Keychain Access exports it.
    public static func pkcs12(file: String, passphrase: String) throws(HTTP2ClientError) -> APNSAuthentication {
        do {
            let bundle = try NIOSSLPKCS12Bundle(file: file, passphrase: Array(passphrase.utf8))
            return .certificate(chain: bundle.certificateChain, key: bundle.privateKey)
        } catch {
            throw HTTP2ClientError(.credentials, "cannot read the PKCS#12 file \(file) (wrong passphrase?): \(error)")
        }
    }

    /// Token authentication: every connection of a job sends the one token `token` keeps fresh.
    public static func token(_ token: ProviderToken) -> APNSAuthentication {
        APNSAuthentication(storage: .token(token))
    }

    /// The provider token, with token authentication.
    public var providerToken: ProviderToken? {
        if case .token(let token) = self.storage { return token }
        return nil
    }
}
