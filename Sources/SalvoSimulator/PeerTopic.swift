import APNSWire
import NIOSSL
import X509

/// The topic a connection may push to: the UID in its client certificate's subject.
///
/// Worked out once per connection, at the end of the TLS handshake. A certificate without a UID
/// earns status 3 (missing topic) on the first notification; a UID that is not a plausible bundle id
/// earns status 6 (invalid topic size).
enum PeerTopic: Sendable, Equatable {
    case valid(String)
    case missing
    case invalid(String)

    /// The error status a notification on this connection earns, or nil when the topic is fine.
    var errorStatus: ErrorStatus? {
        switch self {
        case .valid: nil
        case .missing: .missingTopic
        case .invalid: .invalidTopicSize
        }
    }

    var topic: String? {
        if case .valid(let topic) = self { return topic }
        return nil
    }

    init(peerCertificate: NIOSSLCertificate?) {
        guard let peerCertificate,
            let der = try? peerCertificate.toDERBytes(),
            let certificate = try? Certificate(derEncoded: der),
            let uid = UserID.first(in: certificate.subject)
        else {
            self = .missing
            return
        }
        self = Self.isBundleIdentifier(uid) ? .valid(uid) : .invalid(uid)
    }

    /// A bundle id: 1 to 155 bytes of ASCII letters, digits, '-' and '.', in dot-separated
    /// non-empty parts, at least two of them (reverse DNS).
    static func isBundleIdentifier(_ value: String) -> Bool {
        let utf8 = value.utf8
        guard (1...155).contains(utf8.count) else { return false }
        var parts = 1
        var previous: UInt8 = 0x2E  // as if after a dot: a leading dot is an empty part
        for byte in utf8 {
            let isAllowed =
                (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == 0x2D || byte == 0x2E
            guard isAllowed else { return false }
            if byte == 0x2E {
                guard previous != 0x2E else { return false }
                parts += 1
            }
            previous = byte
        }
        return parts >= 2 && previous != 0x2E
    }
}
