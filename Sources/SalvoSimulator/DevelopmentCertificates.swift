import Crypto
import Foundation
import SwiftASN1
import X509

/// Throwaway certificates for running the simulator locally: a development CA, a server
/// certificate for 127.0.0.1, ::1 and localhost, client certificates whose subject UID names the
/// topic, and a client certificate from a different CA for negative tests. P-256 keys throughout.
///
/// Nothing here is secret or long-lived: certificates are valid for 30 days and are made into a
/// folder at run time (tests use a temporary one), never committed.
public struct DevelopmentCertificates: Sendable {
    /// A certificate and its private key, both PEM.
    public struct Identity: Sendable {
        public var certificatePEM: String
        public var privateKeyPEM: String
    }

    /// The files in a certificate folder.
    public struct Paths: Sendable {
        public var folder: String
        public var ca: String { self.folder + "/ca.pem" }
        public var caKey: String { self.folder + "/ca-key.pem" }
        public var server: String { self.folder + "/server.pem" }
        public var serverKey: String { self.folder + "/server-key.pem" }
        public var client: String { self.folder + "/client.pem" }
        public var clientKey: String { self.folder + "/client-key.pem" }
        /// A client certificate and key signed by a different CA (refused by the simulator).
        public var foreignClient: String { self.folder + "/foreign-client.pem" }
        public var foreignClientKey: String { self.folder + "/foreign-client-key.pem" }

        public init(folder: String) {
            self.folder = folder
        }
    }

    /// The development CA, which signs the server and the client certificates.
    public let ca: Identity
    /// The server's certificate (SANs 127.0.0.1, ::1, localhost) and key.
    public let server: Identity
    private let caKey: Certificate.PrivateKey
    private let caName: DistinguishedName

    /// Makes a new CA and server certificate.
    public init() throws(SimulatorError) {
        do {
            let key = P256.Signing.PrivateKey()
            let name = try DistinguishedName {
                OrganizationName("Salvo")
                CommonName("Salvo Development CA")
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
            self.caKey = Certificate.PrivateKey(key)
            self.caName = name
            self.ca = Identity(
                certificatePEM: try certificate.serializeAsPEM().pemString,
                privateKeyPEM: key.pemRepresentation
            )
        } catch {
            throw SimulatorError(.certificates, "cannot make the development CA: \(error)")
        }
        self.server = try DevelopmentCertificates.issue(
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
            caKey: self.caKey,
            caName: self.caName
        )
    }

    /// A client certificate whose subject UID is `topic` (nil: no UID at all, for status 3 tests).
    public func client(topic: String?) throws(SimulatorError) -> Identity {
        try DevelopmentCertificates.issue(
            subject: {
                try DistinguishedName {
                    OrganizationName("Salvo")
                    CommonName("Apple Development IOS Push Services: \(topic ?? "no topic")")
                    if let topic { UserID(topic) }
                }
            },
            usage: .clientAuth,
            names: [],
            caKey: self.caKey,
            caName: self.caName
        )
    }

    /// Writes ca, server, a client for `topic` and a foreign client into `folder` (made if missing).
    @discardableResult
    public func write(to folder: String, topic: String) throws(SimulatorError) -> Paths {
        let paths = Paths(folder: folder)
        let client = try self.client(topic: topic)
        let foreign = try DevelopmentCertificates().client(topic: topic)
        do {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            let files: [(String, String, Bool)] = [
                (paths.ca, self.ca.certificatePEM, false), (paths.caKey, self.ca.privateKeyPEM, true),
                (paths.server, self.server.certificatePEM, false), (paths.serverKey, self.server.privateKeyPEM, true),
                (paths.client, client.certificatePEM, false), (paths.clientKey, client.privateKeyPEM, true),
                (paths.foreignClient, foreign.certificatePEM, false),
                (paths.foreignClientKey, foreign.privateKeyPEM, true),
            ]
            for (path, contents, isPrivate) in files {
                try contents.write(toFile: path, atomically: true, encoding: .utf8)
                if isPrivate { try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path) }
            }
        } catch {
            throw SimulatorError(.certificates, "cannot write certificates to \(folder): \(error)")
        }
        return paths
    }

    /// The certificates in `folder`, made first if the folder has none.
    public static func ensure(in folder: String, topic: String) throws(SimulatorError) -> Paths {
        let paths = Paths(folder: folder)
        let needed = [paths.ca, paths.server, paths.serverKey, paths.client, paths.clientKey]
        if needed.allSatisfy({ FileManager.default.fileExists(atPath: $0) }) { return paths }
        return try DevelopmentCertificates().write(to: folder, topic: topic)
    }

    private static func issue(
        subject: () throws -> DistinguishedName,
        usage: ExtendedKeyUsage.Usage,
        names: [GeneralName],
        caKey: Certificate.PrivateKey,
        caName: DistinguishedName
    ) throws(SimulatorError) -> Identity {
        do {
            let key = P256.Signing.PrivateKey()
            let certificate = try Certificate(
                version: .v3,
                serialNumber: .init(),
                publicKey: .init(key.publicKey),
                notValidBefore: Date().addingTimeInterval(-3600),
                notValidAfter: Date().addingTimeInterval(30 * 86400),
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
            throw SimulatorError(.certificates, "cannot issue a certificate: \(error)")
        }
    }
}
