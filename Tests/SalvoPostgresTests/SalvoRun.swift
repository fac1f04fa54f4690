import Foundation
import SalvoRows
import SalvoSimulator
import SalvoTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The real `salvo` executable run in a folder, its standard output and error into one file read at the end.
struct SalvoRun {
    let process: Process
    let file: URL

    func output() -> String { (try? String(contentsOf: self.file, encoding: .utf8)) ?? "" }

    /// `salvo`, built next to the test bundle by `swift build`; nil with an issue recorded when it is not there.
    static var executable: String? {
        var folder = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for _ in 0..<3 {
            let candidate = folder.appendingPathComponent("salvo").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            folder = folder.deletingLastPathComponent()
        }
        Issue.record("salvo is not built next to the tests (\(CommandLine.arguments[0]))")
        return nil
    }

    /// Starts `executable` (the built `salvo`, or `/bin/sh` for a pipe) with `arguments` in `folder`.
    static func start(
        _ executable: String,
        _ arguments: [String],
        in folder: URL,
        environment: [String: String] = [:]
    ) throws -> SalvoRun {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.currentDirectoryURL = folder
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        let file = folder.appendingPathComponent("output-\(UUID().uuidString).txt")
        _ = FileManager.default.createFile(atPath: file.path, contents: nil)
        let handle = try FileHandle(forWritingTo: file)
        process.standardOutput = handle
        process.standardError = handle
        process.standardInput = FileHandle.nullDevice
        try process.run()
        return SalvoRun(process: process, file: file)
    }

    /// Waits at most `seconds` for the run to end (then kills it, with an issue recorded); its exit status.
    func wait(seconds: Int) async throws -> Int32 {
        let clock = ContinuousClock()
        let start = clock.now
        while self.process.isRunning && clock.now - start < .seconds(seconds) {
            try await Task.sleep(for: .milliseconds(20))
        }
        if self.process.isRunning {
            kill(self.process.processIdentifier, SIGKILL)
            self.process.waitUntilExit()
            Issue.record("salvo did not finish within \(seconds) s:\n\(self.output().suffix(2000))")
        }
        return self.process.terminationStatus
    }
}

/// A table of device tokens in a database of its own, the tokens in `id` order, and a folder to send from.
struct DeviceTable {
    let server: PostgresTestServer
    let database: String
    let folder: URL
    /// The valid tokens, in row order (the NULL rows left out).
    let tokens: [String]
    /// The rows (1-based, in `id` order) whose token is NULL.
    let nullRows: [Int]

    /// `devices(id, token, lang, first_name)`: `count` tokens from `seed`, with a NULL token at each of `nullRows`
    /// (rows counted with them), loaded with psql's `\copy` from a CSV file.
    static func make(
        _ prefix: String,
        count: Int,
        seed: UInt64,
        nullRows: [Int] = []
    ) throws -> DeviceTable {
        let server = try PostgresTestServer.shared()
        let database = try server.makeDatabase(prefix)
        let folder = TestScratch.root.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data(#"{"aps":{"alert":"Hello {{first_name}}"}}"#.utf8).write(
            to: folder.appendingPathComponent("hello.json")
        )
        try Data(#"{"aps":{"alert":"hi"}}"#.utf8).write(to: folder.appendingPathComponent("payload.json"))
        var generator = TokenGenerator(seed: seed)
        let tokens = (0..<count).map { _ in generator.next().hexString }
        var lines = ["id,token,lang,first_name"]
        var next = 0
        for row in 1...(count + nullRows.count) {
            if nullRows.contains(row) {
                lines.append("\(row),,en,Null \(row)")
            } else {
                lines.append("\(row),\(tokens[next]),\(row % 3 == 0 ? "fr" : "en"),User \(row)")
                next += 1
            }
        }
        let csv = folder.appendingPathComponent("devices.csv")
        try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: csv)
        try server.run(
            "CREATE TABLE devices (id int PRIMARY KEY, token text, lang text NOT NULL, first_name text)",
            database: database
        )
        try server.run("\\copy devices FROM '\(csv.path)' WITH (FORMAT csv, HEADER)", database: database)
        return DeviceTable(server: server, database: database, folder: folder, tokens: tokens, nullRows: nullRows)
    }

    var url: String { self.server.url(database: self.database) }
}
