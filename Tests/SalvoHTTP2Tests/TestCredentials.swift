import Crypto
import Foundation
import NIOSSL
import X509

/// Certificates made in memory at test time (nothing private is committed): a CA, a server certificate for
/// `localhost`, a client certificate the CA signed, and one a foreign CA signed.
struct TestCredentials: Sendable {
    struct Identity: Sendable {
        var certificatePEM: String
        var keyPEM: String
        var certificate: NIOSSLCertificate {
            try! NIOSSLCertificate(bytes: Array(self.certificatePEM.utf8), format: .pem)
        }
        var key: NIOSSLPrivateKey { try! NIOSSLPrivateKey(bytes: Array(self.keyPEM.utf8), format: .pem) }
    }

    let caPEM: String
    let server: Identity
    let client: Identity
    let foreignClient: Identity

    var caCertificate: NIOSSLCertificate { try! NIOSSLCertificate(bytes: Array(self.caPEM.utf8), format: .pem) }
    var trustRoots: NIOSSLTrustRoots { .certificates([self.caCertificate]) }

    static let shared: TestCredentials = {
        do {
            return try make()
        } catch {
            fatalError("cannot make test certificates: \(error)")
        }
    }()

    private static func make() throws -> TestCredentials {
        let (caKey, caName, caPEM) = try authority("Salvo HTTP/2 Test CA")
        let (foreignKey, foreignName, _) = try authority("Salvo HTTP/2 Foreign CA")
        let server = try issue(
            common: "localhost",
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames([.dnsName("localhost")])
            },
            caKey: caKey,
            caName: caName
        )
        let clientExtensions = try Certificate.Extensions {
            Critical(BasicConstraints.notCertificateAuthority)
            try ExtendedKeyUsage([.clientAuth])
        }
        let client = try issue(
            common: "Apple Push Services: com.example.salvo",
            extensions: clientExtensions,
            caKey: caKey,
            caName: caName
        )
        let foreign = try issue(
            common: "Apple Push Services: com.example.salvo",
            extensions: clientExtensions,
            caKey: foreignKey,
            caName: foreignName
        )
        return TestCredentials(caPEM: caPEM, server: server, client: client, foreignClient: foreign)
    }

    private static func authority(_ common: String) throws -> (Certificate.PrivateKey, DistinguishedName, String) {
        let key = P256.Signing.PrivateKey()
        let name = try DistinguishedName { CommonName(common) }
        let certificate = try Certificate(
            version: .v3,
            serialNumber: .init(),
            publicKey: .init(key.publicKey),
            notValidBefore: Date().addingTimeInterval(-3600),
            notValidAfter: Date().addingTimeInterval(86400),
            issuer: name,
            subject: name,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
            },
            issuerPrivateKey: .init(key)
        )
        return (Certificate.PrivateKey(key), name, try certificate.serializeAsPEM().pemString)
    }

    private static func issue(
        common: String,
        extensions: Certificate.Extensions,
        caKey: Certificate.PrivateKey,
        caName: DistinguishedName
    ) throws -> Identity {
        let key = P256.Signing.PrivateKey()
        let certificate = try Certificate(
            version: .v3,
            serialNumber: .init(),
            publicKey: .init(key.publicKey),
            notValidBefore: Date().addingTimeInterval(-3600),
            notValidAfter: Date().addingTimeInterval(86400),
            issuer: caName,
            subject: try DistinguishedName { CommonName(common) },
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: extensions,
            issuerPrivateKey: caKey
        )
        return Identity(certificatePEM: try certificate.serializeAsPEM().pemString, keyPEM: key.pemRepresentation)
    }
}
