import Crypto
import Foundation

/// Makes the ES256 JSON Web Tokens of APNs token authentication from an Apple signing key (`AuthKey_<id>.p8`).
///
/// The header is `{"alg":"ES256","kid":"<key id>"}` and the claims `{"iss":"<team id>","iat":<seconds>}`, with
/// `iat` a JSON number (RFC 7519 `NumericDate`); both are base64url without padding, and the signature is the
/// raw 64-byte `r || s` form JWS requires (not DER). Signing costs tens of microseconds, so a job never signs
/// per request: `ProviderToken` keeps one token for every connection and refreshes it rarely.
public struct JWTSigner: Sendable {
    /// The 10-character key id Apple shows next to the key (the `kid` header).
    public let keyID: String
    /// The 10-character team id (the `iss` claim).
    public let teamID: String
    // The key's scalar: Crypto's key type is not `Sendable` on every platform, and rebuilding it costs far less
    // than the signature made once per refresh.
    private let keyBytes: [UInt8]

    /// A signer for a key already in memory.
    public init(privateKey: P256.Signing.PrivateKey, keyID: String, teamID: String) throws(HTTP2ClientError) {
        try Self.checkIdentifier(keyID, name: "key id")
        try Self.checkIdentifier(teamID, name: "team id")
        self.keyBytes = Array(privateKey.rawRepresentation)
        self.keyID = keyID
        self.teamID = teamID
    }

    /// A signer for the PEM text of a `.p8` file (PKCS#8 `BEGIN PRIVATE KEY` holding a P-256 key).
    public init(pem: String, keyID: String, teamID: String) throws(HTTP2ClientError) {
        let key: P256.Signing.PrivateKey
        do {
            key = try P256.Signing.PrivateKey(pemRepresentation: pem)
        } catch {
            throw HTTP2ClientError(
                .signingKey,
                "the signing key is not a PKCS#8 PEM P-256 key (an AuthKey_<id>.p8 file from Apple): \(error)"
            )
        }
        try self.init(privateKey: key, keyID: keyID, teamID: teamID)
    }

    /// A signer for a `.p8` file.
    public init(p8File path: String, keyID: String, teamID: String) throws(HTTP2ClientError) {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw HTTP2ClientError(.signingKey, "cannot read the signing key \(path): \(error)")
        }
        do {
            try self.init(pem: text, keyID: keyID, teamID: teamID)
        } catch {
            throw HTTP2ClientError(.signingKey, "\(path): \(error.message)")
        }
    }

    /// The public half of the key, to verify tokens (the push service holds the same).
    public var publicKey: P256.Signing.PublicKey { self.key.publicKey }

    // `try!`: the bytes came from a valid key.
    private var key: P256.Signing.PrivateKey { try! P256.Signing.PrivateKey(rawRepresentation: self.keyBytes) }

    /// A signed token issued at `issuedAt` (UNIX seconds): `header.claims.signature`.
    public func token(issuedAt: Int64) -> String {
        let header = #"{"alg":"ES256","kid":""# + self.keyID + #""}"#
        let claims = #"{"iss":""# + self.teamID + #"","iat":"# + String(issuedAt) + "}"
        let signingInput = Self.base64URL(Array(header.utf8)) + "." + Self.base64URL(Array(claims.utf8))
        // `try!`: signing with a valid in-memory P-256 key fails only when the system has no randomness.
        let signature = try! self.key.signature(for: Array(signingInput.utf8))
        return signingInput + "." + Self.base64URL(Array(signature.rawRepresentation))
    }

    /// Base64url without padding (RFC 7515 §2).
    public static func base64URL(_ bytes: [UInt8]) -> String {
        var text = Data(bytes).base64EncodedString()
        while text.last == "=" { text.removeLast() }
        return String(
            text.map { character -> Character in
                switch character {
                case "+": "-"
                case "/": "_"
                default: character
                }
            }
        )
    }

    // The identifiers go into JSON unescaped, so only letters and digits are allowed.
    private static func checkIdentifier(_ value: String, name: String) throws(HTTP2ClientError) {
        let isAlphanumeric = value.utf8.allSatisfy {
            ($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9")) || ($0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z"))
                || ($0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "z"))
        }
        guard !value.isEmpty, isAlphanumeric else {
            throw HTTP2ClientError(
                .signingKey,
                "the \(name) must be letters and digits (Apple's are 10 characters); got '\(value)'"
            )
        }
    }
}
