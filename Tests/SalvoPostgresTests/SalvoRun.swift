import Foundation
import SalvoRows
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The real `salvo`, run through `TestProcess`.
enum SalvoRun {
    /// `salvo`, built next to the test bundle, or nil with an issue recorded.
    static var executable: String? {
        guard let path = TestProcess.salvoPath else {
            Issue.record(Comment(rawValue: TestProcess.salvoMissing))
            return nil
        }
        return path
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
    ) async throws -> DeviceTable {
        let server = try PostgresTestServer.shared()
        let database = try await server.makeDatabase(prefix)
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
        try await server.run(
            "CREATE TABLE devices (id int PRIMARY KEY, token text, lang text NOT NULL, first_name text)",
            database: database
        )
        try await server.run("\\copy devices FROM '\(csv.path)' WITH (FORMAT csv, HEADER)", database: database)
        return DeviceTable(server: server, database: database, folder: folder, tokens: tokens, nullRows: nullRows)
    }

    var url: String { self.server.url(database: self.database) }
}
