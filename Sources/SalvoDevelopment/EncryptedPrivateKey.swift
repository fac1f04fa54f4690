import Crypto
import Foundation
import SwiftASN1
import _CryptoExtras

/// Encrypts a PKCS#8 private key the way `openssl pkey -aes256` does (RFC 8018 PBES2: PBKDF2 with
/// HMAC-SHA256, then AES-256-CBC), as an `ENCRYPTED PRIVATE KEY` PEM: the input for tests of encrypted key
/// files. swift-crypto reads and writes only unencrypted keys, so the envelope is built here.
enum EncryptedPrivateKey {
    private static let pbes2: ASN1ObjectIdentifier = [1, 2, 840, 113_549, 1, 5, 13]
    private static let pbkdf2: ASN1ObjectIdentifier = [1, 2, 840, 113_549, 1, 5, 12]
    private static let hmacWithSHA256: ASN1ObjectIdentifier = [1, 2, 840, 113_549, 2, 9]
    private static let aes256CBC: ASN1ObjectIdentifier = [2, 16, 840, 1, 101, 3, 4, 1, 42]
    private static let iterations = 2048

    /// `privateKeyPEM` (a P-256 key, PKCS#8 or SEC 1 PEM) encrypted with `passphrase`.
    static func pem(privateKeyPEM: String, passphrase: String) throws -> String {
        let plaintext = try P256.Signing.PrivateKey(pemRepresentation: privateKeyPEM).derRepresentation
        let salt = (0..<16).map { _ in UInt8.random(in: .min ... .max) }
        let iv = (0..<16).map { _ in UInt8.random(in: .min ... .max) }
        // Few rounds on purpose: the key is a throwaway test key, and tests should not wait.
        let key = try KDF.Insecure.PBKDF2.deriveKey(
            from: Array(passphrase.utf8),
            salt: salt,
            using: .sha256,
            outputByteCount: 32,
            unsafeUncheckedRounds: Self.iterations
        )
        let ciphertext = try AES._CBC.encrypt(plaintext, using: key, iv: try AES._CBC.IV(ivBytes: iv))
        var serializer = DER.Serializer()
        try serializer.appendConstructedNode(identifier: .sequence) { info in
            try info.appendConstructedNode(identifier: .sequence) { algorithm in
                try algorithm.serialize(Self.pbes2)
                try algorithm.appendConstructedNode(identifier: .sequence) { parameters in
                    try parameters.appendConstructedNode(identifier: .sequence) { derivation in
                        try derivation.serialize(Self.pbkdf2)
                        try derivation.appendConstructedNode(identifier: .sequence) { pbkdf2 in
                            try pbkdf2.serialize(ASN1OctetString(contentBytes: salt[...]))
                            try pbkdf2.serialize(Self.iterations)
                            try pbkdf2.appendConstructedNode(identifier: .sequence) { prf in
                                try prf.serialize(Self.hmacWithSHA256)
                                try prf.serialize(ASN1Null())
                            }
                        }
                    }
                    try parameters.appendConstructedNode(identifier: .sequence) { cipher in
                        try cipher.serialize(Self.aes256CBC)
                        try cipher.serialize(ASN1OctetString(contentBytes: iv[...]))
                    }
                }
            }
            try info.serialize(ASN1OctetString(contentBytes: ArraySlice(ciphertext)))
        }
        return PEMDocument(type: "ENCRYPTED PRIVATE KEY", derBytes: serializer.serializedBytes).pemString
    }
}
