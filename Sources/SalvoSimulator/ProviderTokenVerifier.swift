import APNSWire
import Crypto
import Foundation
import NIOConcurrencyHelpers

/// Checks provider tokens as APNs does: the ES256 signature with the key named by `kid`, the team in `iss`, the
/// key's environment (a sandbox-scoped key is refused by production), the age of `iat` (an hour at most), and how
/// often a key's token changes (not within 20 minutes of the last one).
///
/// Thread-safe: the last token seen per key is behind a lock. A connection caches the verdict for the exact
/// token text it last saw, so the signature is checked once per token and connection, not per request. Public for
/// the fuzz targets (`Fuzz/`), which feed it arbitrary text.
public final class ProviderTokenVerifier: Sendable {
    /// A token that passed: its key, issue time, and the topics the key may send to.
    public struct Accepted: Sendable, Hashable {
        public var keyID: String
        public var issuedAt: Int64
        public var topics: Set<String>
    }

    /// The oldest a token may be, in seconds: an hour.
    static let maximumAge: Int64 = 3600

    private let keys: [String: HTTP2EndpointConfiguration.ProviderKey]
    private let clock: any SimulatorClock
    /// The environment the endpoint plays: a key scoped to the other one is refused.
    private let environment: FaultPlan.Environment
    private let lastIssued = NIOLockedValueBox([String: Int64]())
    /// The text of every token accepted: two tokens signed in the same second differ in their signature, and are
    /// two tokens to count (two processes that each minted one, say).
    private let accepted = NIOLockedValueBox(Set<String>())

    public init(
        keys: [HTTP2EndpointConfiguration.ProviderKey],
        clock: any SimulatorClock,
        environment: FaultPlan.Environment = .any
    ) {
        self.keys = Dictionary(keys.map { ($0.keyID, $0) }, uniquingKeysWith: { first, _ in first })
        self.clock = clock
        self.environment = environment
    }

    /// The verdict for `token` (the text after `bearer `).
    public func check(_ token: Substring) -> Result<Accepted, APNSReason> {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = Self.base64URL(parts[0]), let claimBytes = Self.base64URL(parts[1]),
            let signatureBytes = Self.base64URL(parts[2]),
            let header = try? JSONSerialization.jsonObject(with: Data(headerBytes)) as? [String: Any],
            let claims = try? JSONSerialization.jsonObject(with: Data(claimBytes)) as? [String: Any],
            header["alg"] as? String == "ES256", let keyID = header["kid"] as? String, let key = self.keys[keyID],
            claims["iss"] as? String == key.teamID,
            // iat must be a number: a string is refused, as RFC 7519 wants a NumericDate.
            let issued = claims["iat"] as? NSNumber, !(claims["iat"] is String),
            let publicKey = try? P256.Signing.PublicKey(rawRepresentation: key.publicKey),
            let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureBytes),
            publicKey.isValidSignature(signature, for: Array((parts[0] + "." + parts[1]).utf8))
        else {
            return .failure(.invalidProviderToken)
        }
        // A key scoped to one environment (Apple's environment-scoped keys) is refused by the other.
        if key.environment != .any && self.environment != .any && key.environment != self.environment {
            return .failure(.badEnvironmentKeyIdInToken)
        }
        let issuedAt = issued.int64Value
        let now = Int64(self.clock.now())
        if now - issuedAt > Self.maximumAge { return .failure(.expiredProviderToken) }
        if issuedAt > now + 300 { return .failure(.invalidProviderToken) }
        let tooSoon = self.lastIssued.withLockedValue { last -> Bool in
            if let previous = last[keyID], previous != issuedAt {
                if issuedAt > previous && issuedAt - previous < 20 * 60 { return true }
                if issuedAt < previous { return false }  // an older token still in use elsewhere
            }
            last[keyID] = max(last[keyID] ?? issuedAt, issuedAt)
            return false
        }
        if tooSoon { return .failure(.tooManyProviderTokenUpdates) }
        let verdict = Accepted(keyID: keyID, issuedAt: issuedAt, topics: key.topics)
        self.accepted.withLockedValue { _ = $0.insert(String(token)) }
        return .success(verdict)
    }

    /// How many distinct tokens (by their text) have been accepted.
    public var acceptedTokens: Int { self.accepted.withLockedValue { $0.count } }

    private static func base64URL(_ text: Substring) -> [UInt8]? {
        var standard = String(text.map { $0 == "-" ? "+" : $0 == "_" ? "/" : $0 })
        while standard.utf8.count % 4 != 0 { standard += "=" }
        return Data(base64Encoded: standard).map { Array($0) }
    }
}
