/// The exchange that opens a tunnel through a proxy to `host:port`, as a value without a socket: it says what to
/// write and reads what the proxy answers, until the tunnel is open (what follows is the gateway's TLS) or refused.
/// The HTTP/2 side drives it from a channel handler, the binary side on the raw socket before its TLS handshake.
///
/// Written by hand for both: NIOSOCKS's `SOCKSClientHandler` offers only "no authentication" (a proxy that picks
/// RFC 1929's username/password is an error there), and the binary interface has no NIO channel to put NIOHTTP1's
/// codec in; one exchange serves both, tested once.
///
/// - HTTP: `CONNECT host:port HTTP/1.1` with `Proxy-Authorization: Basic …` when there is a user; a 2xx status opens
///   the tunnel, 407 is `.authentication`, any other status `.refused` with the proxy's status line.
/// - SOCKS5: the greeting offers "no authentication" and, with a user, username/password (RFC 1929); then `CONNECT`
///   with the gateway's name (ATYP 3, resolved by the proxy) or its address.
public struct ProxyHandshake: Sendable {
    /// What the caller does next.
    public enum Step: Sendable, Equatable {
        /// Write these bytes to the proxy, then read.
        case write([UInt8])
        /// Read more.
        case read
        /// The tunnel is open: `leftover` is what the proxy sent after its answer (the gateway's first bytes).
        case open(leftover: [UInt8])
        /// The tunnel cannot be opened: close the connection.
        case failed(ProxyFailure)
    }

    private enum State: Sendable {
        case idle
        case httpAnswer
        case socksMethod
        case socksAuthentication
        case socksReply
        case open
        case failed
    }

    public let proxy: ProxyConfiguration
    public let host: String
    public let port: Int
    private var state = State.idle
    private var buffer: [UInt8] = []
    /// What has been reached so far, for `salvo check`: `reached`, `authenticated (…)`.
    public private(set) var stages: [String] = []

    /// The most an HTTP proxy's answer head may take before it is refused as not the protocol.
    static let maximumHead = 16 * 1024

    public init(proxy: ProxyConfiguration, host: String, port: Int) {
        self.proxy = proxy
        self.host = host
        self.port = port
    }

    /// `host:port` as the request names it (an IPv6 address in brackets).
    private var target: String { self.host.contains(":") ? "[\(self.host)]:\(self.port)" : "\(self.host):\(self.port)" }

    /// The first bytes to write once the TCP connection to the proxy is open.
    public mutating func start() -> [UInt8] {
        precondition(self.state == .idle, "a proxy handshake starts once")
        switch self.proxy.kind {
        case .httpConnect:
            self.state = .httpAnswer
            var head = "CONNECT \(self.target) HTTP/1.1\r\nHost: \(self.target)\r\n"
            if let user = self.proxy.username {
                let credentials = Array("\(user):\(self.proxy.password ?? "")".utf8)
                head += "Proxy-Authorization: Basic \(Base64.encode(credentials))\r\n"
            }
            head += "\r\n"
            return Array(head.utf8)
        case .socks5:
            self.state = .socksMethod
            return self.proxy.username == nil ? [5, 1, 0] : [5, 2, 0, 2]
        }
    }

    /// Takes bytes the proxy sent; `bytes` empty means the proxy closed the connection.
    public mutating func receive(_ bytes: some Sequence<UInt8>) -> Step {
        let before = self.buffer.count
        self.buffer.append(contentsOf: bytes)
        if self.buffer.count == before, self.state != .open, self.state != .failed {
            return self.fail(.closed, "closed the connection before the tunnel to \(self.target) was open")
        }
        switch self.state {
        case .idle: preconditionFailure("receive before start")
        case .open, .failed: return .read
        case .httpAnswer: return self.readHTTPAnswer()
        case .socksMethod: return self.readSOCKSMethod()
        case .socksAuthentication: return self.readSOCKSAuthentication()
        case .socksReply: return self.readSOCKSReply()
        }
    }

    /// The step for a proxy that said nothing within `seconds` of the connect.
    public mutating func timedOut(after seconds: String) -> ProxyFailure {
        let step = self.fail(
            .timeout,
            "accepted the connection but did not open the tunnel to \(self.target) within \(seconds)"
        )
        guard case .failed(let failure) = step else { preconditionFailure() }
        return failure
    }

    /// What the tunnel reached, as one line: `proxy http://u@h:p: reached, authenticated (Basic), tunnel to g:443 open`.
    public var summary: String {
        "proxy \(self.proxy): " + (self.stages.isEmpty ? "not reached" : self.stages.joined(separator: ", "))
    }

    private var who: String { "the proxy \(self.proxy)" }

    private mutating func fail(_ kind: ProxyFailure.Kind, _ what: String) -> Step {
        self.state = .failed
        return .failed(ProxyFailure(kind, "\(self.who) \(what)"))
    }

    private mutating func opened() -> Step {
        self.state = .open
        self.stages.append("tunnel to \(self.target) open")
        let leftover = self.buffer
        self.buffer = []
        return .open(leftover: leftover)
    }

