import Crypto
import Foundation
import SalvoTestTraits
import Testing

@testable import SalvoHTTP2

@Suite(.tags(.network), .runs(.network)) struct JWTTests {
    @Test func tokenVerifiesWithThePublicKeyAndHasTheDocumentedShape() throws {
        let key = P256.Signing.PrivateKey()
        let signer = try JWTSigner(pem: key.pemRepresentation, keyID: "ABC123DEFG", teamID: "DEF123GHIJ")
        let token = signer.token(issuedAt: 1_700_000_000)
        #expect(!token.contains("="))
        #expect(!token.contains("+") && !token.contains("/"))
        let parts = try #require(verifyJWT(token, publicKey: key.publicKey))
        #expect(parts.header == #"{"alg":"ES256","kid":"ABC123DEFG"}"#)
        // iat is a JSON number, not a string.
        #expect(parts.claims == #"{"iss":"DEF123GHIJ","iat":1700000000}"#)
        let signature = try #require(decodeBase64URL(token.split(separator: ".")[2]))
        #expect(signature.count == 64)
    }

    @Test func tokenDoesNotVerifyWithAnotherKeyOrAfterTampering() throws {
        let key = P256.Signing.PrivateKey()
        let signer = try JWTSigner(privateKey: key, keyID: "ABC123DEFG", teamID: "DEF123GHIJ")
        let token = signer.token(issuedAt: 1_700_000_000)
        #expect(verifyJWT(token, publicKey: P256.Signing.PrivateKey().publicKey) == nil)
        let other = signer.token(issuedAt: 1_700_000_001)
        let forged =
            token.split(separator: ".")[0] + "." + other.split(separator: ".")[1] + "."
            + token.split(separator: ".")[2]
        #expect(verifyJWT(String(forged), publicKey: key.publicKey) == nil)
    }

    @Test func p8FileIsReadAndBadKeysAreRefused() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let key = P256.Signing.PrivateKey()
        #expect(key.pemRepresentation.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        let path = folder.file("AuthKey_ABC123DEFG.p8")
        try key.pemRepresentation.write(toFile: path, atomically: true, encoding: .utf8)
        let signer = try JWTSigner(p8File: path, keyID: "ABC123DEFG", teamID: "DEF123GHIJ")
        #expect(verifyJWT(signer.token(issuedAt: 5), publicKey: key.publicKey) != nil)

        #expect(throws: HTTP2ClientError.self) {
            try JWTSigner(pem: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----", keyID: "A", teamID: "B")
        }
        #expect(throws: HTTP2ClientError.self) {
            try JWTSigner(privateKey: key, keyID: "bad\"id", teamID: "DEF123GHIJ")
        }
        #expect(throws: HTTP2ClientError.self) {
            try JWTSigner(p8File: folder.file("missing.p8"), keyID: "ABC123DEFG", teamID: "DEF123GHIJ")
        }
    }

    @Test func providerTokenIsMintedOnceAndRefreshedInsideTheWindow() throws {
        let clock = ManualClock(1_000_000)
        let signer = try JWTSigner(privateKey: P256.Signing.PrivateKey(), keyID: "ABC123DEFG", teamID: "DEF123GHIJ")
        let token = try ProviderToken(signer: signer, refreshAfter: 45 * 60, clock: clock.function)
        #expect(token.mintCount == 0)
        let first = token.current()
        #expect(first.issuedAt == 1_000_000)
        #expect(first.authorization.hasPrefix("bearer "))
        for _ in 0..<1000 { #expect(token.current() == first) }
        clock.advance(by: 45 * 60 - 1)
        #expect(token.current() == first)
        #expect(token.mintCount == 1)
        clock.advance(by: 1)
        let second = token.current()
        #expect(second.issuedAt == 1_000_000 + 45 * 60)
        #expect(second != first)
        #expect(token.mintCount == 2)
    }

    @Test func refreshIntervalOutsideTheWindowIsRefused() throws {
        let signer = try JWTSigner(privateKey: P256.Signing.PrivateKey(), keyID: "ABC123DEFG", teamID: "DEF123GHIJ")
        #expect(throws: HTTP2ClientError.self) { try ProviderToken(signer: signer, refreshAfter: 19 * 60) }
        #expect(throws: HTTP2ClientError.self) { try ProviderToken(signer: signer, refreshAfter: 60 * 60) }
        _ = try ProviderToken(signer: signer, refreshAfter: 20 * 60)
    }

    @Test func expiredTokenIsRenewedOnceAndNeverWithinTwentyMinutes() throws {
        let clock = ManualClock(2_000_000)
        let signer = try JWTSigner(privateKey: P256.Signing.PrivateKey(), keyID: "ABC123DEFG", teamID: "DEF123GHIJ")
        let token = try ProviderToken(signer: signer, clock: clock.function)
        let first = token.current()
        // Younger than 20 minutes: remaking it would earn TooManyProviderTokenUpdates; the clocks disagree.
        clock.advance(by: 19 * 60)
        guard case .refused(let message) = token.renew(after: first) else {
            Issue.record("a 19-minute-old token was renewed")
            return
        }
        #expect(message.contains("clock"))
        #expect(token.mintCount == 1)

        clock.advance(by: 60)
        #expect(token.renew(after: first) == .renewed)
        #expect(token.mintCount == 2)
        let second = token.current()
        #expect(second.issuedAt == first.issuedAt + 20 * 60)
        // Other connections reporting the same old token find the new one already there.
        #expect(token.renew(after: first) == .renewed)
        #expect(token.mintCount == 2)
        // A second early renewal is not allowed.
        clock.advance(by: 25 * 60)
        guard case .refused = token.renew(after: second) else {
            Issue.record("a second early renewal was allowed")
            return
        }
        #expect(token.mintCount == 2)
    }
}
