import APNSWire
import Foundation
import SalvoBinary
import SalvoRows
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// Values of input files that hold terminal escape sequences (a title change `ESC]0;…BEL`, a colour `ESC[31m`)
/// reach the terminal escaped (`\u{1B}`), never raw: in the errors about a token file, a suppression file and a
/// template, in the refused rows echoed by `send`, and in `check` and `prune`.
@Suite(.tags(.process), .runs(.process)) struct TerminalEscapeTests {
    static let title = "\u{1B}]0;pwned\u{07}"
    static let red = "\u{1B}[31mred"
    static let payload = #"{"aps":{"alert":"hi"}}"#
    static let good = String(repeating: "ab", count: 32)

    /// Runs `salvo` in a fresh folder holding `files`; its exit status and everything it printed (both streams).
    static func run(_ arguments: [String], files: [String: String]) async throws -> (status: Int32, bytes: [UInt8])? {
        guard let salvo = InterruptionTests.builtExecutable else { return nil }
        let folder = TestScratch.root.appendingPathComponent("salvo-esc-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        for (name, contents) in files { try Data(contents.utf8).write(to: folder.appendingPathComponent(name)) }
        // Both streams into one pipe, as a terminal would show them, read as bytes.
        let run = try TestProcess(salvo, arguments, in: folder, output: .pipe)
        let status = try await run.wait(seconds: 120)
        return (status, run.outputBytes)
    }

    /// What was printed shows the sequences as escapes, and holds no ESC or BEL byte.
    static func expectEscaped(_ bytes: [UInt8], _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(!bytes.contains(0x1B), "\(what): a raw ESC reached the terminal: \(text.debugDescription)")
        #expect(!bytes.contains(0x07), "\(what): a raw BEL reached the terminal: \(text.debugDescription)")
        #expect(
            text.contains("\\u{1B}"),
            "\(what): the value is shown escaped: \(text)",
            sourceLocation: sourceLocation
        )
    }

    var certificates: [String] {
        let paths = CertificateFactory.sharedFolder
        return ["--cert", paths.client, "--key", paths.clientKey, "--ca", paths.ca]
    }

    /// `salvo send tokens.csv --payload payload.json --gateway <gateway>` with the certificates and then `extra`, in a
    /// folder holding `tokens` as tokens.csv and the payload.
    func send(
        _ tokens: String,
        gateway: String,
        _ extra: [String] = []
    ) async throws -> (status: Int32, bytes: [UInt8])? {
        let arguments = ["send", "tokens.csv", "--payload", "payload.json", "--gateway", gateway]
        return try await Self.run(
            arguments + self.certificates + extra,
            files: ["tokens.csv": tokens, "payload.json": Self.payload]
        )
    }

    @Test func aTokenFileWithoutATokenIsNamedEscaped() async throws {
        let tokens = "token\n\(Self.title)\n\(Self.red)\n"
        guard let (status, bytes) = try await self.send(tokens, gateway: "127.0.0.1:1") else { return }
        #expect(status == 3)
        #expect(String(decoding: bytes, as: UTF8.self).contains("no valid token"))
        Self.expectEscaped(bytes, "token file error")
    }

    @Test func aTokenFileHeaderWithoutTheColumnIsNamedEscaped() async throws {
        let tokens = "\(Self.red),\(Self.title)\n\(Self.good),x\n"
        guard let (status, bytes) = try await self.send(tokens, gateway: "127.0.0.1:1", ["--column", "device"]) else {
            return
        }
        #expect(status == 3, "\(String(decoding: bytes, as: UTF8.self))")
        Self.expectEscaped(bytes, "header error")
    }

    @Test(arguments: [TerminalEscapeTests.title, TerminalEscapeTests.red])
    func aSuppressionFileRowIsNamedEscapedBySendAndPrune(value: String) async throws {
        let files = [
            "tokens.csv": "token\n\(Self.good)\n",
            "payload.json": Self.payload,
            "suppress.csv": "token,timestamp\n\(value),1700000000\n",
        ]
        let send = ["send", "tokens.csv", "--payload", "payload.json", "--gateway", "127.0.0.1:1"]
        guard
            let (status, bytes) = try await Self.run(
                send + self.certificates + ["--suppress", "suppress.csv"],
                files: files
            )
        else { return }
        #expect(status == 3)
        #expect(String(decoding: bytes, as: UTF8.self).contains("suppress.csv: line 2: token"))
        Self.expectEscaped(bytes, "send --suppress")

        let prune = ["prune", "tokens.csv", "--suppress", "suppress.csv", "--output", "kept.csv"]
        guard let (pruned, printed) = try await Self.run(prune, files: files) else { return }
        #expect(pruned == 3)
        Self.expectEscaped(printed, "prune")
    }

    @Test func aTemplateErrorIsNamedEscaped() async throws {
        // The template names a column the token file's header lacks: the error lists the header's names.
        let files = [
            "tokens.csv": "token,\(Self.red)\n\(Self.good),x\n",
            "template.json": #"{"aps":{"alert":"{{name}}"}}"#,
        ]
        let arguments = ["send", "tokens.csv", "--payload-template", "template.json", "--gateway", "127.0.0.1:1"]
        guard let (status, bytes) = try await Self.run(arguments + self.certificates, files: files) else { return }
        #expect(status == 3)
        #expect(String(decoding: bytes, as: UTF8.self).contains("names no column of the header"))
        Self.expectEscaped(bytes, "template error")
    }

    @Test func checkNamesABadTokenFileEscaped() async throws {
        let files = ["tokens.csv": "token\n\(Self.title)\n\(Self.red)\n", "payload.json": Self.payload]
        let arguments = [
            "check", "tokens.csv", "--payload", "payload.json", "--gateway", "127.0.0.1:1", "--no-handshake",
        ]
        guard let (status, bytes) = try await Self.run(arguments + self.certificates, files: files) else { return }
        #expect(status == 3)
        Self.expectEscaped(bytes, "check")
    }

    /// Refused rows among good ones are echoed by `send` (the first ten, with their values): escaped.
    @Test func refusedRowsEchoedBySendAreEscaped() async throws {
        let closed = try ClosedPort()
        defer { closed.close() }
        let tokens = "token\n\(Self.good)\n\(Self.title)\n\(Self.red)\n"
        guard
            let (status, bytes) = try await self.send(
                tokens,
                gateway: "127.0.0.1:\(closed.port)",
                ["--give-up-seconds", "1"]
            )
        else { return }
        #expect(status == 3)
        #expect(String(decoding: bytes, as: UTF8.self).contains("tokens.csv: line 3"))
        Self.expectEscaped(bytes, "refused rows")
    }

    @Test func theEscapingKeepsLineBreaksOnlyWhenAsked() {
        #expect(TerminalText.escaped("a\u{1B}[31m\nb") == "a\\u{1B}[31m\\u{A}b")
        #expect(TerminalText.escaped("a\u{1B}[31m\nb", keepingLineBreaks: true) == "a\\u{1B}[31m\nb")
        #expect(TerminalText.escaped("plain") == "plain")
        let error = InputError(file: "t.csv", line: 2, message: "token \"\(Self.title)\"")
        #expect(error.description == "t.csv: line 2: token \"\\u{1B}]0;pwned\\u{7}\"")
    }
}
