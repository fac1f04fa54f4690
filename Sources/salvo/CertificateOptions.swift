import APNSWire
import ArgumentParser
import Foundation
import SalvoBinary
import SalvoConsole
import SalvoHTTP2
import SalvoRows

/// The client certificate and the trust for a TLS server (shared by `send` and `feedback`).
struct CertificateOptions: ParsableArguments {
    @Option(help: "The client certificate (PEM).")
    var cert: String?

    @Option(help: "The client certificate's private key (PEM).")
    var key: String?

    @Option(help: "The client certificate and key as one PKCS#12 file (instead of --cert and --key).")
    var pkcs12: String?

    @Option(help: "The passphrase of the key or the PKCS#12 file.")
    var passphrase: String?

    @Option(help: "CA certificates (PEM) to trust for the server (default: the system's).")
    var ca: String?

    @Option(help: "The name the server's certificate must carry (default: the host).")
    var serverName: String?

    /// Whether exactly one client certificate was given: `--cert` with `--key`, or `--pkcs12`.
    var isGiven: Bool { (self.cert != nil && self.key != nil) != (self.pkcs12 != nil) }

    /// Whether any certificate option was given.
    var isAnyGiven: Bool { self.cert != nil || self.key != nil || self.pkcs12 != nil }

    /// The certificate for the binary interface and the feedback service.
    ///
    /// - Precondition: `isGiven`.
    var credentials: GatewayCredentials {
        let identity: GatewayCredentials.Identity =
            if let pkcs12 { .pkcs12(file: pkcs12, passphrase: self.passphrase) } else {
                .pem(certificateChainFile: self.cert!, privateKeyFile: self.key!, passphrase: self.passphrase)
            }
        return GatewayCredentials(identity: identity, trustedCAFile: self.ca)
    }
}

/// HTTP/2 token authentication (shared by `send` and `check`): the signing key and its ids.
struct SigningKeyOptions: ParsableArguments {
    @Option(help: "HTTP/2 token authentication: the signing key (AuthKey_<key id>.p8), instead of a certificate.")
    var authKey: String?

    @Option(name: .customLong("key-id"), help: "The signing key's 10-character key id (with --auth-key).")
    var keyID: String?

    @Option(name: .customLong("team-id"), help: "The 10-character team id (with --auth-key).")
    var teamID: String?

    /// Refuses a `--key-id` or `--team-id` that is not one Apple issues (`APNSHeaderValueRules`).
    func validateIdentifiers() throws(ValidationError) {
        for (option, value) in [("--key-id", self.keyID), ("--team-id", self.teamID)] {
            if let value, let problem = APNSHeaderValueRules.identifierProblem(value, option: option) {
                throw ValidationError(problem)
            }
        }
    }
}

/// The HTTP/2 credentials the options name (`send`, `channels`, `broadcast`, `serve`), for the library to choose
/// among and load (`HTTP2Credentials`).
func http2Credentials(
    certificate: CertificateOptions,
    signingKey: SigningKeyOptions,
    providerTokenFile: String?,
    tokenCache: String?
) -> HTTP2Credentials {
    HTTP2Credentials(
        providerTokenFile: providerTokenFile,
        authKey: signingKey.authKey,
        keyID: signingKey.keyID,
        teamID: signingKey.teamID,
        tokenCache: tokenCache,
        certificate: certificate.cert,
        key: certificate.key,
        pkcs12: certificate.pkcs12,
        passphrase: certificate.passphrase
    )
}

/// The credential the options name, loaded (`HTTP2Credentials.authentication`); one that cannot be read is a
/// `UserError` naming it (exit 3).
func http2Authentication(
    certificate: CertificateOptions,
    signingKey: SigningKeyOptions,
    providerTokenFile: String?,
    tokenCache: String?
) throws(UserError) -> APNSAuthentication {
    let credentials = http2Credentials(
        certificate: certificate,
        signingKey: signingKey,
        providerTokenFile: providerTokenFile,
        tokenCache: tokenCache
    )
    do {
        return try credentials.authentication(warn: { message in printError(message, prefix: "warning: ") })
    } catch {
        throw UserError(error.message)
    }
}
