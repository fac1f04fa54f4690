import APNSWire
import Foundation
import SalvoBinary
import SalvoRows
import SalvoSend
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// `salvo check` says a send would start exactly when `send` would: it applies send's rule on a file whose first
/// rows hold no token, and checks a payload per row (`--payload-template`, `--payload-dir`) as send loads and
/// renders it.
@Suite(.tags(.process), .runs(.process)) struct CheckAsSendTests {
    private static let token = String(repeating: "ab", count: 32)

    /// `salvo check --no-handshake` in a folder holding `files`: its status and standard output.
    private func check(_ extra: [String], files: [String: String]) async throws -> (status: Int32, output: String)? {
        let paths = CertificateFactory.sharedFolder
        let arguments =
            [
                "check", "--gateway", "127.0.0.1:9", "--cert", paths.client, "--key", paths.clientKey, "--topic",
                CertificateFactory.sharedTopic, "--no-handshake",
            ] + extra
        return try await runSalvo(
            arguments,
            files: files,
            folderPrefix: "salvo-check-as-send",
            readStandardError: false
        )
        .map { ($0.status, $0.text) }
    }

    @Test func aFileWhoseFirstRowsHoldNoTokenFailsAsSendRefusesIt() async throws {
        // 1000 bad rows, then a good one: send refuses the file before connecting, so check fails it.
        let late = "token\n" + String(repeating: "nothex\n", count: 1000) + Self.token + "\n"
        guard let (status, output) = try await self.check(["late.csv"], files: ["late.csv": late]) else { return }
        #expect(status == 3, "\(output)")
        #expect(output.contains("no valid token in its first 1000 row(s)"), "\(output)")
        #expect(output.contains("a send refuses this before its first connection"), "\(output)")

        // The good row within the first 1000: send starts, and so check passes (the bad rows are warned of).
        let early = "token\n" + String(repeating: "nothex\n", count: 999) + Self.token + "\n" + "nothex\n"
        guard let (passed, said) = try await self.check(["early.csv"], files: ["early.csv": early]) else { return }
        #expect(passed == 0, "\(said)")
        #expect(said.contains("a token within the first 1000 rows of the file, as send needs"), "\(said)")
        #expect(said.contains("WARNING  bad rows"), "\(said)")
    }

    @Test func theRuleIsSendsOwnFirstChunk() {
        let folder = TestScratch.root.appendingPathComponent("salvo-cas-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let path = folder.appendingPathComponent("t.csv").path
        try? Data(("token\nx\ny\nz\n" + Self.token + "\n").utf8).write(to: URL(fileURLWithPath: path))
        let strict = Preflight.tokens(files: [path], options: .init(), firstChunkRows: 3)
        #expect(strict.first?.status == .fail, "\(strict)")
        #expect(strict.first?.detail.contains("first 3 row(s)") == true, "\(strict)")
        let wide = Preflight.tokens(files: [path], options: .init(), firstChunkRows: 4)
        #expect(wide.first?.status == .ok, "\(wide)")
    }

    @Test func aTemplateIsCheckedAgainstTheHeaderAndEachRowsRendering() async throws {
        let csv =
            "token,name,n\n\(Self.token),Ana,3\n\(Self.token.uppercased()),\(String(repeating: "é", count: 1100)),4\n"
        let template = #"{"aps":{"alert":"Hi {{name}}","badge":"{{n:int}}"}}"#
        guard
            let (status, output) = try await self.check(
                ["tokens.csv", "--payload-template", "t.json"],
                files: ["tokens.csv": csv, "t.json": template]
            )
        else { return }
        #expect(status == 0, "\(output)")
        #expect(output.contains("ok       payload"), "\(output)")
        #expect(output.contains("t.json, placeholders name, n:"), "\(output)")
        #expect(output.contains("bytes with every field empty, within 2048 bytes (binary command 2)"), "\(output)")
        // The row over the limit is a bad row with its line, as send refuses it.
        #expect(output.contains("tokens.csv:3"), "\(output)")
        #expect(output.contains("the rendered payload is"), "\(output)")
        #expect(output.contains("ok       rendered"), "\(output)")

        // A placeholder the header lacks fails, naming the template and where the placeholder is.
        let city = #"{"aps":{"alert":"Hi {{city}}"}}"#
        guard
            let (missing, said) = try await self.check(
                ["tokens.csv", "--payload-template", "t.json"],
                files: ["tokens.csv": csv, "t.json": city]
            )
        else { return }
        #expect(missing == 3, "\(said)")
        #expect(said.contains("t.json, line 1, column"), "\(said)")
        #expect(said.contains("{{city}} names no column of the header"), "\(said)")

        // A template that does not compile fails with its file and position.
        guard
            let (broken, text) = try await self.check(
                ["--payload-template", "t.json"],
                files: ["t.json": #"{"aps":{"alert":"Hi {{name"}}"#]
            )
        else { return }
        #expect(broken == 3, "\(text)")
        #expect(text.contains("FAIL     payload") && text.contains("t.json"), "\(text)")
    }

    @Test func aFolderOfTemplatesIsCheckedAndAMissingDefaultIsAWarning() async throws {
        let csv = "token,name,lang\n\(Self.token),Ana,pt-BR\n\(Self.token),Bo,de\n"
        guard
            let (status, output) = try await self.check(
                ["tokens.csv", "--payload-dir", "templates", "--language-column", "lang", "--protocol", "h2"],
                files: [
                    "tokens.csv": csv, "templates/pt.json": #"{"aps":{"alert":"Olá {{name}}"}}"#,
                    "templates/en.json": #"{"aps":{"alert":"Hello {{name}}!"}}"#,
                ]
            )
        else { return }
        #expect(status == 0, "\(output)")
        #expect(output.contains("templates: 2 template(s), placeholders name:"), "\(output)")
        #expect(output.contains("within 4096 bytes (HTTP/2)"), "\(output)")
        #expect(output.contains("WARNING  payload") && output.contains("has no default.json"), "\(output)")
        // The row in German has no template and no default: refused with its line, as send refuses it.
        #expect(output.contains("tokens.csv:3") && output.contains("no template for language 'de'"), "\(output)")

        guard let (both, _) = try await self.check(["--payload", "p.json", "--payload-template", "t.json"], files: [:])
        else { return }
        #expect(both == 64, "one payload option at a time")
    }
}
