import SwiftASN1
import X509

/// The subject's UID attribute (OID 0.9.2342.19200300.100.1.1), where Apple's push certificates
/// name their topic (the app's bundle id). swift-certificates has no builder for it, so this is one.
public struct UserID: RelativeDistinguishedNameConvertible, Sendable {
    /// The attribute's object identifier.
    public static let oid: ASN1ObjectIdentifier = [0, 9, 2342, 19_200_300, 100, 1, 1]

    /// The attribute's value: the topic.
    public var value: String

    public init(_ value: String) {
        self.value = value
    }

    public func makeRDN() throws -> RelativeDistinguishedName {
        RelativeDistinguishedName(.init(type: Self.oid, utf8String: self.value))
    }

    /// The first UID in `name`, if it has one.
    public static func first(in name: DistinguishedName) -> String? {
        for rdn in name {
            for attribute in rdn where attribute.type == Self.oid {
                return String(attribute.value)
            }
        }
        return nil
    }
}
