import Foundation

/// What a provider-token file holds: one ES256 token as `JWTSigner` makes it, with its issue time, key id and team
/// id beside it so that a reader knows its age without decoding it.
///
/// The file is a small JSON object (`salvo token mint` writes it; a Kubernetes Secret carries it as one key):
///
/// ```json
/// {"issuedAt":1764079200,"keyID":"ABC123DEFG","teamID":"DEF123GHIJ","token":"eyJhbGciOiJFUzI1NiIs…"}
/// ```
///
/// Reading checks that the fields agree with the token itself (its `kid`, `iss` and `iat`), so a file edited by
/// hand or cut short is refused rather than sent. The signature is not checked: only APNs holds the public key.
public struct ProviderTokenFileContents: Hashable, Sendable, Codable {
    /// The JWT: `header.claims.signature`, base64url.
    public var token: String
    /// The token's `iat` claim (UNIX seconds).
    public var issuedAt: Int64
    /// The signing key's id (the `kid` header).
    public var keyID: String
    /// The team id (the `iss` claim).
    public var teamID: String

    public init(token: String, issuedAt: Int64, keyID: String, teamID: String) {
        self.token = token
        self.issuedAt = issuedAt
        self.keyID = keyID
        self.teamID = teamID
    }

    /// A new token signed by `signer`, issued at `issuedAt`.
    public init(signer: JWTSigner, issuedAt: Int64) {
        self.init(
            token: signer.token(issuedAt: issuedAt),
            issuedAt: issuedAt,
            keyID: signer.keyID,
            teamID: signer.teamID
        )
    }

    /// Parses and checks the bytes of a token file; `path` names the file in errors. The token itself is never
    /// put in a message.
    public init(parsing bytes: [UInt8], path: String) throws(HTTP2ClientError) {
        func malformed(_ why: String) -> HTTP2ClientError {
            HTTP2ClientError(
                .credentials,
                "\(path) is not a provider token file (\(why)); write it with `salvo token mint --out \(path)`"
            )
        }
        guard !bytes.isEmpty else { throw malformed("it is empty") }
        let decoded: ProviderTokenFileContents
        do {
            decoded = try JSONDecoder().decode(ProviderTokenFileContents.self, from: Data(bytes))
        } catch {
            throw malformed("not a JSON object with token, issuedAt, keyID and teamID")
        }
        let parts = decoded.token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, parts.allSatisfy({ !$0.isEmpty }),
            let header = Self.jsonObject(base64URL: parts[0]),
            let claims = Self.jsonObject(base64URL: parts[1])
        else {
            throw malformed("its token is not a JSON Web Token")
        }
        guard header["alg"] as? String == "ES256" else { throw malformed("its token is not signed with ES256") }
        guard header["kid"] as? String == decoded.keyID else {
            throw malformed("its token's key id is not keyID \(decoded.keyID)")
        }
        guard claims["iss"] as? String == decoded.teamID else {
            throw malformed("its token's issuer is not teamID \(decoded.teamID)")
        }
        guard let iat = claims["iat"] as? NSNumber, !(claims["iat"] is String), iat.int64Value == decoded.issuedAt
        else {
            throw malformed("its token's iat claim is not issuedAt \(decoded.issuedAt)")
        }
        self = decoded
    }

    /// The file's bytes: compact JSON with sorted keys and a final newline.
    public var encoded: [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // `try!`: four strings and a number always encode.
        return Array(try! encoder.encode(self)) + [UInt8(ascii: "\n")]
    }

    /// The token as the `authorization` header carries it.
    public var bearer: ProviderToken.Bearer {
        ProviderToken.Bearer(authorization: "bearer " + self.token, issuedAt: self.issuedAt)
    }

    private static func jsonObject(base64URL text: Substring) -> [String: Any]? {
        var standard = String(text.map { $0 == "-" ? "+" : $0 == "_" ? "/" : $0 })
        while standard.utf8.count % 4 != 0 { standard += "=" }
        guard let data = Data(base64Encoded: standard) else { return nil }
        return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
    }
}
