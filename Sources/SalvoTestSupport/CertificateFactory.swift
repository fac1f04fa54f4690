import Crypto
import Foundation
import NIOSSL
import SalvoSimulator
import SwiftASN1
import X509

/// The one maker of throwaway certificates for tests, benchmarks, `salvo demo` and `salvo simulate`: a
/// development CA, a server certificate for 127.0.0.1, ::1 and localhost, client certificates whose subject
/// UID names the topic (an expired one too), and clients from another CA, which peers must refuse. P-256 keys
/// throughout, made with swift-certificates and swift-crypto.
///
/// Nothing here is secret or long-lived: certificates are valid for 30 days and are made at run time (into a
/// folder with `write(to:topic:)`), never committed.
public struct CertificateFactory: Sendable {
    /// A certificate and its private key, both PEM.
    public struct Identity: Sendable {
        public var certificatePEM: String
        public var privateKeyPEM: String

        public init(certificatePEM: String, privateKeyPEM: String) {
            self.certificatePEM = certificatePEM
            self.privateKeyPEM = privateKeyPEM
        }

        /// The certificate for NIOSSL.
        public var certificate: NIOSSLCertificate {
            get throws { try NIOSSLCertificate(bytes: Array(self.certificatePEM.utf8), format: .pem) }
        }

        /// The private key for NIOSSL.
        public var key: NIOSSLPrivateKey {
            get throws { try NIOSSLPrivateKey(bytes: Array(self.privateKeyPEM.utf8), format: .pem) }
        }
    }

    /// The development CA, which signs the server and the client certificates.
    public let ca: Identity
    /// The server's certificate (SANs 127.0.0.1, ::1, localhost) and key.
    public let server: Identity
    private let caKey: Certificate.PrivateKey
    private let caName: DistinguishedName

    /// Makes a new CA named `authorityName` and its server certificate.
    public init(authorityName: String = "Salvo Development CA") throws(CertificateFactoryError) {
        let key = P256.Signing.PrivateKey()
        do {
            let name = try DistinguishedName {
                OrganizationName("Salvo")
                CommonName(authorityName)
            }
            let certificate = try Certificate(
                version: .v3,
                serialNumber: .init(),
                publicKey: .init(key.publicKey),
                notValidBefore: Date().addingTimeInterval(-3600),
                notValidAfter: Date().addingTimeInterval(30 * 86400),
                issuer: name,
                subject: name,
                signatureAlgorithm: .ecdsaWithSHA256,
                extensions: try Certificate.Extensions {
                    Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                    Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                },
                issuerPrivateKey: .init(key)
            )
            self.caName = name
            self.ca = Identity(
                certificatePEM: try certificate.serializeAsPEM().pemString,
                privateKeyPEM: key.pemRepresentation
            )
        } catch {
            throw CertificateFactoryError("cannot make the development CA: \(error)")
        }
        self.caKey = Certificate.PrivateKey(key)
        self.server = try Self.issue(
            subject: {
                try DistinguishedName {
                    OrganizationName("Salvo")
                    CommonName("localhost")
                }
            },
            usage: .serverAuth,
            names: [
                .dnsName("localhost"),
                .ipAddress(ASN1OctetString(contentBytes: [127, 0, 0, 1])),
                .ipAddress(ASN1OctetString(contentBytes: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1])),
            ],
            validity: Self.validity,
            caKey: self.caKey,
            caName: self.caName
        )
    }

    /// One factory per process, for tests that share certificates (made on first use).
    public static let shared: CertificateFactory = {
        do {
            return try CertificateFactory()
        } catch {
            fatalError("cannot make the shared test certificates: \(error)")
        }
    }()

    /// The CA as the only trust root, for NIOSSL clients and servers.
    public var trustRoots: NIOSSLTrustRoots {
        // The factory's own PEM: parsing it cannot fail unless the factory is broken.
        .certificates([try! self.ca.certificate])
    }

    /// A client certificate whose subject UID is `topic` (nil: no UID at all, for status 3 tests), valid for
    /// 30 days, or (`expired`) one whose validity ended an hour ago.
    public func client(topic: String?, expired: Bool = false) throws(CertificateFactoryError) -> Identity {
        try Self.issue(
            subject: {
                try DistinguishedName {
                    OrganizationName("Salvo")
                    CommonName("Apple Push Services: \(topic ?? "no topic")")
                    if let topic { UserID(topic) }
                }
            },
            usage: .clientAuth,
            names: [],
            validity: expired
                ? Date().addingTimeInterval(-2 * 86400)...Date().addingTimeInterval(-3600) : Self.validity,
            caKey: self.caKey,
            caName: self.caName
        )
    }

    /// The name of the other CA, which signs the foreign clients.
    public static let foreignAuthorityName = "Salvo Foreign CA"

    /// A client certificate for `topic` from a new CA (`foreignAuthorityName`): peers trusting `ca` must refuse
    /// it as signed by an unknown CA.
    public func foreignClient(topic: String?) throws(CertificateFactoryError) -> Identity {
        try CertificateFactory(authorityName: Self.foreignAuthorityName).client(topic: topic)
    }

    private static var validity: ClosedRange<Date> {
        Date().addingTimeInterval(-3600)...Date().addingTimeInterval(30 * 86400)
    }

    private static func issue(
        subject: () throws -> DistinguishedName,
        usage: ExtendedKeyUsage.Usage,
        names: [GeneralName],
        validity: ClosedRange<Date>,
        caKey: Certificate.PrivateKey,
        caName: DistinguishedName
    ) throws(CertificateFactoryError) -> Identity {
        do {
            let key = P256.Signing.PrivateKey()
            let certificate = try Certificate(
                version: .v3,
                serialNumber: .init(),
                publicKey: .init(key.publicKey),
                notValidBefore: validity.lowerBound,
                notValidAfter: validity.upperBound,
                issuer: caName,
                subject: try subject(),
                signatureAlgorithm: .ecdsaWithSHA256,
                extensions: try Certificate.Extensions {
                    Critical(BasicConstraints.notCertificateAuthority)
                    Critical(KeyUsage(digitalSignature: true))
                    try ExtendedKeyUsage([usage])
                    if !names.isEmpty { SubjectAlternativeNames(names) }
                },
                issuerPrivateKey: caKey
            )
            return Identity(
                certificatePEM: try certificate.serializeAsPEM().pemString,
                privateKeyPEM: key.pemRepresentation
            )
        } catch {
            throw CertificateFactoryError("cannot issue a certificate: \(error)")
        }
    }
}

/// Why the factory could not make or write a certificate or key.
public struct CertificateFactoryError: Error, CustomStringConvertible, Sendable {
    public var reason: String

    public init(_ reason: String) {
        self.reason = reason
    }

    public var description: String { self.reason }
}
