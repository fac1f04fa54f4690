import APNSWire
import Foundation
import SalvoRows
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// The real `salvo send`, `salvo check` and `salvo feedback` through real proxies (tinyproxy for CONNECT with Basic authentication,
/// danted for SOCKS5) to the simulator, over HTTP/2 and the binary interface: by `--proxy`, by `HTTPS_PROXY`, past
/// them with `NO_PROXY` and `--no-proxy`; every token once in the ledger, failures exit 3 naming the proxy, and the
/// proxy's password in no output.
@Suite(
    .tags(.network),
    .runs(.network),
    .serialized,
    .timeLimit(.minutes(3)),
    .enabled(
        if: ProxyServer.isAvailable,
        "tinyproxy and danted are not installed (apt-get install tinyproxy dante-server; .ci/run installs them)"
    )
)
struct ProxySendCommandTests {
    static let user = (name: "salvo", password: "pr0xy-Pw-Never-Shown")

    /// Every place the password could leak to: what the run printed (standard output and error, debug log lines
    /// included) and the files it wrote.
    private func expectNoPassword(_ run: TestProcess, in folder: URL, _ password: String = Self.user.password) {
        var texts = [run.output]
        for name in (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? [] {
            texts.append((try? String(contentsOf: folder.appendingPathComponent(name), encoding: .utf8)) ?? "")
        }
        let basic = Data("\(Self.user.name):\(password)".utf8).base64EncodedString()
        for text in texts {
            #expect(!text.contains(password), "the proxy's password was printed: \(text.prefix(2000))")
            #expect(!text.contains(basic))
        }
    }

    private func connects(_ proxy: ProxyServer, to port: Int) -> Int {
        proxy.log.components(separatedBy: "CONNECT 127.0.0.1:\(port)").count - 1
    }

    private func send(
        _ salvo: String,
        _ arguments: [String],
        in folder: URL,
        environment: [String: String] = [:]
    ) async throws -> (status: Int32, run: TestProcess) {
        // No proxy of the machine's own leaks in: each run says what it uses.
        let run = try TestProcess(salvo, arguments, in: folder, environment: ProxyServer.cleanEnvironment(environment))
        return (try await run.wait(seconds: 90), run)
    }

    @Test func http2ThroughEachProxyByFlagAndByEnvironment() async throws {
        guard let salvo = InterruptionTests.builtExecutable else { return }
        let paths = CertificateFactory.sharedFolder
        var configuration = SimulatorConfiguration.testing(CertificateFactory.shared)
        configuration.http2 = HTTP2EndpointConfiguration()
        let simulator = try await Simulator.start(configuration)
        let port = simulator.http2Port ?? 0
        let tinyproxy = try await ProxyServer.tinyproxy(user: Self.user)
        defer { tinyproxy.remove() }
        let dante = try await ProxyServer.dante(user: ProxyServer.socksUser)
        defer { dante.remove() }
        let closed = try ClosedPort()
        defer { closed.close() }
        let common =
            [
                "--payload", "payload.json", "--cert", paths.client, "--key", paths.clientKey, "--ca", paths.ca,
                "--gateway", "127.0.0.1:\(port)", "--report", "report.json", "--log-level", "debug", "--progress",
                "none",
            ] + h2SendArguments
        var expected: [String] = []
        func run(_ name: String, seed: UInt64, _ extra: [String], environment: [String: String] = [:]) async throws {
            let (folder, tokens) = try sendFolder("salvo-proxy-\(name)", tokens: 150, seed: seed)
            let (status, run) = try await self.send(
                salvo,
                ["send", "tokens.csv"] + common + extra,
                in: folder,
                environment: environment
            )
            #expect(status == 0, "\(name): \(run.output.suffix(3000))")
            self.expectNoPassword(run, in: folder)
            expected += tokens
        }

        try await run("flag-http", seed: 41_000, ["--proxy", tinyproxy.url()])
        #expect(self.connects(tinyproxy, to: port) >= 1, "\(tinyproxy.log)")
        try await run("flag-socks", seed: 42_000, ["--proxy", dante.url()])
        // The variable names the user, the password comes apart from it.
        let before = self.connects(tinyproxy, to: port)
        try await run(
            "environment",
            seed: 43_000,
            [],
            environment: [
                "HTTPS_PROXY": tinyproxy.url(password: false), "SALVO_PROXY_PASSWORD": Self.user.password,
            ]
        )
        #expect(self.connects(tinyproxy, to: port) > before, "HTTPS_PROXY was not used")
        // Past a proxy that is not there: NO_PROXY names the gateway, --no-proxy ignores the variables.
        let absent = ["HTTPS_PROXY": "http://127.0.0.1:\(closed.port)"]
        try await run(
            "no-proxy-variable",
            seed: 44_000,
            [],
            environment: absent.merging(["NO_PROXY": "localhost,127.0.0.1"]) { $1 }
        )
        try await run("no-proxy-flag", seed: 45_000, ["--no-proxy"], environment: absent)

        let verdict = simulator.verdict(expected: ExpectedTokens(expected.map { try! DeviceToken(hex: $0) }))
        #expect(verdict.passed, "\(verdict.summary)")
        try await simulator.shutdown()
    }

    @Test func binaryThroughEachProxy() async throws {
        guard let salvo = InterruptionTests.builtExecutable else { return }
        let paths = CertificateFactory.sharedFolder
        let simulator = try await Simulator.start(SimulatorConfiguration.testing(CertificateFactory.shared))
        let tinyproxy = try await ProxyServer.tinyproxy(user: Self.user)
        defer { tinyproxy.remove() }
        let dante = try await ProxyServer.dante(user: ProxyServer.socksUser)
        defer { dante.remove() }
        var expected: [String] = []
        for (name, url, seed) in [("http", tinyproxy.url(), UInt64(4121)), ("socks", dante.url(), 4122)] {
            let (folder, tokens) = try sendFolder("salvo-proxy-binary-\(name)", tokens: 300, seed: seed)
            let (status, run) = try await self.send(
                salvo,
                [
                    "send", "tokens.csv", "--payload", "payload.json", "--cert", paths.client, "--key",
                    paths.clientKey, "--ca", paths.ca, "--gateway", "127.0.0.1:\(simulator.gatewayPort)",
                    "--report", "report.json", "--log-level", "debug", "--progress", "none", "--proxy", url,
                ],
                in: folder
            )
            #expect(status == 0, "\(name): \(run.output.suffix(3000))")
            self.expectNoPassword(run, in: folder)
            expected += tokens
        }
        #expect(self.connects(tinyproxy, to: simulator.gatewayPort) >= 1, "\(tinyproxy.log)")
        let verdict = simulator.verdict(expected: ExpectedTokens(expected.map { try! DeviceToken(hex: $0) }))
        #expect(verdict.passed, "\(verdict.summary)")
        try await simulator.shutdown()
    }

    @Test func aRefusingProxyExits3NamingItAndThePasswordStaysUnprinted() async throws {
        guard let salvo = InterruptionTests.builtExecutable else { return }
        let paths = CertificateFactory.sharedFolder
        var configuration = SimulatorConfiguration.testing(CertificateFactory.shared)
        configuration.http2 = HTTP2EndpointConfiguration()
        let simulator = try await Simulator.start(configuration)
        let tinyproxy = try await ProxyServer.tinyproxy(user: Self.user)
        defer { tinyproxy.remove() }
        let wrong = "Wr0ng-Proxy-Pw"
        for (name, gateway, extra) in [
            ("h2", "127.0.0.1:\(simulator.http2Port ?? 0)", h2SendArguments),
            ("binary", "127.0.0.1:\(simulator.gatewayPort)", []),
        ] {
            let (folder, _) = try sendFolder("salvo-proxy-refused-\(name)", tokens: 20, seed: 4131)
            try Data("\(wrong)\n".utf8).write(to: folder.appendingPathComponent("proxy-password"))
            let (status, run) = try await self.send(
                salvo,
                [
                    "send", "tokens.csv", "--payload", "payload.json", "--cert", paths.client, "--key",
                    paths.clientKey, "--ca", paths.ca, "--gateway", gateway, "--report", "report.json",
                    "--log-level", "debug", "--progress", "none", "--proxy", tinyproxy.url(password: false),
                    "--proxy-password-file", "proxy-password",
                ] + extra,
                in: folder
            )
            let output = run.output
            #expect(status == 3, "\(name): \(output.suffix(3000))")
            #expect(
                output.contains("the proxy http://salvo@127.0.0.1:\(tinyproxy.port)"),
                "\(name): \(output.suffix(3000))"
            )
            #expect(output.contains("refused the user and password"), "\(name): \(output.suffix(3000))")
            try? FileManager.default.removeItem(at: folder.appendingPathComponent("proxy-password"))
            self.expectNoPassword(run, in: folder, wrong)
        }
        #expect(simulator.ledger.snapshot().accepted == 0)
        try await simulator.shutdown()
    }

