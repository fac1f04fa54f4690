import Foundation

/// The credentials a command was given for the HTTP/2 provider API (`send`, `channels`, `broadcast`, `serve`), as
/// paths and ids: a provider token another process keeps fresh in a file, a signing key (`.p8`) with its key id and
/// team id, a PKCS#12 file, or a PEM certificate and key. One place chooses among them and loads the choice, so the
/// commands cannot drift apart in which one wins or how it is read.
public struct HTTP2Credentials: Hashable, Sendable {
    /// `--provider-token-file`.
    public var providerTokenFile: String?
    /// `--auth-key`, `--key-id`, `--team-id`.
    public var authKey: String?
    public var keyID: String?
    public var teamID: String?
    /// `--token-cache`: where a signing key's tokens are shared with other processes (nil: the default place).
    public var tokenCache: String?
    /// `--cert`, `--key`, `--pkcs12`, `--passphrase`.
    public var certificate: String?
    public var key: String?
    public var pkcs12: String?
    public var passphrase: String?

    public init(
        providerTokenFile: String? = nil,
        authKey: String? = nil,
        keyID: String? = nil,
        teamID: String? = nil,
        tokenCache: String? = nil,
        certificate: String? = nil,
        key: String? = nil,
        pkcs12: String? = nil,
        passphrase: String? = nil
    ) {
        self.providerTokenFile = providerTokenFile
        self.authKey = authKey
        self.keyID = keyID
        self.teamID = teamID
        self.tokenCache = tokenCache
        self.certificate = certificate
        self.key = key
        self.pkcs12 = pkcs12
        self.passphrase = passphrase
    }

    /// One credential, complete.
    public enum Choice: Hashable, Sendable {
        case providerTokenFile(String)
        case signingKey(p8File: String, keyID: String, teamID: String)
        case pkcs12(file: String, passphrase: String)
        case certificate(pemFile: String, keyFile: String, passphrase: String?)
    }

    /// Why no credential can be chosen; `message` is what a command line says (exit 64).
    public enum Problem: Error, Hashable, Sendable {
        /// None given, or more than one.
        case notExactlyOne
        /// `--auth-key` without its key id or team id.
        case signingKeyWithoutIDs
        /// A certificate option without the rest of the certificate (`--cert` without `--key`, or beside `--pkcs12`).
        case incompleteCertificate

        public var message: String {
            switch self {
            case .notExactlyOne:
                "give one of --auth-key (with --key-id and --team-id), --provider-token-file, or --cert and --key / "
                    + "--pkcs12"
            case .signingKeyWithoutIDs: "--auth-key needs --key-id and --team-id"
            case .incompleteCertificate: "give --cert and --key, or --pkcs12"
            }
        }
    }

    /// Whether any certificate option was given.
    var certificateIsAnyGiven: Bool { self.certificate != nil || self.key != nil || self.pkcs12 != nil }

    /// Whether exactly one certificate was given: `--cert` with `--key`, or `--pkcs12`.
    var certificateIsGiven: Bool { (self.certificate != nil && self.key != nil) != (self.pkcs12 != nil) }

    /// The one credential given, or why there is none: exactly one of a provider token file, a signing key and a
    /// certificate, and that one complete.
    public func choice() throws(Problem) -> Choice {
        let given = [self.providerTokenFile != nil, self.authKey != nil, self.certificateIsAnyGiven]
        guard given.filter({ $0 }).count == 1 else { throw .notExactlyOne }
        if self.authKey != nil, self.keyID == nil || self.teamID == nil { throw .signingKeyWithoutIDs }
        if self.certificateIsAnyGiven, !self.certificateIsGiven { throw .incompleteCertificate }
        guard let chosen = self.preferred else { throw .notExactlyOne }
        return chosen
    }

    /// The credential by precedence — a provider token file, a signing key, a PKCS#12 file, a PEM certificate and
    /// key — whatever else was given (a command that allows more than one has said which wins by this order); nil
    /// when none is complete.
    public var preferred: Choice? {
        if let path = self.providerTokenFile { return .providerTokenFile(path) }
        if let authKey = self.authKey {
            guard let keyID = self.keyID, let teamID = self.teamID else { return nil }
            return .signingKey(p8File: authKey, keyID: keyID, teamID: teamID)
        }
        if let pkcs12 = self.pkcs12 { return .pkcs12(file: pkcs12, passphrase: self.passphrase ?? "") }
        guard let certificate = self.certificate, let key = self.key else { return nil }
        return .certificate(pemFile: certificate, keyFile: key, passphrase: self.passphrase)
    }

    /// Loads the preferred credential: reads the files, and for a signing key opens its token cache (`tokenCache`,
    /// else `ProviderTokenCache.defaultPath` of `environment`).
    ///
    /// - Parameter warn: told when a provider token file's token grows old or a change to it cannot be used.
    /// - Throws: `HTTP2ClientError` naming the file that cannot be read, or `.credentials` when none is complete.
    public func authentication(
        environment: [String: String] = ProcessInfo.processInfo.environment,
        warn: @escaping @Sendable (String) -> Void = { _ in }
    ) throws(HTTP2ClientError) -> APNSAuthentication {
        switch self.preferred {
        case .providerTokenFile(let path):
            return .token(ProviderToken(file: try ProviderTokenFile(path: path, warn: warn)))
        case .signingKey(let p8File, let keyID, let teamID):
            let signer = try JWTSigner(p8File: p8File, keyID: keyID, teamID: teamID)
            let path = self.tokenCache ?? ProviderTokenCache.defaultPath(environment: environment)
            return .token(try ProviderToken(signer: signer, cache: try path.map(ProviderTokenCache.init(path:))))
        case .pkcs12(let file, let passphrase):
            return try .pkcs12(file: file, passphrase: passphrase)
        case .certificate(let pemFile, let keyFile, let passphrase):
            return try .certificate(pemFile: pemFile, keyFile: keyFile, passphrase: passphrase)
        case nil:
            throw HTTP2ClientError(.credentials, Problem.notExactlyOne.message)
        }
    }
}
