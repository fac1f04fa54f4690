import Crypto
import Foundation
import NIOSSL
import SwiftASN1
import X509

/// The pure checks of `salvo check` on credentials: a certificate against its key, its dates, the environment and
/// topics Apple's extensions name, a `.p8` signing key, key and team ids. Values in, `CheckResult`s out: no file
/// and no socket (`CredentialFiles` reads the files).
public enum CredentialCheck {
    /// A certificate expiring within this many days is a warning.
    public static let expiryWarningDays = 30

    /// Whether `key` is the private half of `certificate`'s public key.
    public static func keyMatches(_ certificate: Certificate, key: Certificate.PrivateKey, file: String) -> CheckResult
    {
        if key.publicKey == certificate.publicKey {
            return .ok("key", "the key matches the certificate")
        }
        return .fail(
            "key",
            "\(file): the private key does not belong to the certificate (its public key differs); give the key "
                + "the certificate was issued for"
        )
    }

    /// The certificate's dates against `now`: refused when expired or not yet valid, a warning within
    /// `expiryWarningDays` of the end.
    public static func expiry(_ certificate: Certificate, now: Date, file: String) -> CheckResult {
        let end = certificate.notValidAfter
        let stamp = Self.stamp(end)
        if end <= now {
            return .fail("expiry", "\(file): the certificate expired on \(stamp); renew it in the developer account")
        }
        if certificate.notValidBefore > now {
            return .fail(
                "expiry",
                "\(file): the certificate is not valid before \(Self.stamp(certificate.notValidBefore))"
            )
        }
        let days = Int(end.timeIntervalSince(now) / 86400)
        if days < Self.expiryWarningDays {
            return .warning("expiry", "\(file): the certificate expires on \(stamp), in \(days) day(s); renew it soon")
        }
        return .ok("expiry", "valid until \(stamp) (\(days) days)")
    }

    /// The environments the certificate names against the gateway's (nil: a `HOST:PORT`, which any certificate
    /// may try).
    public static func environment(
        _ certificate: APNSCertificate,
        gateway: APNSCertificate.Environment?
    ) -> CheckResult {
        let named = certificate.environments.map(\.rawValue).sorted().joined(separator: " and ")
        guard let gateway else {
            return certificate.environments.isEmpty
                ? .ok("environment", "the certificate names no environment (no Apple extension)")
                : .ok("environment", "the certificate is for \(named)")
        }
        if certificate.environments.isEmpty {
            return .warning(
                "environment",
                "the certificate carries neither of Apple's environment extensions: is it an APNs certificate?"
            )
        }
        if certificate.environments.contains(gateway) {
            return .ok("environment", "the certificate is for \(named); the gateway is \(gateway.rawValue)")
        }
        let other = gateway == .production ? "sandbox" : "production"
        return .fail(
            "environment",
            "the certificate is for \(named) only, the gateway is \(gateway.rawValue): use --gateway \(other) or a "
                + "\(gateway.rawValue) certificate"
        )
    }

    /// `--topic` against the topics the certificate may send to (the topics extension, else the subject UID).
    public static func topic(_ certificate: APNSCertificate, topic: String?) -> CheckResult {
        let allowed = certificate.allowedTopics
        guard let topic else {
            if let uid = certificate.userID { return .ok("topic", "the certificate's bundle id is \(uid)") }
            return .fail("topic", "the certificate has no subject UID (bundle id): APNs refuses it")
        }
        if allowed.contains(topic) {
            return .ok("topic", "--topic \(topic) is one of the certificate's topics")
        }
        if allowed.isEmpty {
            return .fail("topic", "the certificate names no topic, so --topic \(topic) cannot be checked or sent")
        }
        return .fail(
            "topic",
            "--topic \(topic) is not one of the certificate's topics (\(allowed.joined(separator: ", ")))"
        )
    }

    /// A `.p8` signing key: PKCS#8 PEM of a P-256 key.
    public static func signingKey(pem: String, file: String) -> CheckResult {
        do {
            _ = try P256.Signing.PrivateKey(pemRepresentation: pem)
            return .ok("signing key", "\(file) is a P-256 key")
        } catch {
            return .fail(
                "signing key",
                "\(file) is not a PKCS#8 PEM P-256 key (an AuthKey_<key id>.p8 file from Apple): \(error)"
            )
        }
    }

    /// A key id or team id: 10 ASCII letters and digits, as Apple issues them.
    public static func identifier(flag: String, value: String?) -> CheckResult {
        guard let value else { return .fail(flag, "\(flag) is missing (10 letters and digits)") }
        guard value.count == 10, value.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else {
            return .fail(flag, "\(flag) is 10 letters and digits, as Apple issues it (got '\(value)')")
        }
        return .ok(flag, value)
    }

