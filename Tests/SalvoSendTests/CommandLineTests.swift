import Foundation
import SalvoBinary
import SalvoRows
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// Options refused before anything connects: the real `salvo` executable exits 64 and names the flag.
@Suite(.tags(.process), .runs(.process)) struct CommandLineTests {
    /// Runs `salvo` with `arguments` in a fresh folder holding `tokens.csv` and `payload.json`; its exit status
    /// and standard error.
    private func salvo(_ arguments: [String]) async throws -> (status: Int32, error: String)? {
        try await runSalvo(
            arguments,
            files: [
                "tokens.csv": "token\n" + String(repeating: "ab", count: 32) + "\n",
                "payload.json": #"{"aps":{"alert":"hi"}}"#,
            ],
            folderPrefix: "salvo-cli",
            readStandardError: true
        ).map { ($0.status, $0.text) }
    }

    /// An HTTP/2 send to port 9 of the loopback (nothing listens), with one option changed.
    private func http2Send(_ extra: [String], topic: String = "com.example.app") -> [String] {
        let paths = CertificateFactory.sharedFolder
        return [
            "send", "tokens.csv", "--protocol", "h2", "--payload", "payload.json", "--gateway", "127.0.0.1:9",
            "--cert", paths.client, "--key", paths.clientKey, "--topic", topic,
        ] + extra
    }

    @Test(arguments: [
        (["--push-type", "alerts"], "--push-type alerts is not one of"),
        (["--push-type", ""], "--push-type  is not one of"),
        (["--collapse-id", "a\r\nx-injected: 1"], "--collapse-id holds a line break"),
        (["--collapse-id", String(repeating: "c", count: 65)], "--collapse-id is 65 bytes"),
    ])
    func http2HeaderOptionsAreCheckedBeforeConnecting(extra: [String], message: String) async throws {
        guard let (status, error) = try await self.salvo(self.http2Send(extra)) else { return }
        #expect(status == 64, "\(error)")
        #expect(error.contains(message), "\(error)")
    }

    @Test(arguments: [("", "--topic is empty"), ("com.example.app\r\n", "--topic holds a line break")])
    func http2TopicsAreCheckedBeforeConnecting(topic: String, message: String) async throws {
        guard let (status, error) = try await self.salvo(self.http2Send([], topic: topic)) else { return }
        #expect(status == 64, "\(error)")
        #expect(error.contains(message), "\(error)")
        var check = self.http2Send([], topic: topic)
        check[0] = "check"
        guard let (checkStatus, checkError) = try await self.salvo(check) else { return }
        #expect(checkStatus == 64 && checkError.contains(message), "check: \(checkError)")
    }

    /// `send` and `check` judge the signing key's ids and the topic by the same rules (`APNSHeaderValueRules`).
    @Test(arguments: ["send", "check"]) func aKeyIDThatIsNotTenCharactersIsRefused(command: String) async throws {
        let arguments = [
            command, "tokens.csv", "--protocol", "h2", "--payload", "payload.json", "--gateway", "127.0.0.1:9",
            "--auth-key", "AuthKey.p8", "--key-id", "ABC123", "--team-id", "DEF123GHIJ", "--topic", "com.example.app",
        ]
        guard let (status, error) = try await self.salvo(arguments) else { return }
        #expect(status == 64, "\(error)")
        #expect(error.contains("--key-id is 10 letters and digits"), "\(error)")
    }

    @Test func anHTTP2SendToNothingListeningStopsAtOnceWithExitStatus3AndWritesTheRecord() async throws {
        let folder = TestScratch.root.appendingPathComponent("salvo-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let report = folder.appendingPathComponent("report.json").path
        guard let (status, error) = try await self.salvo(self.http2Send(["--report", report])) else { return }
        #expect(status == 3, "\(error)")
        let unsettled = try String(
            contentsOfFile: folder.appendingPathComponent("report.unsettled.csv").path,
            encoding: .utf8
        )
        #expect(unsettled.split(separator: "\n").count == 2, "the header and the one row, to send again")
        let text = try String(contentsOfFile: report, encoding: .utf8)
        #expect(text.contains("connection refused"), "the report says why: \(text)")
        let decoded = try JSONDecoder().decode(JobReport.self, from: Data(text.utf8))
        #expect(decoded.reconnects == 0, "not retried")
        #expect(decoded.notSent == 1)
    }

    /// Numeric options out of range are refused by name (exit 64), never a crash: each of these once ended in a
    /// backtrace (an overflowing duration, an allocation no machine has, a port past 65535).
    @Test(arguments: [
        (["--reconnect-floor-milliseconds=-1"], "--reconnect-floor-milliseconds is 0 to 60000"),
        (["--flush-microseconds", "99999999999999999"], "--flush-microseconds is 0 to 10000000"),
        (["--settle-milliseconds", "9223372036854775807"], "--settle-milliseconds is 1 to 600000"),
        (["--window-rows", "999999999999"], "--window-rows is 1024 to 100000000"),
        (["--give-up-seconds", "0"], "--give-up-seconds is 1 to 3600"),
        (["--flush-bytes", "1"], "--flush-bytes is 256 to 16777216"),
        (["--connections", "0"], "--connections is 1 to 64 or auto"),
        (["--max-connections", "100000"], "--max-connections is 1 to 256"),
    ])
    func numericSendOptionsAreRangeChecked(extra: [String], message: String) async throws {
        let arguments = ["send", "tokens.csv", "--payload", "payload.json", "--gateway", "127.0.0.1:9"] + extra
        guard let (status, error) = try await self.salvo(arguments) else { return }
        #expect(status == 64, "\(error)")
        #expect(error.contains(message), "\(error)")
        #expect(!error.contains("Fatal error") && !error.contains("Stack dump"), "\(error)")
    }

    @Test(arguments: [
        (["--threads", "100000"], "--threads is 1 to 256"),
        (["--gateway-port", "99999"], "--gateway-port is 0 to 65535"),
        (["--h2-port=-1"], "--h2-port is 0 to 65535"),
    ])
    func numericSimulatorOptionsAreRangeChecked(extra: [String], message: String) async throws {
        guard let (status, error) = try await self.salvo(["simulate"] + extra) else { return }
        #expect(status == 64, "\(error)")
        #expect(error.contains(message), "\(error)")
    }

    /// A token file that cannot be written (a full device) is an error with the path, exit 3, not a trap.
    @Test func tokensGenerateReportsAFailedWrite() async throws {
        guard FileManager.default.fileExists(atPath: "/dev/full") else { return }
        guard let (status, error) = try await self.salvo(["tokens", "generate", "100000", "-o", "/dev/full"]) else {
            return
        }
        #expect(status == 3, "\(error)")
        #expect(error.contains("/dev/full: cannot write"), "\(error)")
    }

    @Test func payloadCheckRefusesAPriorityAppleDoesNotDefine() async throws {
        guard let (status, error) = try await self.salvo(["payload", "check", "payload.json", "--priority", "7"]) else {
            return
        }
        #expect(status == 64, "\(error)")
        #expect(error.contains("--priority is 10, 5 for --format binary, not 7"), "\(error)")
        guard let (accepted, _) = try await self.salvo(["payload", "check", "payload.json", "--priority", "5"]) else {
            return
        }
        #expect(accepted == 0)
    }

    /// One rule for an empty input, whatever brings it: a file with a header only, standard input with a header only
    /// (before: exit 0 "every row delivered"), an empty pipe — no row to send is exit 3, before anything connects
    /// (as a query that returns no rows).
    @Test(arguments: [
        ("header.csv", "token\n", "header.csv: no row to send"),
        ("-", "token\n", "standard input: no row to send"),
    ])
    func anInputWithNoRowIsAJobThatCouldNotRun(input: String, text: String, message: String) async throws {
        guard let salvo = InterruptionTests.builtExecutable else { return }
        let folder = TestScratch.root.appendingPathComponent("salvo-empty-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data(text.utf8).write(to: folder.appendingPathComponent("header.csv"))
        try Data(#"{"aps":{"alert":"hi"}}"#.utf8).write(to: folder.appendingPathComponent("payload.json"))
        let paths = CertificateFactory.sharedFolder
        let send = [
            salvo, "send", input, "--payload", "payload.json", "--gateway", "127.0.0.1:9", "--cert", paths.client,
            "--key", paths.clientKey,
        ].map { "'\($0)'" }.joined(separator: " ")
        let (status, output) = try await TestProcess.run("/bin/sh", ["-c", "\(send) < header.csv"], in: folder)
        #expect(status == 3, "\(output)")
        #expect(output.contains(message), "\(output)")
    }

    /// `check` takes `--token-cache` as `send` does (a send's command line checked as it is), and only with a key.
    @Test func checkTakesTheTokenCacheASendTakes() async throws {
        let paths = CertificateFactory.sharedFolder
        let check = [
            "check", "--gateway", "127.0.0.1:9", "--protocol", "h2", "--no-handshake", "--token-cache", "c.json",
            "--topic", "com.example.app",
        ]
        guard let (refused, usage) = try await self.salvo(check + ["--cert", paths.client, "--key", paths.clientKey])
        else {
            return
        }
        #expect(refused == 64 && usage.contains("--token-cache goes with --auth-key"), "\(usage)")
        let key = try DevelopmentSigningKey.ensure(in: paths.folder)
        let withKey = [
            "--auth-key", key.path, "--key-id", DevelopmentSigningKey.keyID, "--team-id", DevelopmentSigningKey.teamID,
        ]
        guard let (status, error) = try await self.salvo(check + withKey) else { return }
        #expect(status == 0, "taken with --auth-key: \(error)")
    }
}
