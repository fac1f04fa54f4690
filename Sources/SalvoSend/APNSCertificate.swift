import Foundation
import SwiftASN1
import X509

/// What an APNs client certificate says about itself, read with swift-certificates: its subject UID (the bundle
/// id), the environments Apple's extensions name, and the topics it may send to.
///
/// Apple marks a certificate for the development (sandbox) environment with extension 1.2.840.113635.100.6.3.1,
/// for production with 1.2.840.113635.100.6.3.2 (a universal certificate carries both), and lists its topics in
/// 1.2.840.113635.100.6.3.6: a SEQUENCE of UTF8String topics, each followed by a SEQUENCE naming its kind
/// (`app`, `voip`, `complication`).
public struct APNSCertificate: Hashable, Sendable {
    /// Apple's extension for the development environment.
    public static let developmentOID: ASN1ObjectIdentifier = [1, 2, 840, 113_635, 100, 6, 3, 1]
    /// Apple's extension for the production environment.
    public static let productionOID: ASN1ObjectIdentifier = [1, 2, 840, 113_635, 100, 6, 3, 2]
    /// Apple's extension listing the topics.
    public static let topicsOID: ASN1ObjectIdentifier = [1, 2, 840, 113_635, 100, 6, 3, 6]
    /// The subject attribute UID (RFC 4519), which holds the bundle id.
    public static let userIDOID: ASN1ObjectIdentifier = [0, 9, 2342, 19_200_300, 100, 1, 1]

    /// An environment of Apple's gateways.
    public enum Environment: String, Hashable, Sendable, Codable {
        case development
        case production
    }

    /// The subject UID, if any.
    public var userID: String?
    /// The environments the extensions name; empty when the certificate carries neither extension.
    public var environments: Set<Environment>
    /// The topics extension's list; nil when the certificate has no such extension.
    public var topics: [String]?

    public init(userID: String?, environments: Set<Environment>, topics: [String]?) {
        self.userID = userID
        self.environments = environments
        self.topics = topics
    }

    /// Reads `certificate`'s subject and extensions.
    ///
    /// - Throws: when the topics extension is present but is not a sequence of strings and sequences.
    public init(_ certificate: Certificate) throws {
        var userID: String?
        for rdn in certificate.subject {
            for attribute in rdn where attribute.type == Self.userIDOID && userID == nil {
                userID = String(attribute.value)
            }
        }
        self.userID = userID
        var environments: Set<Environment> = []
        if certificate.extensions[oid: Self.developmentOID] != nil { environments.insert(.development) }
        if certificate.extensions[oid: Self.productionOID] != nil { environments.insert(.production) }
        self.environments = environments
        self.topics = try certificate.extensions[oid: Self.topicsOID].map { try Self.topics(fromExtension: $0.value) }
    }

    /// The topics in the value of extension 1.2.840.113635.100.6.3.6 (DER).
    public static func topics(fromExtension value: ArraySlice<UInt8>) throws -> [String] {
        let root = try DER.parse(value)
        guard case .constructed(let nodes) = root.content else {
            throw ASN1Error.unexpectedFieldType(root.identifier)
        }
        var topics: [String] = []
        for node in nodes where node.identifier == .utf8String {
            topics.append(String(try ASN1UTF8String(derEncoded: node)))
        }
        return topics
    }

    /// The topics a send may use: the extension's list, or the subject UID when there is no list.
    public var allowedTopics: [String] {
        self.topics ?? self.userID.map { [$0] } ?? []
    }
}
