import SalvoTestTraits
import Testing

@testable import SalvoProxy

/// Proxy URLs and the environment's proxy variables, read as curl reads them.
@Suite(.tags(.pure), .runs(.pure)) struct ProxyConfigurationTests {
    @Test func httpWithUserAndPassword() throws {
        let proxy = try ProxyConfiguration(url: "http://ops:s%40cret@proxy.corp:3128")
        #expect(proxy.kind == .httpConnect)
        #expect(proxy.host == "proxy.corp")
        #expect(proxy.port == 3128)
        #expect(proxy.username == "ops")
        #expect(proxy.password == "s@cret")
        #expect(proxy.description == "http://ops@proxy.corp:3128")
    }

    @Test func socks5AndSocks5hWithoutPortOrUser() throws {
        let plain = try ProxyConfiguration(url: "socks5://10.0.0.1")
        #expect(plain.kind == .socks5)
        #expect(plain.port == 1080)
        #expect(plain.username == nil)
        let remote = try ProxyConfiguration(url: "SOCKS5H://[::1]:1081/")
        #expect(remote.kind == .socks5)
        #expect(remote.host == "::1")
        #expect(remote.address == "[::1]:1081")
    }

    @Test func refusedURLsNeverShowThePassword() {
        for text in [
            "ftp://u:hunter2@h:1", "https://u:hunter2@h:1", "u:hunter2@h:1", "http://u:hunter2@h:0",
            "http://u:hunter2@h:1/path", "http://:hunter2@h:1", "http://u:hunter2@:1", "http://u:%zzhunter2@h:1",
        ] {
            #expect(throws: ProxyFailure.self, "\(text)") { try ProxyConfiguration(url: text) }
            do {
                _ = try ProxyConfiguration(url: text)
            } catch {
                #expect(error.kind == .configuration)
                #expect(!error.message.contains("hunter2"), "\(error.message)")
            }
        }
    }

    @Test func environmentOrderAsCurl() {
        #expect(ProxyEnvironment([:]).proxy == nil)
        let all = ProxyEnvironment(["ALL_PROXY": "socks5://a:1", "HTTPS_PROXY": "http://b:2"])
        #expect(all.proxy?.variable == "HTTPS_PROXY")
        let lower = ProxyEnvironment(["https_proxy": "http://c:3", "HTTPS_PROXY": "http://b:2"])
        #expect(lower.proxy?.value == "http://c:3")
        let empty = ProxyEnvironment(["https_proxy": "", "all_proxy": "socks5://a:1"])
        #expect(empty.proxy?.variable == "all_proxy")
        // HTTP_PROXY is for http:// URLs; a gateway is TLS.
        #expect(ProxyEnvironment(["HTTP_PROXY": "http://b:2"]).proxy == nil)
    }

    @Test func noProxy() {
        let environment = ProxyEnvironment([
            "HTTPS_PROXY": "http://b:2",
            "NO_PROXY": "localhost, .corp.example,10.0.0.0/8,[::1],api.sandbox.push.apple.com:443",
        ])
        #expect(environment.proxy(forHost: "api.push.apple.com")?.value == "http://b:2")
        #expect(environment.proxy(forHost: "api.sandbox.push.apple.com") == nil)
        #expect(environment.proxy(forHost: "LOCALHOST") == nil)
        #expect(environment.proxy(forHost: "gw.corp.example") == nil)
        #expect(environment.proxy(forHost: "corp.example") == nil)
        #expect(environment.proxy(forHost: "notcorp.example") != nil)
        #expect(environment.proxy(forHost: "10.2.3.4") == nil)
        #expect(environment.proxy(forHost: "11.2.3.4") != nil)
        #expect(environment.proxy(forHost: "::1") == nil)
        #expect(ProxyEnvironment.bypasses(host: "anything", noProxy: "*"))
        #expect(!ProxyEnvironment.bypasses(host: "127.0.0.1", noProxy: "127.0.0.2,*.x"))
        #expect(ProxyEnvironment.bypasses(host: "127.0.0.1", noProxy: "127.0.0.1"))
    }
}
