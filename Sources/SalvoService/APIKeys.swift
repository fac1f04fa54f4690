import Crypto

/// API keys: made at random, shown once, stored only as their SHA-256 (`APIKeyRecord`).
public enum APIKeys {
    /// A new key and its record: `salvo_` and 43 characters of base64url (32 random bytes).
    public static func make(name: String, now: Int64) -> (key: String, record: APIKeyRecord) {
        var generator = SystemRandomNumberGenerator()
        let secret = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let key = "salvo_" + Self.base64URL(secret)
        let id =
            "key_"
            + (0..<6).map { _ in String(UInt8.random(in: 0...255, using: &generator), radix: 16) }
            .map { $0.count == 1 ? "0" + $0 : $0 }.joined()
        return (key, APIKeyRecord(id: id, name: name, hash: Self.hash(key), createdAt: now))
    }

    public static func hash(_ key: String) -> [UInt8] { Array(SHA256.hash(data: Array(key.utf8))) }

    static func base64URL(_ bytes: [UInt8]) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        var out: [UInt8] = []
        var index = 0
        while index < bytes.count {
            let chunk = bytes[index..<min(index + 3, bytes.count)]
            var value = 0
            for byte in chunk { value = value << 8 | Int(byte) }
            value <<= 8 * (3 - chunk.count)
            for position in 0..<(chunk.count + 1) { out.append(alphabet[(value >> (18 - 6 * position)) & 63]) }
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }
}
