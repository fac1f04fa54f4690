import SalvoHTTP2
import SalvoTestTraits
import Testing

/// The one choice among the HTTP/2 credentials a command was given (`HTTP2Credentials`): exactly one of a provider
/// token file, a signing key with its ids, and a certificate, complete; the precedence `send` and `serve` load by;
/// and a choice that cannot be read names its file.
@Suite(.tags(.pure), .runs(.pure)) struct HTTP2CredentialsTests {
    static let signingKey = HTTP2Credentials(authKey: "AuthKey.p8", keyID: "ABCDE12345", teamID: "TEAM123456")

    @Test func aSigningKeyWithItsIdsIsChosen() throws {
        #expect(
            try Self.signingKey.choice() == .signingKey(p8File: "AuthKey.p8", keyID: "ABCDE12345", teamID: "TEAM123456")
        )
    }

    @Test func aCertificateIsChosenAsPEMOrPKCS12() throws {
        let pem = HTTP2Credentials(certificate: "c.pem", key: "k.pem", passphrase: "p")
        #expect(try pem.choice() == .certificate(pemFile: "c.pem", keyFile: "k.pem", passphrase: "p"))
        #expect(try HTTP2Credentials(pkcs12: "c.p12").choice() == .pkcs12(file: "c.p12", passphrase: ""))
    }

    @Test func aProviderTokenFileIsChosen() throws {
        #expect(try HTTP2Credentials(providerTokenFile: "token").choice() == .providerTokenFile("token"))
    }

    @Test(arguments: [
        HTTP2Credentials(),
        HTTP2Credentials(authKey: "AuthKey.p8", keyID: "ABCDE12345", teamID: "TEAM123456", certificate: "c.pem"),
        HTTP2Credentials(providerTokenFile: "token", pkcs12: "c.p12"),
        HTTP2Credentials(providerTokenFile: "token", authKey: "AuthKey.p8"),
    ])
    func noneOrMoreThanOneIsRefused(credentials: HTTP2Credentials) {
        #expect(throws: HTTP2Credentials.Problem.notExactlyOne) { try credentials.choice() }
        #expect(
            HTTP2Credentials.Problem.notExactlyOne.message
                == "give one of --auth-key (with --key-id and --team-id), --provider-token-file, or --cert and --key / "
                + "--pkcs12"
        )
    }

    @Test func aSigningKeyWithoutItsIdsIsRefused() {
        #expect(throws: HTTP2Credentials.Problem.signingKeyWithoutIDs) {
            try HTTP2Credentials(authKey: "AuthKey.p8", keyID: "ABCDE12345").choice()
        }
        #expect(HTTP2Credentials.Problem.signingKeyWithoutIDs.message == "--auth-key needs --key-id and --team-id")
    }

    @Test(arguments: [
        HTTP2Credentials(certificate: "c.pem"),
        HTTP2Credentials(key: "k.pem"),
        HTTP2Credentials(certificate: "c.pem", key: "k.pem", pkcs12: "c.p12"),
    ])
    func anIncompleteCertificateIsRefused(credentials: HTTP2Credentials) {
        #expect(throws: HTTP2Credentials.Problem.incompleteCertificate) { try credentials.choice() }
        #expect(HTTP2Credentials.Problem.incompleteCertificate.message == "give --cert and --key, or --pkcs12")
    }

    /// A command that lets more than one through (`serve` takes a signing key or a certificate) loads by precedence.
    @Test func thePreferredCredentialGoesByPrecedence() {
        var credentials = HTTP2Credentials(
            providerTokenFile: "token",
            authKey: "AuthKey.p8",
            keyID: "ABCDE12345",
            teamID: "TEAM123456",
            certificate: "c.pem",
            key: "k.pem",
            pkcs12: "c.p12"
        )
        #expect(credentials.preferred == .providerTokenFile("token"))
        credentials.providerTokenFile = nil
        #expect(credentials.preferred == .signingKey(p8File: "AuthKey.p8", keyID: "ABCDE12345", teamID: "TEAM123456"))
        credentials.authKey = nil
        #expect(credentials.preferred == .pkcs12(file: "c.p12", passphrase: ""))
        credentials.pkcs12 = nil
        #expect(credentials.preferred == .certificate(pemFile: "c.pem", keyFile: "k.pem", passphrase: nil))
        credentials.key = nil
        #expect(credentials.preferred == nil)
    }

    @Test(arguments: [
        (HTTP2Credentials(certificate: "/nonexistent/c.pem", key: "/nonexistent/k.pem"), "/nonexistent/c.pem"),
        (HTTP2Credentials(pkcs12: "/nonexistent/c.p12"), "the PKCS#12 file /nonexistent/c.p12"),
        (HTTP2Credentials(providerTokenFile: "/nonexistent/token"), "the provider token file /nonexistent/token"),
        (
            HTTP2Credentials(authKey: "/nonexistent/AuthKey.p8", keyID: "ABCDE12345", teamID: "TEAM123456"),
            "/nonexistent/AuthKey.p8"
        ),
    ])
    func aChoiceThatCannotBeReadNamesItsFile(credentials: HTTP2Credentials, named: String) {
        let error = #expect(throws: HTTP2ClientError.self) {
            _ = try credentials.authentication(environment: [:])
        }
        #expect(error?.message.contains(named) == true, "\(error?.message ?? "")")
    }

    @Test func noCredentialCannotBeLoaded() {
        let error = #expect(throws: HTTP2ClientError.self) { _ = try HTTP2Credentials().authentication() }
        #expect(error?.code == .credentials)
    }
}
