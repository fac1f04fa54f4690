import APNSWire
import Foundation
import SalvoBinary
import SalvoRows
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// A payload per row over HTTP/2, through the real executable against the simulator's HTTP/2 endpoint over TLS:
/// each request's body is the row's rendered payload (the digest each device shows in the ledger is the digest of
/// the payload the row should render to), and a row over HTTP/2's 4096 bytes is refused with its line.
@Suite(.tags(.process), .runs(.process)) struct HTTP2PayloadTemplateTests {
    private static func digest(_ text: String) -> String {
        Verdict.digestHex(Array(text.utf8).withUnsafeBytes { TokenHash.digest($0) })
    }

    /// Runs `salvo send tokens.csv --protocol h2 …` in `folder` with `payload` (the template options) against a
    /// fresh simulator; the exit status, what it printed, and the verdict over `expected`.
    private static func send(
        folder: URL,
        payload: [String],
        expected: [DeviceToken],
        engine: String = "wire"
    ) async throws -> (status: Int32, output: String, verdict: Verdict) {
        guard let salvo = InterruptionTests.builtExecutable else { throw CancellationError() }
        let paths = CertificateFactory.sharedFolder
        var configuration = SimulatorConfiguration.testing(CertificateFactory.shared)
        configuration.http2 = HTTP2EndpointConfiguration()
        let simulator = try await Simulator.start(configuration)
        let run: TestProcess
        do {
            run = try TestProcess(
                salvo,
                [
                    "send", "tokens.csv", "--gateway", "127.0.0.1:\(simulator.http2Port ?? 0)", "--cert", paths.client,
                    "--key", paths.clientKey, "--ca", paths.ca, "--connections", "2", "--protocol", "h2",
                    "--server-name", "localhost", "--topic", CertificateFactory.sharedTopic, "--push-type", "alert",
                    "--rejects", "rejects.csv", "--report", "report.json", "--h2-engine", engine,
                ] + payload,
                in: folder
            )
            try await run.wait(seconds: 120)
        } catch {
            try await simulator.shutdown()
            throw error
        }
        let verdict = simulator.verdict(expected: ExpectedTokens(expected), listLimit: expected.count)
        try await simulator.shutdown()
        return (run.status, run.output, verdict)
    }

    private static func folder() throws -> URL {
        let folder = TestScratch.root.appendingPathComponent("salvo-h2tpl-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }

    @Test(arguments: ["wire", "nio"])
    func eachRequestCarriesItsRowsPayloadAndAnOverSizeRowIsRefusedWithItsLine(engine: String) async throws {
        let folder = try Self.folder()
        try Data(#"{"aps":{"alert":{"title":"Hi {{name}}","body":"{{city}}"},"badge":"{{badge:int}}"}}"#.utf8)
            .write(to: folder.appendingPathComponent("welcome.json"))
        var generator = TokenGenerator(seed: 51)
        let tokens = (0..<1500).map { _ in generator.next() }
        var csv = "token,name,city,badge\n"
        var expected: [DeviceToken: String] = [:]
        var badLines: [Int: String] = [:]
        for (index, token) in tokens.enumerated() {
            let line = index + 2
            // A comma and a quote (CSV-quoted, JSON-escaped), a non-ASCII letter, an empty field.
            var name = ["Zoë", "Ann \"the\" 2nd, Jr.", "O'Brien", ""][index % 4] + "\(index)"
            var badge = String(index % 50)
            if index == 40 {
                badge = "4x"
                badLines[line] = "column 'badge' is '4x', not an integer"
            }
            if index == 1200 {
                // 4200 bytes of name: 4263 rendered, over HTTP/2's 4096 (and under 5120, a VoIP push's limit).
                name = String(repeating: "é", count: 2100)
                badLines[line] = "the rendered payload is 4263 bytes; HTTP/2 allows at most 4096"
            }
            let city = "Köln \(index)"
            csv += "\(token.hexString),\"\(name.replacingOccurrences(of: "\"", with: "\"\""))\",\(city),\(badge)\n"
            if badLines[line] == nil {
                let escapedName = name.replacingOccurrences(of: "\"", with: "\\\"")
                expected[token] =
                    #"{"aps":{"alert":{"title":"Hi "# + escapedName + #"","body":""# + city + #""},"badge":"# + badge
                    + "}}"
            }
        }
        try Data(csv.utf8).write(to: folder.appendingPathComponent("tokens.csv"))
        let (status, output, verdict) = try await Self.send(
            folder: folder,
            payload: ["--payload-template", "welcome.json"],
            expected: Array(expected.keys),
            engine: engine
        )
        #expect(status == 1, "two bad rows: exit 1\n\(output)")
        #expect(verdict.deliveredOnce == expected.count, "\(verdict.summary)")
        #expect(verdict.deliveredMoreThanOnce == 0 && verdict.unexpected == 0, "\(verdict.summary)")
        var checked = 0
        for display in verdict.displays {
            let token = try DeviceToken(hex: display.token)
            #expect(display.payloadDigest == expected[token].map(Self.digest), "\(display.token)")
            checked += 1
        }
        #expect(checked == expected.count)
        let rejects = try String(contentsOf: folder.appendingPathComponent("rejects.csv"), encoding: .utf8)
        for (line, reason) in badLines {
            #expect(rejects.contains("tokens.csv,\(line),"), "the rejects file names line \(line)")
            #expect(rejects.contains(reason), "\(reason)")
        }
        let report = try JSONDecoder().decode(
            JobReport.self,
            from: Data(contentsOf: folder.appendingPathComponent("report.json"))
        )
        #expect(report.invalidInput == 2)
        #expect(report.validRows == expected.count)
        #expect(report.delivered == expected.count)
    }

    @Test func theLanguageColumnPicksATemplateWithFallbacksOverHTTP2() async throws {
        let folder = try Self.folder()
        let templates = folder.appendingPathComponent("templates")
        try FileManager.default.createDirectory(at: templates, withIntermediateDirectories: true)
        try Data(#"{"aps":{"alert":"Hello {{name}}"}}"#.utf8).write(
            to: templates.appendingPathComponent("default.json")
        )
        try Data(#"{"aps":{"alert":"Olá {{name}}"}}"#.utf8).write(to: templates.appendingPathComponent("pt.json"))
        try Data(#"{"aps":{"alert":"Oi {{name}}","badge":"{{n:int}}"}}"#.utf8)
            .write(to: templates.appendingPathComponent("pt-BR.json"))
        let languages = ["pt-BR", "pt-PT", "pt", "fr", "", "PT_br"]
        var generator = TokenGenerator(seed: 52)
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
        try Data(csv.utf8).write(to: folder.appendingPathComponent("tokens.csv"))
        let (status, output, verdict) = try await Self.send(
            folder: folder,
            payload: ["--payload-dir", "templates", "--language-column", "lang"],
            expected: tokens
        )
        #expect(status == 0, "\(output)")
        #expect(verdict.deliveredOnce == 60, "\(verdict.summary)")
        #expect(verdict.displays.count == 60)
        for display in verdict.displays {
            let token = try DeviceToken(hex: display.token)
            #expect(display.payloadDigest == expected[token].map(Self.digest), "\(display.token)")
        }
    }
}