    /// Every check of a certificate and its key (nil when it could not be read: that is a result of its own).
    public static func certificate(
        _ certificate: Certificate,
        key: Certificate.PrivateKey,
        file: String,
        now: Date,
        gateway: APNSCertificate.Environment?,
        topic: String?
    ) -> [CheckResult] {
        var results = [
            Self.keyMatches(certificate, key: key, file: file),
            Self.expiry(certificate, now: now, file: file),
        ]
        do {
            let apple = try APNSCertificate(certificate)
            results.append(Self.environment(apple, gateway: gateway))
            results.append(Self.topic(apple, topic: topic))
        } catch {
            results.append(.fail("topic", "\(file): Apple's topics extension cannot be read: \(error)"))
        }
        return results
    }

    private static func stamp(_ date: Date) -> String {
        date.formatted(.iso8601)
    }
}

/// Reads a client certificate and its key for `CredentialCheck` with NIOSSL (PEM, an encrypted PEM key, or
/// PKCS#12) and hands them to swift-certificates.
public enum CredentialFiles {
    /// The leaf certificate and the private key.
    public static func load(
        certificateFile: String?,
        keyFile: String?,
        pkcs12File: String?,
        passphrase: String?
    ) throws(CheckFailure) -> (certificate: Certificate, key: Certificate.PrivateKey) {
        let leaf: NIOSSLCertificate
        let key: NIOSSLPrivateKey
        if let pkcs12File {
            do {
                let bundle = try NIOSSLPKCS12Bundle(file: pkcs12File, passphrase: Array((passphrase ?? "").utf8))
                guard let first = bundle.certificateChain.first else {
                    throw CheckFailure("\(pkcs12File): the PKCS#12 file holds no certificate")
                }
                leaf = first
                key = bundle.privateKey
            } catch let error as CheckFailure {
                throw error
            } catch {
                throw CheckFailure("\(pkcs12File): cannot read the PKCS#12 file (passphrase?): \(error)")
            }
        } else {
            guard let certificateFile, let keyFile else { throw CheckFailure("give --cert and --key, or --pkcs12") }
            do {
                guard let first = try NIOSSLCertificate.fromPEMFile(certificateFile).first else {
                    throw CheckFailure("\(certificateFile): no PEM certificate in the file")
                }
                leaf = first
            } catch let error as CheckFailure {
                throw error
            } catch {
                throw CheckFailure("\(certificateFile): cannot read a PEM certificate: \(error)")
            }
            do {
                if let passphrase {
                    key = try NIOSSLPrivateKey(file: keyFile, format: .pem) { provide in provide(Array(passphrase.utf8))
                    }
                } else {
                    key = try NIOSSLPrivateKey(file: keyFile, format: .pem)
                }
            } catch {
                throw CheckFailure(
                    "\(keyFile): cannot read a PEM private key\(passphrase == nil ? " (encrypted? give --passphrase)" : ""): \(error)"
                )
            }
        }
        let file = pkcs12File ?? certificateFile ?? ""
        let certificate: Certificate
        do {
            certificate = try Certificate(derEncoded: try leaf.toDERBytes())
        } catch {
            throw CheckFailure("\(file): the certificate cannot be parsed: \(error)")
        }
        do {
            return (certificate, try Self.privateKey(derBytes: try key.derBytes))
        } catch {
            throw CheckFailure("\(keyFile ?? file): the key is of a kind swift-certificates does not read: \(error)")
        }
    }

    /// NIOSSL writes a key in OpenSSL's traditional DER (SEC1 for EC, PKCS#1 for RSA), swift-certificates reads
    /// PKCS#8 DER or PEM documents by their label: try each.
    private static func privateKey(derBytes: [UInt8]) throws -> Certificate.PrivateKey {
        if let key = try? Certificate.PrivateKey(derBytes: derBytes) { return key }
        if let key = try? Certificate.PrivateKey(pemDocument: PEMDocument(type: "EC PRIVATE KEY", derBytes: derBytes)) {
            return key
        }
        return try Certificate.PrivateKey(pemDocument: PEMDocument(type: "RSA PRIVATE KEY", derBytes: derBytes))
    }
}

/// A file `salvo check` could not read, with its name and the reason.
public struct CheckFailure: Error, Hashable, Sendable, CustomStringConvertible {
    public let description: String

    public init(_ description: String) {
        self.description = description
    }
}
