import SalvoTestTraits
import Testing

@testable import SalvoProxy

/// The tunnel exchanges, byte by byte, without a socket: what is written, and every answer a proxy may give, split
/// at every byte.
@Suite(.tags(.pure), .runs(.pure)) struct ProxyHandshakeTests {
    private let http = ProxyConfiguration(
        kind: .httpConnect,
        host: "127.0.0.1",
        port: 3128,
        username: "ops",
        password: "pw:1"
    )
    private let socks = ProxyConfiguration(
        kind: .socks5,
        host: "127.0.0.1",
        port: 1080,
        username: "ops",
        password: "pw"
    )

    /// Feeds `answer` one byte at a time and returns the last step.
    private func feed(_ handshake: inout ProxyHandshake, _ answer: [UInt8]) -> ProxyHandshake.Step {
        var last = ProxyHandshake.Step.read
        for byte in answer {
            last = handshake.receive([byte])
            if case .read = last { continue }
            return last
        }
        return last
    }

    @Test func connectWithBasicAuthentication() {
        var handshake = ProxyHandshake(proxy: self.http, host: "api.push.apple.com", port: 443)
        let request = String(decoding: handshake.start(), as: UTF8.self)
        #expect(
            request == "CONNECT api.push.apple.com:443 HTTP/1.1\r\nHost: api.push.apple.com:443\r\n"
                + "Proxy-Authorization: Basic b3BzOnB3OjE=\r\n\r\n"
        )
        let answer = Array("HTTP/1.0 200 Connection established\r\nProxy-agent: x\r\n\r\n\u{16}\u{3}".utf8)
        #expect(self.feed(&handshake, answer) == .open(leftover: []))
        #expect(handshake.receive([0x16, 3]) == .read)
        #expect(
            handshake.summary
                == "proxy http://ops@127.0.0.1:3128: reached, authenticated (Basic), tunnel to api.push.apple.com:443 open"
        )
    }

    @Test func leftoverAfterTheHeadIsTheGateways() {
        var handshake = ProxyHandshake(proxy: self.http, host: "::1", port: 8443)
        #expect(String(decoding: handshake.start(), as: UTF8.self).hasPrefix("CONNECT [::1]:8443 HTTP/1.1\r\n"))
        #expect(handshake.receive(Array("HTTP/1.1 200 OK\r\n\r\nTLS".utf8)) == .open(leftover: Array("TLS".utf8)))
    }

    @Test func httpRefusals() {
        let cases: [(String, ProxyFailure.Kind, String)] = [
            (
                "HTTP/1.0 407 Proxy Authentication Required\r\n\r\n", .authentication,
                "407 Proxy Authentication Required"
            ),
            (
                "HTTP/1.0 403 Access violation\r\nContent-Length: 3\r\n\r\nno!", .refused,
                "HTTP/1.0 403 Access violation"
            ),
            ("HTTP/1.1 502 Bad Gateway\r\n\r\n", .refused, "502 Bad Gateway"),
            ("SSH-2.0-OpenSSH\r\n\r\n", .protocolViolation, "not HTTP"),
        ]
        for (answer, kind, text) in cases {
            var handshake = ProxyHandshake(proxy: self.http, host: "gw", port: 443)
            _ = handshake.start()
            guard case .failed(let failure) = self.feed(&handshake, Array(answer.utf8)) else {
                Issue.record("\(answer): not failed")
                continue
            }
            #expect(failure.kind == kind)
            #expect(failure.message.contains(text), "\(failure.message)")
            #expect(failure.message.hasPrefix("the proxy http://ops@127.0.0.1:3128"), "\(failure.message)")
            #expect(!failure.message.contains("pw:1"))
        }
    }

    @Test func closeAndOversizedHead() {
        var closed = ProxyHandshake(proxy: self.http, host: "gw", port: 443)
        _ = closed.start()
        #expect(closed.receive(Array("HTTP/1.1 200".utf8)) == .read)
        guard case .failed(let failure) = closed.receive([]) else {
            Issue.record("not failed")
            return
        }
        #expect(failure.kind == .closed)
        var endless = ProxyHandshake(proxy: self.http, host: "gw", port: 443)
        _ = endless.start()
        var step = endless.receive(Array("HTTP/1.1 200 OK\r\n".utf8))
        for _ in 0..<20 where step == .read { step = endless.receive([UInt8](repeating: 0x41, count: 1024)) }
        guard case .failed(let oversized) = step else {
            Issue.record("not failed: \(step)")
            return
        }
        #expect(oversized.kind == .protocolViolation)
        var silent = ProxyHandshake(proxy: self.http, host: "gw", port: 443)
        _ = silent.start()
        #expect(silent.timedOut(after: "10 seconds").kind == .timeout)
    }

    @Test func socks5WithUsernameAndPassword() {
        var handshake = ProxyHandshake(proxy: self.socks, host: "api.push.apple.com", port: 443)
        #expect(handshake.start() == [5, 2, 0, 2])
        #expect(self.feed(&handshake, [5, 2]) == .write([1, 3] + Array("ops".utf8) + [2] + Array("pw".utf8)))
        let name = Array("api.push.apple.com".utf8)
        #expect(self.feed(&handshake, [1, 0]) == .write([5, 1, 0, 3, UInt8(name.count)] + name + [1, 187]))
        #expect(self.feed(&handshake, [5, 0, 0, 1, 10, 0, 0, 1, 0x30, 0x39]) == .open(leftover: []))
        #expect(
            handshake.summary.hasSuffix(
                ": reached, authenticated (username/password), tunnel to api.push.apple.com:443 open"
            )
        )
    }

    @Test func socks5WithoutAuthenticationToAnAddress() {
        var handshake = ProxyHandshake(
            proxy: ProxyConfiguration(kind: .socks5, host: "127.0.0.1", port: 1080),
            host: "127.0.0.1",
            port: 2197
        )
        #expect(handshake.start() == [5, 1, 0])
        #expect(handshake.receive([5, 0]) == .write([5, 1, 0, 1, 127, 0, 0, 1, 0x08, 0x95]))
        // A reply with a name as its bound address, and the gateway's first byte behind it.
        #expect(handshake.receive([5, 0, 0, 3, 2, 0x61, 0x62, 0, 1, 0x16]) == .open(leftover: [0x16]))
    }

    @Test func socks5Refusals() {
        func failure(_ proxy: ProxyConfiguration, _ answers: [[UInt8]]) -> ProxyFailure? {
            var handshake = ProxyHandshake(proxy: proxy, host: "gw", port: 443)
            _ = handshake.start()
            for answer in answers {
                if case .failed(let failure) = handshake.receive(answer) { return failure }
            }
            return nil
        }
        let anonymous = ProxyConfiguration(kind: .socks5, host: "h", port: 1)
        #expect(failure(anonymous, [[5, 0xFF]])?.kind == .methodRefused)
        #expect(failure(anonymous, [[5, 2]])?.kind == .methodRefused)
        #expect(failure(self.socks, [[5, 2], [1, 1]])?.kind == .authentication)
        #expect(failure(self.socks, [[5, 1]])?.kind == .protocolViolation)
        #expect(failure(self.socks, [[4, 0]])?.kind == .protocolViolation)
        let refused = failure(self.socks, [[5, 0], [5, 2, 0, 1, 0, 0, 0, 0, 0, 0]])
        #expect(refused?.kind == .refused)
        #expect(refused?.message.contains("connection not allowed by ruleset") == true)
        #expect(refused.map { !$0.message.contains("pw") } == true)
    }

    @Test func base64() {
        #expect(Base64.encode([]) == "")
        #expect(Base64.encode(Array("f".utf8)) == "Zg==")
        #expect(Base64.encode(Array("fo".utf8)) == "Zm8=")
        #expect(Base64.encode(Array("foo".utf8)) == "Zm9v")
        #expect(Base64.encode(Array("foobar".utf8)) == "Zm9vYmFy")
    }
}
