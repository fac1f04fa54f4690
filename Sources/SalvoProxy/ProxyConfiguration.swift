#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A proxy that every connection to a gateway goes through: an HTTP proxy asked with `CONNECT` (Basic proxy
/// authentication) or a SOCKS5 proxy (RFC 1928, RFC 1929 username and password), which resolves the gateway's name
/// itself (as curl's `socks5h`).
///
/// Its `description` never holds the password: a proxy is printed as `http://user@host:port` in logs, reports and
/// errors.
public struct ProxyConfiguration: Sendable, Equatable, CustomStringConvertible {
    /// How the tunnel is asked for.
    public enum Kind: Sendable, Equatable {
        /// `http://`: `CONNECT host:port HTTP/1.1`.
        case httpConnect
        /// `socks5://` or `socks5h://`: RFC 1928, the gateway's name resolved by the proxy.
        case socks5
    }

    public var kind: Kind
    /// The proxy's host name or address (brackets removed from an IPv6 address).
    public var host: String
    public var port: Int
    /// The proxy user; nil for none.
    public var username: String?
    /// The proxy password (with `username`). Never printed.
    public var password: String?

    public init(kind: Kind, host: String, port: Int, username: String? = nil, password: String? = nil) {
        self.kind = kind
        self.host = host
        self.port = port
        self.username = username
        self.password = password
    }

    /// Reads `http://[user[:password]@]host[:port]` or `socks5://…` (`socks5h://` too); the user and password may be
    /// percent-encoded, as in curl. Without a port: 1080, as curl.
    ///
    /// - Throws: `ProxyFailure` (kind `.configuration`) naming what is wrong, the password masked.
    public init(url text: String) throws(ProxyFailure) {
        let masked = Self.masked(text)
        func invalid(_ why: String) -> ProxyFailure {
            ProxyFailure(.configuration, "the proxy URL \(masked) \(why)")
        }
        guard let schemeEnd = text.firstRange(of: "://") else {
            throw invalid("has no scheme: write http://host:port or socks5://host:port")
        }
        let scheme = text[..<schemeEnd.lowerBound].lowercased()
        switch scheme {
        case "http": self.kind = .httpConnect
        case "socks5", "socks5h": self.kind = .socks5
        case "https":
            throw invalid(
                "asks for TLS to the proxy itself, which Salvo does not speak: use http:// (the tunnel is TLS)"
            )
        default:
            throw invalid("has the scheme \(scheme): Salvo speaks http:// (CONNECT) and socks5://")
        }
        var rest = Substring(text[schemeEnd.upperBound...])
        // A path (curl accepts a trailing slash) means nothing to a proxy.
        if let slash = rest.firstIndex(of: "/") {
            guard rest[slash...].allSatisfy({ $0 == "/" }) else {
                throw invalid("has a path, which a proxy takes none of")
            }
            rest = rest[..<slash]
        }
        self.username = nil
        self.password = nil
        if let at = rest.lastIndex(of: "@") {
            let credentials = rest[..<at]
            rest = rest[rest.index(after: at)...]
            let user: Substring
            if let colon = credentials.firstIndex(of: ":") {
                user = credentials[..<colon]
                guard let password = Self.percentDecoded(credentials[credentials.index(after: colon)...]) else {
                    throw invalid("has a password that is not valid percent-encoding")
                }
                self.password = password
            } else {
                user = credentials
            }
            guard let name = Self.percentDecoded(user), !name.isEmpty else {
                throw invalid("has an empty or badly encoded user name")
            }
            self.username = name
        }
        if self.kind == .socks5 {
            // RFC 1929: one byte of length each.
            if (self.username?.utf8.count ?? 0) > 255 || (self.password?.utf8.count ?? 0) > 255 {
                throw invalid("has a user name or password longer than SOCKS5 allows (255 bytes)")
            }
        }
        let hostPart: Substring
        var portText: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw invalid("has an unclosed [ in its address") }
            hostPart = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw invalid("has text after its address") }
                portText = after.dropFirst()
            }
        } else if let colon = rest.lastIndex(of: ":") {
            hostPart = rest[..<colon]
            portText = rest[rest.index(after: colon)...]
        } else {
            hostPart = rest
        }
        guard !hostPart.isEmpty else { throw invalid("has no host") }
        self.host = String(hostPart)
        if let portText {
            guard let port = Int(portText), (1...65535).contains(port) else {
                throw invalid("has the port \(portText): a port is 1–65535")
            }
            self.port = port
        } else {
            self.port = 1080
        }
    }

    /// `scheme://[user@]host:port`: never the password.
    public var description: String {
        let scheme = self.kind == .httpConnect ? "http" : "socks5"
        let user = self.username.map { "\(Self.percentEncoded($0))@" } ?? ""
        return "\(scheme)://\(user)\(self.address)"
    }

    /// `host:port`, an IPv6 address in brackets.
    public var address: String {
        self.host.contains(":") ? "[\(self.host)]:\(self.port)" : "\(self.host):\(self.port)"
    }

    /// `text` with whatever stands between the first `:` of its user part (after the scheme's `//`, or from the
    /// start without one) and the last `@` replaced by `***`: a URL as it may be shown in an error.
    public static func masked(_ text: String) -> String {
        let userStart = text.firstRange(of: "://")?.upperBound ?? text.startIndex
        guard let at = text.lastIndex(of: "@"), at >= userStart,
            let colon = text[userStart..<at].firstIndex(of: ":")
        else { return text }
        return String(text[..<colon]) + ":***" + String(text[at...])
    }

    static func percentDecoded(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        var iterator = Array(text.utf8)[...]
        while let byte = iterator.popFirst() {
            if byte == UInt8(ascii: "%") {
                guard iterator.count >= 2, let high = Self.hexValue(iterator.removeFirst()),
                    let low = Self.hexValue(iterator.removeFirst())
                else { return nil }
                bytes.append(high << 4 | low)
            } else {
                bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func percentEncoded(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let digits = Array("0123456789ABCDEF".utf8)
                out += "%" + String(decoding: [digits[Int(byte >> 4)], digits[Int(byte & 15)]], as: UTF8.self)
            }
        }
        return out
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// The 4 or 16 bytes of an IP address literal, or nil for a name.
    static func addressBytes(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
        return nil
    }
}
