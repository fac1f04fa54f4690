import Foundation
import NIOSSL

extension CertificateFactory {
    /// The passphrase of `Paths.encryptedClientKey`.
    public static let keyPassphrase = "correct horse"
    /// The passphrase of `Paths.clientPKCS12`.
    public static let pkcs12Passphrase = "battery staple"

    /// The files in a certificate folder.
    public struct Paths: Sendable {
        public var folder: String
        public var ca: String { self.folder + "/ca.pem" }
        public var caKey: String { self.folder + "/ca-key.pem" }
        public var server: String { self.folder + "/server.pem" }
        public var serverKey: String { self.folder + "/server-key.pem" }
        public var client: String { self.folder + "/client.pem" }
        public var clientKey: String { self.folder + "/client-key.pem" }
        /// The client's key, encrypted (PKCS#8, PBES2 with AES-256-CBC) with `keyPassphrase`.
        public var encryptedClientKey: String { self.folder + "/client-key-encrypted.pem" }
        /// The client's certificate, key and the CA as PKCS#12, with `pkcs12Passphrase`.
        public var clientPKCS12: String { self.folder + "/client.p12" }
        /// A client certificate from the CA whose validity has ended, and its key.
        public var expiredClient: String { self.folder + "/expired-client.pem" }
        public var expiredClientKey: String { self.folder + "/expired-client-key.pem" }
        /// Another CA (`foreignAuthorityName`), which signed neither the server nor the client.
        public var foreignCA: String { self.folder + "/foreign-ca.pem" }
        /// A client certificate and key signed by the other CA (refused by peers that trust `ca`).
        public var foreignClient: String { self.folder + "/foreign-client.pem" }
        public var foreignClientKey: String { self.folder + "/foreign-client-key.pem" }

        public init(folder: String) {
            self.folder = folder
        }
    }

    /// Writes the CA, the server, a client for `topic` (also as an encrypted key and as PKCS#12), an expired
    /// client, and another CA with its client into `folder` (made if missing). Keys are readable by the owner
    /// only.
    @discardableResult
    public func write(to folder: String, topic: String) throws(CertificateFactoryError) -> Paths {
        let paths = Paths(folder: folder)
        let client = try self.client(topic: topic)
        let expired = try self.client(topic: topic, expired: true)
        let foreignAuthority = try CertificateFactory(authorityName: Self.foreignAuthorityName)
        let foreign = try foreignAuthority.client(topic: topic)
        do {
            let encryptedKey = try EncryptedPrivateKey.pem(
                privateKeyPEM: client.privateKeyPEM,
                passphrase: Self.keyPassphrase
            )
            let bundle = try NIOSSLPKCS12Bundle(
                certificateChain: [try client.certificate, try self.ca.certificate],
                privateKey: try client.key
            ).serialize(passphrase: Array(Self.pkcs12Passphrase.utf8))
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            let files: [(String, String, Bool)] = [
                (paths.ca, self.ca.certificatePEM, false), (paths.caKey, self.ca.privateKeyPEM, true),
                (paths.server, self.server.certificatePEM, false), (paths.serverKey, self.server.privateKeyPEM, true),
                (paths.client, client.certificatePEM, false), (paths.clientKey, client.privateKeyPEM, true),
                (paths.encryptedClientKey, encryptedKey, true),
                (paths.expiredClient, expired.certificatePEM, false),
                (paths.expiredClientKey, expired.privateKeyPEM, true),
                (paths.foreignCA, foreignAuthority.ca.certificatePEM, false),
                (paths.foreignClient, foreign.certificatePEM, false),
                (paths.foreignClientKey, foreign.privateKeyPEM, true),
            ]
            for (path, contents, isPrivate) in files {
                try Self.write(Data(contents.utf8), to: path, isPrivate: isPrivate)
            }
            try Self.write(Data(bundle), to: paths.clientPKCS12, isPrivate: true)
        } catch {
            throw CertificateFactoryError("cannot write certificates to \(folder): \(error)")
        }
        return paths
    }

    /// The certificates in `folder`, made first if the folder has none.
    public static func ensure(in folder: String, topic: String) throws(CertificateFactoryError) -> Paths {
        let paths = Paths(folder: folder)
        let needed = [paths.ca, paths.server, paths.serverKey, paths.client, paths.clientKey]
        if needed.allSatisfy({ FileManager.default.fileExists(atPath: $0) }) { return paths }
        return try CertificateFactory().write(to: folder, topic: topic)
    }

    /// The topic of the shared folder's client certificates.
    public static let sharedTopic = "com.example.salvo"

    private static func write(_ data: Data, to path: String, isPrivate: Bool) throws {
        try data.write(to: URL(fileURLWithPath: path), options: .atomic)
        if isPrivate { try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path) }
    }
}
