import Crypto
import Foundation
import SalvoSimulator

/// A provider-token signing key for the simulator's HTTP/2 endpoint, as Apple hands one out: a PKCS#8 PEM
/// `AuthKey_<key id>.p8` with a key id and a team id (ES256, P-256). Made at run time into the certificate
/// folder, never committed.
public struct DevelopmentSigningKey: Sendable {
    /// The key id the simulator is told about.
    public static let keyID = "SALVODEV01"
    /// The team id the simulator is told about.
    public static let teamID = "SALVOTEAM1"

    /// The `.p8` file.
    public let path: String
    /// What the endpoint needs to check tokens signed with it.
    public let providerKey: HTTP2EndpointConfiguration.ProviderKey

    /// The key in `folder`, made first when the folder has none.
    public static func ensure(in folder: String) throws(CertificateFactoryError) -> DevelopmentSigningKey {
        let path = folder + "/AuthKey_\(Self.keyID).p8"
        do {
            let key: P256.Signing.PrivateKey
            if FileManager.default.fileExists(atPath: path) {
                key = try P256.Signing.PrivateKey(pemRepresentation: try String(contentsOfFile: path, encoding: .utf8))
            } else {
                try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
                key = P256.Signing.PrivateKey()
                try key.pemRepresentation.write(toFile: path, atomically: true, encoding: .utf8)
                try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
            }
            return DevelopmentSigningKey(path: path, providerKey: Self.providerKey(for: key))
        } catch {
            throw CertificateFactoryError("cannot make or read the signing key \(path): \(error)")
        }
    }

    /// What the endpoint needs to check tokens signed with `key` under `keyID` and `teamID`.
    public static func providerKey(
        for key: P256.Signing.PrivateKey,
        keyID: String = Self.keyID,
        teamID: String = Self.teamID
    ) -> HTTP2EndpointConfiguration.ProviderKey {
        .init(keyID: keyID, teamID: teamID, publicKey: Array(key.publicKey.rawRepresentation))
    }
}