    @Test func aPasswordFileWithoutAnyProxyIsAUsageErrorNamingTheFile() async throws {
        guard let salvo = InterruptionTests.builtExecutable else { return }
        let paths = CertificateFactory.sharedFolder
        let simulator = try await Simulator.start(SimulatorConfiguration.testing(CertificateFactory.shared))
        let (folder, _) = try sendFolder("salvo-proxy-password-alone", tokens: 20, seed: 4151)
        try Data("\(Self.user.password)\n".utf8).write(to: folder.appendingPathComponent("proxy-password"))
        let arguments = [
            "send", "tokens.csv", "--payload", "payload.json", "--cert", paths.client, "--key", paths.clientKey,
            "--ca", paths.ca, "--gateway", "127.0.0.1:\(simulator.gatewayPort)", "--report", "report.json",
            "--progress", "none", "--proxy-password-file", "proxy-password",
        ]
        // No --proxy and no proxy variable: without the refusal the job would send directly, silently.
        let (status, run) = try await self.send(salvo, arguments, in: folder)
        #expect(status == 64, "\(run.output)")
        #expect(
            run.output.contains("--proxy-password-file proxy-password gives a proxy password, but there is no proxy"),
            "\(run.output)"
        )
        #expect(simulator.ledger.snapshot().accepted == 0)
        try? FileManager.default.removeItem(at: folder.appendingPathComponent("proxy-password"))
        self.expectNoPassword(run, in: folder)
        try await simulator.shutdown()
    }

    /// The "connected" and "connect failed" log lines: the gateway always, and the proxy beside it when the
    /// connection goes through one; a proxy that cannot be reached is named as the proxy in the error.
    @Test func theConnectionLogNamesTheProxyBesideTheGateway() async throws {
        guard let salvo = InterruptionTests.builtExecutable else { return }
        let paths = CertificateFactory.sharedFolder
        var configuration = SimulatorConfiguration.testing(CertificateFactory.shared)
        configuration.http2 = HTTP2EndpointConfiguration()
        let simulator = try await Simulator.start(configuration)
        let tinyproxy = try await ProxyServer.tinyproxy(user: Self.user)
        defer { tinyproxy.remove() }
        let closed = try ClosedPort()
        defer { closed.close() }
        let absent = "http://127.0.0.1:\(closed.port)"
        // swift-log's text lines end with `[module] message`, the metadata before it.
        func lines(_ output: String, _ message: String) -> [Substring] {
            output.split(separator: "\n").filter { $0.hasSuffix("] \(message)") }
        }
        var seed: UInt64 = 4160
        for (name, gateway, extra) in [
            ("h2", "127.0.0.1:\(simulator.http2Port ?? 0)", h2SendArguments),
            ("binary", "127.0.0.1:\(simulator.gatewayPort)", []),
        ] {
            for (proxy, expectedStatus) in [(tinyproxy.url(), Int32(0)), (absent, 3)] {
                seed += 1
                let (folder, _) = try sendFolder("salvo-proxy-log-\(name)", tokens: 20, seed: seed)
                let (status, run) = try await self.send(
                    salvo,
                    [
                        "send", "tokens.csv", "--payload", "payload.json", "--cert", paths.client, "--key",
                        paths.clientKey, "--ca", paths.ca, "--gateway", gateway, "--report", "report.json",
                        "--log-level", "debug", "--progress", "none", "--proxy", proxy, "--give-up-seconds", "5",
                    ] + extra,
                    in: folder
                )
                let output = run.output
                #expect(status == expectedStatus, "\(name) \(proxy): \(output.suffix(3000))")
                if expectedStatus == 0 {
                    let connected = lines(output, "connected")
                    #expect(!connected.isEmpty, "\(name): \(output.suffix(3000))")
                    for line in connected {
                        #expect(line.contains("gateway=\(gateway)"), "\(name): \(line)")
                        #expect(line.contains("proxy=http://salvo@127.0.0.1:\(tinyproxy.port)"), "\(name): \(line)")
                    }
                    self.expectNoPassword(run, in: folder)
                } else {
                    let failed = lines(output, "connect failed")
                    #expect(!failed.isEmpty, "\(name): \(output.suffix(3000))")
                    for line in failed {
                        #expect(line.contains("proxy=\(absent)"), "\(name): \(line)")
                        #expect(line.contains("the proxy \(absent) cannot be reached"), "\(name): \(line)")
                    }
                }
            }
        }
        try await simulator.shutdown()
    }

    @Test func feedbackThroughTheProxyFromTheCommandLine() async throws {
        guard let salvo = InterruptionTests.builtExecutable else { return }
        let paths = CertificateFactory.sharedFolder
        let simulator = try await Simulator.start(SimulatorConfiguration.testing(CertificateFactory.shared))
        let tinyproxy = try await ProxyServer.tinyproxy(user: Self.user)
        defer { tinyproxy.remove() }
        let (folder, _) = try sendFolder("salvo-proxy-feedback", tokens: 1, seed: 4171)
        let (status, run) = try await self.send(
            salvo,
            [
                "feedback", "--gateway", "127.0.0.1:\(simulator.feedbackPort)", "--cert", paths.client, "--key",
                paths.clientKey, "--ca", paths.ca, "--output", "feedback.csv", "--proxy", tinyproxy.url(),
            ],
            in: folder
        )
        #expect(status == 0, "\(run.output)")
        #expect(self.connects(tinyproxy, to: simulator.feedbackPort) == 1, "\(tinyproxy.log)")
        #expect(FileManager.default.fileExists(atPath: folder.appendingPathComponent("feedback.csv").path))
        self.expectNoPassword(run, in: folder)
        try await simulator.shutdown()
    }

    @Test func checkReportsTheProxyAsItsOwnLine() async throws {
        guard let salvo = InterruptionTests.builtExecutable else { return }
        let paths = CertificateFactory.sharedFolder
        var configuration = SimulatorConfiguration.testing(CertificateFactory.shared)
        configuration.http2 = HTTP2EndpointConfiguration()
        let simulator = try await Simulator.start(configuration)
        let port = simulator.http2Port ?? 0
        let tinyproxy = try await ProxyServer.tinyproxy(user: Self.user)
        defer { tinyproxy.remove() }
        let (folder, _) = try sendFolder("salvo-proxy-check", tokens: 5, seed: 4141)
        let arguments = [
            "check", "tokens.csv", "--payload", "payload.json", "--cert", paths.client, "--key", paths.clientKey,
            "--ca", paths.ca, "--gateway", "127.0.0.1:\(port)", "--protocol", "h2", "--server-name", "localhost",
            "--topic", CertificateFactory.sharedTopic,
        ]
        let (status, run) = try await self.send(salvo, arguments + ["--proxy", tinyproxy.url()], in: folder)
        let output = run.output
        #expect(status == 0, "\(output)")
        let lines = output.split(separator: "\n")
        let proxyLine = lines.firstIndex { $0.contains("proxy h2") }
        let handshakeLine = lines.firstIndex { $0.contains("handshake h2") }
        #expect(proxyLine != nil && handshakeLine != nil && proxyLine! < handshakeLine!, "\(output)")
        #expect(
            output.contains(
                "proxy http://salvo@127.0.0.1:\(tinyproxy.port): reached, authenticated (Basic), tunnel to 127.0.0.1:\(port) open"
            ),
            "\(output)"
        )
        self.expectNoPassword(run, in: folder)
        let (refused, refusedRun) = try await self.send(
            salvo,
            arguments + ["--proxy", tinyproxy.url(user: (Self.user.name, "Wr0ng-Proxy-Pw"))],
            in: folder
        )
        #expect(refused != 0, "\(refusedRun.output)")
        #expect(refusedRun.output.contains("proxy h2"), "\(refusedRun.output)")
        #expect(refusedRun.output.contains("refused the user and password"), "\(refusedRun.output)")
        try await simulator.shutdown()
    }
}
