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
/// Nothing here is secret: certificates are valid for a year (as Apple issues them) and are made at run time (into a
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
                notValidAfter: Date().addingTimeInterval(Self.lifetime),
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

    /// The environments Apple's client certificates name in their extensions.
    public enum Environment: Sendable {
        /// Extension 1.2.840.113635.100.6.3.1 (sandbox).
        case development
        /// Extension 1.2.840.113635.100.6.3.2.
        case production
        /// Both extensions, as a universal certificate carries them.
        case universal
    }

    /// A client certificate whose subject UID is `topic` (nil: no UID at all, for status 3 tests), valid for
    /// a year, or (`expired`) one whose validity ended an hour ago, or one valid until `validUntil`. As Apple's,
    /// it carries the environment's extension and the topics extension (`topics`, by default `topic`, its `.voip`
    /// and `.complication`).
    public func client(
        topic: String?,
        expired: Bool = false,
        validUntil: Date? = nil,
        environment: Environment = .development,
        topics: [String]? = nil
    ) throws(CertificateFactoryError) -> Identity {
        var validity =
            expired ? Date().addingTimeInterval(-2 * 86400)...Date().addingTimeInterval(-3600) : Self.validity
        if let validUntil { validity = min(validity.lowerBound, validUntil)...validUntil }
        let listed = topics ?? topic.map { [$0, $0 + ".voip", $0 + ".complication"] } ?? []
        var apple: [Certificate.Extension] = []
        do {
            if environment != .production {
                apple.append(.init(oid: Self.developmentOID, critical: false, value: Self.derNull))
            }
            if environment != .development {
                apple.append(.init(oid: Self.productionOID, critical: false, value: Self.derNull))
            }
            if !listed.isEmpty {
                apple.append(
                    .init(oid: Self.topicsOID, critical: false, value: try Self.topicsExtensionValue(listed)[...])
                )
            }
        } catch {
            throw CertificateFactoryError("cannot encode the topics \(listed): \(error)")
        }
        return try Self.issue(
            subject: {
                try DistinguishedName {
                    OrganizationName("Salvo")
                    CommonName("Apple Push Services: \(topic ?? "no topic")")
                    if let topic { UserID(topic) }
                }
            },
            usage: .clientAuth,
            names: [],
            validity: validity,
            caKey: self.caKey,
            caName: self.caName,
            extra: apple
        )
    }

    /// Apple's extension for development (sandbox) client certificates.
    public static let developmentOID: ASN1ObjectIdentifier = [1, 2, 840, 113_635, 100, 6, 3, 1]
    /// Apple's extension for production client certificates.
    public static let productionOID: ASN1ObjectIdentifier = [1, 2, 840, 113_635, 100, 6, 3, 2]
    /// Apple's extension listing a certificate's topics.
    public static let topicsOID: ASN1ObjectIdentifier = [1, 2, 840, 113_635, 100, 6, 3, 6]
    private static let derNull: ArraySlice<UInt8> = [0x05, 0x00]

    /// The value of Apple's topics extension: a SEQUENCE of UTF8String topics, each followed by a SEQUENCE naming
    /// its kind (`app`, `voip`, `complication`).
    public static func topicsExtensionValue(_ topics: [String]) throws -> [UInt8] {
        var serializer = DER.Serializer()
        try serializer.appendConstructedNode(identifier: .sequence) { serializer in
            for topic in topics {
                try serializer.serialize(ASN1UTF8String(topic))
                let kind =
                    topic.hasSuffix(".voip") ? "voip" : topic.hasSuffix(".complication") ? "complication" : "app"
                try serializer.appendConstructedNode(identifier: .sequence) { serializer in
                    try serializer.serialize(ASN1UTF8String(kind))
                }
            }
        }
        return serializer.serializedBytes
    }

    /// The name of the other CA, which signs the foreign clients.
    public static let foreignAuthorityName = "Salvo Foreign CA"

    /// A client certificate for `topic` from a new CA (`foreignAuthorityName`): peers trusting `ca` must refuse
    /// it as signed by an unknown CA.
    public func foreignClient(topic: String?) throws(CertificateFactoryError) -> Identity {
        try CertificateFactory(authorityName: Self.foreignAuthorityName).client(topic: topic)
    }

    /// How long the factory's certificates are valid: a year, as Apple issues APNs certificates, so that `salvo check`
    /// finds them far from their end.
    private static let lifetime: TimeInterval = 365 * 86400

    private static var validity: ClosedRange<Date> {
        Date().addingTimeInterval(-3600)...Date().addingTimeInterval(Self.lifetime)
    }

    private static func issue(
        subject: () throws -> DistinguishedName,
        usage: ExtendedKeyUsage.Usage,
        names: [GeneralName],
        validity: ClosedRange<Date>,
        caKey: Certificate.PrivateKey,
        caName: DistinguishedName,
        extra: [Certificate.Extension] = []
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
                    try Certificate.Extensions(extra)
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
