import Foundation
import SalvoBinary
import SalvoRows
import SalvoSend
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// `send --payload-dir --journal`: the journal keeps every template file's hash, so that running the job again
/// after a template was edited, added or removed is refused naming the file (exit 3, nothing sent), as a changed
/// token file is; with the folder as it was, the finished job says so.
@Suite(.tags(.network), .runs(.network)) struct JournalTemplateTests {
    @Test func anEditedAddedOrRemovedTemplateIsRefusedByName() async throws {
        guard let salvo = InterruptionTests.builtExecutable else { return }
        let paths = CertificateFactory.sharedFolder
        let simulator = try await Simulator.start(.testing(CertificateFactory.shared))
        let folder = TestScratch.root.appendingPathComponent("salvo-jt-\(UUID().uuidString)")
        let templates = folder.appendingPathComponent("templates")
        try FileManager.default.createDirectory(at: templates, withIntermediateDirectories: true)
        var generator = TokenGenerator(seed: 91)
        let languages = ["pt", "pt-BR", "en", ""]
        let rows = (0..<40).map { index in "\(generator.next().hexString),Ana \(index),\(languages[index % 4])" }
        try Data((["token,name,lang"] + rows).joined(separator: "\n").utf8)
            .write(to: folder.appendingPathComponent("tokens.csv"))
        func write(_ name: String, _ text: String) throws {
            try Data(text.utf8).write(to: templates.appendingPathComponent(name))
        }
        try write("default.json", #"{"aps":{"alert":"Hello {{name}}"}}"#)
        try write("pt.json", #"{"aps":{"alert":"Olá {{name}}"}}"#)
        let arguments = [
            "send", "tokens.csv", "--payload-dir", "templates", "--language-column", "lang", "--cert", paths.client,
            "--key", paths.clientKey, "--ca", paths.ca, "--gateway", "127.0.0.1:\(simulator.gatewayPort)",
            "--settle-milliseconds", "200", "--journal", "journal", "--report", "report.json", "--quiet",
        ]
        func run() async throws -> (status: Int32, output: String) {
            let process = try TestProcess(salvo, arguments, in: folder)
            let status = try await process.wait(seconds: 60)
            return (status, process.output)
        }

        let first = try await run()
        #expect(first.status == 0, "\(first.output)")
        let delivered = simulator.ledger.snapshot().accepted
        #expect(delivered == rows.count)

        try write("pt.json", #"{"aps":{"alert":"Oi {{name}}"}}"#)
        let edited = try await run()
        #expect(edited.status == 3)
        #expect(edited.output.contains("templates/pt.json changed since the job"), "\(edited.output)")

        try write("pt.json", #"{"aps":{"alert":"Olá {{name}}"}}"#)
        try write("fr.json", #"{"aps":{"alert":"Bonjour {{name}}"}}"#)
        let added = try await run()
        #expect(added.status == 3)
        #expect(added.output.contains("templates/fr.json is a payload template the job"), "\(added.output)")

        try FileManager.default.removeItem(at: templates.appendingPathComponent("fr.json"))
        try FileManager.default.removeItem(at: templates.appendingPathComponent("pt.json"))
        let removed = try await run()
        #expect(removed.status == 3)
        #expect(removed.output.contains("templates/pt.json, a payload template of the job"), "\(removed.output)")

        try write("pt.json", #"{"aps":{"alert":"Olá {{name}}"}}"#)
        let same = try await run()
        #expect(same.status == 0, "\(same.output)")
        #expect(same.output.contains("finished before"), "\(same.output)")
        #expect(simulator.ledger.snapshot().accepted == delivered, "nothing was sent again")
        try await simulator.shutdown()
    }
}
