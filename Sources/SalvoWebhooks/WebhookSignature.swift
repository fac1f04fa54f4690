import Crypto

/// The signature a receiver checks a delivery by, as Stripe's and GitHub's: `Salvo-Signature: t=<unix
/// seconds>,v1=<hex>`, where the hex is HMAC-SHA256 with the shared secret over `<t>.<body>`. The time is in the
/// signed text, so that a receiver can refuse an old delivery replayed.
public enum WebhookSignature {
    /// The header's name.
    public static let header = "Salvo-Signature"

    /// HMAC-SHA256 of `<t>.<body>`, in lower-case hex.
    public static func digest(secret: WebhookSecret, timestamp: Int64, body: [UInt8]) -> String {
        var message = Array("\(timestamp).".utf8)
        message += body
        let code = HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: secret.bytes))
        return code.map { byte in
            let digits = Array("0123456789abcdef".utf8)
            return String(decoding: [digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]], as: UTF8.self)
        }.joined()
    }

    /// The header's value for `body` sent at `timestamp` (UNIX seconds).
    public static func value(secret: WebhookSecret, timestamp: Int64, body: [UInt8]) -> String {
        "t=\(timestamp),v1=\(Self.digest(secret: secret, timestamp: timestamp, body: body))"
    }

    /// Whether `value` is a good signature of `body`: its `t` within `tolerance` seconds of `now`, and one of its `v1`
    /// the digest (compared in constant time). What a receiver written in Swift does.
    public static func verify(
        _ value: String,
        body: [UInt8],
        secret: WebhookSecret,
        now: Int64,
        tolerance: Int64 = 300
    ) -> Bool {
        var timestamp: Int64?
        var signatures: [String] = []
        for part in value.split(separator: ",") {
            let pair = part.split(separator: "=", maxSplits: 1).map(String.init)
            guard pair.count == 2 else { continue }
            if pair[0] == "t" { timestamp = Int64(pair[1]) }
            if pair[0] == "v1" { signatures.append(pair[1]) }
        }
        guard let timestamp, abs(now - timestamp) <= tolerance else { return false }
        let expected = Array(Self.digest(secret: secret, timestamp: timestamp, body: body).utf8)
        return signatures.contains { signature in
            let given = Array(signature.utf8)
            guard given.count == expected.count else { return false }
            var difference: UInt8 = 0
            for (a, b) in zip(given, expected) { difference |= a ^ b }
            return difference == 0
        }
    }
}
