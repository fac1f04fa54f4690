import APNSWire
import Foundation
import SalvoBinary
import SalvoRows
import SalvoSend
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// A payload per row over the binary interface (`HTTP2PayloadTemplateTests` for HTTP/2), checked from the simulator's ledger: the digest each device shows
/// is the digest of the payload the row should render to.
@Suite(.tags(.process), .runs(.process)) struct PayloadTemplateSendTests {
    private static func folder() throws -> String {
        let path = TestScratch.root.appendingPathComponent("salvo-tpl-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// JSON string escaping, written out here apart from the renderer's.
    private static func escaped(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\t": out += "\\t"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    private static func csvField(_ text: String) -> String {
        "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    private static func digest(_ text: String) -> String {
        Verdict.digestHex(Array(text.utf8).withUnsafeBytes { TokenHash.digest($0) })
    }

    /// Sends `csv` with `templates` to a fresh simulator refusing `invalid`; the result and the verdict over
    /// `expected`.
    private static func send(
        csv: String,
        templates: PayloadTemplates,
        expected: [DeviceToken],
        invalid: [DeviceToken] = [],
        command: FrameCommand = .framed
    ) async throws -> (SendResult, Verdict, String) {
        let here = try Self.folder()
        let certificates = CertificateFactory.shared
        let paths = CertificateFactory.sharedFolder
        var plan = FaultPlan()
        plan.invalidTokens = invalid.map(\.hexString)
        let simulator = try await Simulator.start(SimulatorConfiguration.testing(certificates, plan: plan))
        let input = here + "/tokens.csv"
        try Data(csv.utf8).write(to: URL(fileURLWithPath: input))
        var job = BinaryJobConfiguration(
            host: "127.0.0.1",
            port: simulator.gatewayPort,
            credentials: GatewayCredentials(
                identity: .pem(certificateChainFile: paths.client, privateKeyFile: paths.clientKey),
                trustedCAFile: paths.ca
            ),
            template: try FrameTemplate(command: command, payload: templates.templates[0].probe)
        )
        job.settle = .milliseconds(200)
        job.reconnect.minimumInterval = .zero
        // Small chunks: rows sent again after an error come from chunks already replaced, and are read again.
        job.chunkRows = 16
        job.connections = 2
        let request = SendRequest(
            files: [input],
            interface: .binary(job),
            outputs: SendOutputs(rejects: here + "/rejects.csv"),
            payloads: templates
        )
        let result: SendResult
        do {
            result = try await BulkSend.prepare(request).run()
        } catch {
            try await simulator.shutdown()
            throw error
        }
        let verdict = simulator.verdict(expected: ExpectedTokens(expected), listLimit: expected.count)
        try await simulator.shutdown()
        return (result, verdict, try String(contentsOfFile: here + "/rejects.csv", encoding: .utf8))
    }

    @Test func eachRowGetsItsOwnPayloadAndBadRowsAreRefusedWithTheirLines() async throws {
        let template = try PayloadTemplate(
            json: Array(#"{"aps":{"alert":{"title":"Hi {{name}}","body":"{{ city }}"},"badge":"{{badge:int}}"}}"#.utf8),
            file: "welcome.json"
        )
        var generator = TokenGenerator(seed: 41)
        let tokens = (0..<300).map { _ in generator.next() }
        var csv = "token,name,city,badge\n"
        var expected: [DeviceToken: String] = [:]
        var badLines: [Int: String] = [:]
        // Quoted line breaks make some records two lines long: each row's line is counted as a reader counts it.
        var line = 2
        for (index, token) in tokens.enumerated() {
            let name =
                ["Zoë", "Ann \"the\" 2nd", "O'Brien, Jr.", "tab\there", "line\nbreak", ""][index % 6] + "\(index)"
            let city = index % 7 == 0 ? "" : "Köln \\ \(index)"
            var badge = String(index % 50)
            if index == 40 {
                badge = "4x"
                badLines[line] = "column 'badge' is '4x', not an integer"
            }
            var title = name
            if index == 120 {
                title = String(repeating: "é", count: 1100)
                badLines[line] = "the rendered payload is "
            }
            csv += "\(token.hexString),\(Self.csvField(title)),\(Self.csvField(city)),\(badge)\n"
            defer { line += 1 + title.filter { $0 == "\n" }.count }
            if badLines[line] == nil {
                expected[token] =
                    #"{"aps":{"alert":{"title":"Hi "# + Self.escaped(title) + #"","body":""# + Self.escaped(city)
                    + #""},"badge":"# + badge + "}}"
            }
        }
        // Two refused tokens: every row written after each is sent again, some from chunks already replaced.
        let invalid = [tokens[30], tokens[200]]
        let (result, verdict, rejects) = try await Self.send(
            csv: csv,
            templates: PayloadTemplates(template),
            expected: Array(expected.keys),
            invalid: invalid
        )
        #expect(result.report.validRows == 298)
        #expect(result.report.delivered == 296)
        #expect(result.report.rejected == ["InvalidToken": 2])
        #expect(Set(result.inputRejects.map(\.line)) == Set(badLines.keys))
        for reject in result.inputRejects {
            #expect(reject.reason.hasPrefix(badLines[reject.line] ?? "?"), "\(reject)")
            #expect(rejects.contains("tokens.csv,\(reject.line),"), "the rejects file names the line")
        }
        #expect(
            result.inputRejects.first { $0.reason.hasPrefix("the rendered") }?.reason
                == "the rendered payload is 2266 bytes; binary command 2 allows at most 2048"
        )
        #expect(verdict.invalidNeverDelivered == 2, "\(verdict.summary)")
        #expect(verdict.neverDelivered == 0 && verdict.deliveredMoreThanOnce == 0, "\(verdict.summary)")
        var checked = 0
        for display in verdict.displays {
            let token = try DeviceToken(hex: display.token)
            if invalid.contains(token) {
                #expect(display.state == .nothing)
                continue
            }
            #expect(display.state == .displayed)
            #expect(display.payloadDigest == expected[token].map(Self.digest), "\(display.token)")
            checked += 1
        }
        #expect(checked == 296)
    }

    @Test func theLanguageColumnPicksATemplateWithFallbacks() async throws {
        func compile(_ text: String, _ file: String) throws -> PayloadTemplate {
            try PayloadTemplate(json: Array(text.utf8), file: file)
        }
        let templates = PayloadTemplates(
            byLanguage: [
                ("default", try compile(#"{"aps":{"alert":"Hello {{name}}"}}"#, "default.json")),
                ("pt", try compile(#"{"aps":{"alert":"Olá {{name}}"}}"#, "pt.json")),
                ("pt-BR", try compile(#"{"aps":{"alert":"Oi {{name}}","badge":"{{n:int}}"}}"#, "pt-BR.json")),
            ],
            languageColumn: "lang"
        )
        let languages = ["pt-BR", "pt-PT", "pt", "fr", "", "PT_br"]
        var generator = TokenGenerator(seed: 42)
        let tokens = (0..<60).map { _ in generator.next() }
        var csv = "lang,token,n,name\n"
        var expected: [DeviceToken: String] = [:]
        for (index, token) in tokens.enumerated() {
            let language = languages[index % languages.count]
            let name = "user \(index)"
            csv += "\(language),\(token.hexString),\(index),\(name)\n"
            expected[token] =
                switch language.lowercased().replacingOccurrences(of: "_", with: "-") {
                case "pt-br": #"{"aps":{"alert":"Oi "# + name + #"","badge":"# + String(index) + "}}"
                case "pt-pt", "pt": #"{"aps":{"alert":"Olá "# + name + #""}}"#
                default: #"{"aps":{"alert":"Hello "# + name + #""}}"#
                }
        }
        let (result, verdict, _) = try await Self.send(
            csv: csv,
            templates: templates,
            expected: tokens,
            command: .enhanced
        )
        #expect(result.report.delivered == 60 && result.inputRejects.isEmpty)
        #expect(verdict.displays.count == 60)
        for display in verdict.displays {
            let token = try DeviceToken(hex: display.token)
            #expect(display.state == .displayed)
            #expect(display.payloadDigest == expected[token].map(Self.digest), "\(display.token)")
        }
    }

    @Test func aPlaceholderThatNamesNoColumnIsRefusedBeforeSending() async throws {
        let here = try Self.folder()
        let input = here + "/tokens.csv"
        try Data("token,name\n\(String(repeating: "ab", count: 32)),Ann\n".utf8).write(to: URL(fileURLWithPath: input))
        let template = try PayloadTemplate(
            json: Array("{\"aps\":\n  {\"alert\":\"Hi {{nmae}}\"}}".utf8),
            file: "welcome.json"
        )
        let request = SendRequest(
            files: [input],
            interface: try unusedBinaryInterface(payload: template.probe),
            payloads: PayloadTemplates(template)
        )
        let error = try await #require(throws: JobError.self) { try await BulkSend.prepare(request) }
        #expect(error.code == .input)
        #expect(
            error.message
                == "\(input): line 1: welcome.json, line 2, column 16: {{nmae}} names no column of the header (it has: token, name)"
        )
    }

    @Test(arguments: [
        (
            #"{"aps":{"alert":"Hi {{name"}}"#, Int32(3),
            "bad.json, line 1, column 21: '{{' is not closed by '}}' within its string"
        ),
        (#"{"aps":{"alert":"Hi {{nmae}}"}}"#, 3, "bad.json, line 1, column 21: {{nmae}} names no column of the header"),
        (#"{"aps":{"badge":"+{{n:int}}"}}"#, 3, "bad.json, line 1, column 19: '{{n:int}}' must be the whole value"),
    ])
    func theCommandRefusesABadTemplateBeforeConnecting(text: String, status: Int32, message: String) async throws {
        try await self.refused(["--payload-template", "bad.json"], template: text, status: status, message: message)
    }

    @Test func aBadTemplateOverHTTP2IsRefusedBeforeConnectingToo() async throws {
        try await self.refused(
            ["--payload-template", "bad.json", "--protocol", "h2", "--topic", CertificateFactory.sharedTopic],
            template: #"{"aps":{"alert":"Hi {{nmae}}"}}"#,
            status: 3,
            message: "bad.json, line 1, column 21: {{nmae}} names no column of the header"
        )
    }

    /// Runs `salvo send tokens.csv` with `options` next to `bad.json` holding `template`; expects `status` and
    /// `message` on standard error.
    private func refused(_ options: [String], template text: String, status: Int32, message: String) async throws {
        guard let salvo = InterruptionTests.builtExecutable else { return }
        let here = try Self.folder()
        try Data("token,name\n\(String(repeating: "ab", count: 32)),Ann\n".utf8)
            .write(to: URL(fileURLWithPath: here + "/tokens.csv"))
        try Data(text.utf8).write(to: URL(fileURLWithPath: here + "/bad.json"))
        let paths = CertificateFactory.sharedFolder
        // Port 9 of the loopback: nothing listens, so a connect would fail with another message.
        let (ended, text) = try await TestProcess.run(
            salvo,
            [
                "send", "tokens.csv", "--gateway", "127.0.0.1:9", "--cert", paths.client, "--key", paths.clientKey,
                "--quiet",
            ] + options,
            in: URL(fileURLWithPath: here),
            output: .standardErrorOnly
        )
        #expect(ended == status, "\(text)")
        #expect(text.contains(message), "\(text)")
    }
}