    private mutating func readHTTPAnswer() -> Step {
        let end: [UInt8] = Array("\r\n\r\n".utf8)
        guard let headEnd = Self.find(end, in: self.buffer) else {
            if self.buffer.count > Self.maximumHead {
                return self.fail(.protocolViolation, "sent an answer head of more than 16 KiB to CONNECT")
            }
            return .read
        }
        let head = self.buffer[..<headEnd]
        let lineEnd = Self.find(Array("\r\n".utf8), in: Array(head)) ?? head.count
        let statusLine = String(decoding: head.prefix(lineEnd), as: UTF8.self)
        let parts = statusLine.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]), (100...999).contains(status)
        else {
            return self.fail(
                .protocolViolation,
                "answered CONNECT with something that is not HTTP: \(Self.printable(statusLine))"
            )
        }
        self.stages = ["reached"]
        self.buffer.removeFirst(headEnd + end.count)
        switch status {
        case 200...299:
            if self.proxy.username != nil { self.stages.append("authenticated (Basic)") }
            return self.opened()
        // 401 as well: tinyproxy, among others, answers wrong proxy credentials with it.
        case 401, 407:
            let why = self.proxy.username == nil ? "asks for a user and password" : "refused the user and password"
            return self.fail(
                .authentication,
                "\(why) (\(Self.printable(statusLine))): check the proxy URL's user, --proxy-password-file or the proxy's setup"
            )
        default:
            return self.fail(.refused, "refused the tunnel to \(self.target): \(Self.printable(statusLine))")
        }
    }

    private mutating func readSOCKSMethod() -> Step {
        guard self.buffer.count >= 2 else { return .read }
        guard self.buffer[0] == 5 else {
            return self.fail(.protocolViolation, "does not speak SOCKS5 (its answer starts with \(self.buffer[0]))")
        }
        self.stages = ["reached"]
        let method = self.buffer[1]
        self.buffer.removeFirst(2)
        switch method {
        case 0:
            return .write(self.socksConnect())
        case 2 where self.proxy.username != nil:
            self.state = .socksAuthentication
            let user = Array((self.proxy.username ?? "").utf8)
            let password = Array((self.proxy.password ?? "").utf8)
            return .write([1, UInt8(user.count)] + user + [UInt8(password.count)] + password)
        case 0xFF, 2:
            let offered = self.proxy.username == nil ? "no authentication" : "no authentication or a user and password"
            return self.fail(
                .methodRefused,
                "accepts none of the SOCKS5 methods offered (\(offered)): does it want a user?"
            )
        default:
            return self.fail(.protocolViolation, "chose the SOCKS5 method \(method), which was not offered")
        }
    }

    private mutating func readSOCKSAuthentication() -> Step {
        guard self.buffer.count >= 2 else { return .read }
        let status = self.buffer[1]
        self.buffer.removeFirst(2)
        guard status == 0 else {
            return self.fail(
                .authentication,
                "refused the user and password (SOCKS5 status \(status)): check the proxy URL's user, --proxy-password-file or the proxy's setup"
            )
        }
        self.stages.append("authenticated (username/password)")
        return .write(self.socksConnect())
    }

    private mutating func socksConnect() -> [UInt8] {
        self.state = .socksReply
        var request: [UInt8] = [5, 1, 0]
        if let address = ProxyConfiguration.addressBytes(self.host) {
            request.append(address.count == 4 ? 1 : 4)
            request += address
        } else {
            let name = Array(self.host.utf8.prefix(255))
            request += [3, UInt8(name.count)] + name
        }
        request += [UInt8(truncatingIfNeeded: self.port >> 8), UInt8(truncatingIfNeeded: self.port)]
        return request
    }

    private mutating func readSOCKSReply() -> Step {
        guard self.buffer.count >= 5 else { return .read }
        guard self.buffer[0] == 5 else {
            return self.fail(.protocolViolation, "answered CONNECT with a reply that is not SOCKS5")
        }
        let reply = self.buffer[1]
        if reply != 0 {
            return self.fail(
                .refused,
                "refused the tunnel to \(self.target): SOCKS5 reply \(reply), \(Self.socksReply(reply))"
            )
        }
        let addressLength: Int
        switch self.buffer[3] {
        case 1: addressLength = 4
        case 4: addressLength = 16
        case 3: addressLength = 1 + Int(self.buffer[4])
        default: return self.fail(.protocolViolation, "answered with the SOCKS5 address type \(self.buffer[3])")
        }
        let length = 4 + addressLength + 2
        guard self.buffer.count >= length else { return .read }
        self.buffer.removeFirst(length)
        return self.opened()
    }

    static func socksReply(_ code: UInt8) -> String {
        switch code {
        case 1: "general SOCKS server failure"
        case 2: "connection not allowed by ruleset"
        case 3: "network unreachable"
        case 4: "host unreachable"
        case 5: "connection refused"
        case 6: "TTL expired"
        case 7: "command not supported"
        case 8: "address type not supported"
        default: "unassigned"
        }
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for start in 0...(haystack.count - needle.count) where haystack[start] == needle[0] {
            if haystack[start..<(start + needle.count)].elementsEqual(needle) { return start }
        }
        return nil
    }

    /// The first 200 characters of a line from the proxy, control characters replaced.
    private static func printable(_ text: String) -> String {
        String(
            String.UnicodeScalarView(
                text.unicodeScalars.prefix(200).map { $0.value < 0x20 || $0.value == 0x7F ? "?" : $0 }
            )
        )
    }
}

/// Base64 (RFC 4648, padded) for the Basic credentials.
enum Base64 {
    static func encode(_ bytes: [UInt8]) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index < bytes.count {
            let chunk = bytes[index..<min(index + 3, bytes.count)]
            let value = chunk.enumerated().reduce(UInt32(0)) { $0 | UInt32($1.element) << (16 - 8 * $1.offset) }
            for position in 0..<4 {
                if position <= chunk.count {
                    out.append(alphabet[Int((value >> (18 - 6 * position)) & 63)])
                } else {
                    out.append(UInt8(ascii: "="))
                }
            }
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }
}
