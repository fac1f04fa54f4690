import SalvoIO
import SalvoTestSupport
import SalvoTestTraits
import Testing

@Suite("Loading certificates and keys", .tags(.pure), .runs(.pure))
struct CredentialTests {
    let c = TLSFixtures.certificates

    private func clientContext(_ credentials: TLSCredentials) throws -> TLSContext {
        try TLSContext(configuration: .client(credentials: credentials, trustedCAFile: c.ca))
    }

    private func error(_ body: () throws -> Void) -> SalvoIOError? {
        do {
            try body()
            return nil
        } catch {
            return error as? SalvoIOError
        }
    }

    @Test("an encrypted key loads with its passphrase")
    func encryptedKeyWithPassphrase() throws {
        _ = try clientContext(
            .pem(
                certificateChainFile: c.client,
                privateKeyFile: c.encryptedClientKey,
                passphrase: CertificateFactory.keyPassphrase
            )
        )
    }

    @Test("a wrong or missing key passphrase gives a clear error")
    func wrongPassphrase() throws {
        let wrong = error {
            _ = try clientContext(
                .pem(
                    certificateChainFile: c.client,
                    privateKeyFile: c.encryptedClientKey,
                    passphrase: "wrong"
                )
            )
        }
        #expect(wrong?.code == .wrongPassphrase)
        #expect(wrong?.message.contains("passphrase") == true)
        #expect(wrong?.message.contains(c.encryptedClientKey) == true)
        let missing = error {
            _ = try clientContext(
                .pem(
                    certificateChainFile: c.client,
                    privateKeyFile: c.encryptedClientKey
                )
            )
        }
        #expect(missing?.code == .wrongPassphrase)
        #expect(missing?.message.contains("encrypted") == true)
    }

    @Test("a PKCS#12 bundle loads with its passphrase and refuses a wrong one")
    func pkcs12() throws {
        _ = try clientContext(.pkcs12(file: c.clientPKCS12, passphrase: CertificateFactory.pkcs12Passphrase))
        let wrong = error { _ = try clientContext(.pkcs12(file: c.clientPKCS12, passphrase: "nope")) }
        #expect(wrong?.code == .wrongPassphrase)
    }

    @Test("a key that belongs to another certificate is refused")
    func keyMismatch() throws {
        let mismatch = error {
            _ = try clientContext(.pem(certificateChainFile: c.client, privateKeyFile: c.serverKey))
        }
        #expect(mismatch?.code == .keyMismatch, "\(String(describing: mismatch))")
    }

    @Test("an expired client certificate is refused with its date")
    func expiredCertificate() throws {
        let expired = error {
            _ = try clientContext(
                .pem(
                    certificateChainFile: c.expiredClient,
                    privateKeyFile: c.expiredClientKey
                )
            )
        }
        #expect(expired?.code == .certificateExpired)
        #expect(expired?.message.contains("expired on") == true)
    }

    @Test("a missing file is reported with its path")
    func missingFile() throws {
        let missing = error {
            _ = try clientContext(.pem(certificateChainFile: "/nonexistent/cert.pem", privateKeyFile: c.clientKey))
        }
        #expect(missing?.code == .unreadableCredential)
        #expect(missing?.message.contains("/nonexistent/cert.pem") == true)
    }
}
