import APNSWire
import Foundation
import SalvoPostgres
import SalvoRows
import SalvoSend
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `salvo send --from-postgres URL --query SQL`: the real executable, a real server, the simulator's ledger.
@Suite(.tags(.network), .runs(.network), .serialized) struct PostgresSendTests {
    enum Wire: String, CaseIterable, Sendable {
        case binary
        case h2
    }

    /// The arguments that send to `simulator` over `wire` with the shared test certificates.
    static func gatewayArguments(_ wire: Wire, _ simulator: Simulator) -> [String] {
        let paths = CertificateFactory.sharedFolder
        let credentials = ["--cert", paths.client, "--key", paths.clientKey, "--ca", paths.ca]
        switch wire {
        case .binary:
            return credentials + ["--gateway", "127.0.0.1:\(simulator.gatewayPort)", "--settle-milliseconds", "300"]
        case .h2:
            return credentials + [
                "--gateway", "127.0.0.1:\(simulator.http2Port ?? 0)", "--protocol", "h2", "--server-name", "localhost",
                "--topic", CertificateFactory.sharedTopic, "--push-type", "alert",
            ]
        }
    }

    static func simulator(_ wire: Wire, maximumTokens: Int = 200_000) async throws -> Simulator {
        var configuration = SimulatorConfiguration.testing(CertificateFactory.shared, maximumTokens: maximumTokens)
        if wire == .h2 { configuration.http2 = HTTP2EndpointConfiguration() }
        return try await Simulator.start(configuration)
    }

    static func report(_ folder: URL) throws -> JobReport {
        try JSONDecoder().decode(JobReport.self, from: Data(contentsOf: folder.appendingPathComponent("report.json")))
    }

    /// How many times the simulator took each of `tokens`, by index, where it is not once.
    static func notOnce(_ tokens: [String], _ simulator: Simulator) throws -> [Int: UInt64] {
        var wrong: [Int: UInt64] = [:]
        for (index, token) in tokens.enumerated() {
            let count = simulator.ledger.record(for: try DeviceToken(hex: token).bytes)?.count ?? 0
            if count != 1 { wrong[index] = UInt64(count) }
        }
        return wrong
    }

    @Test(
        "100,000 rows from a table, each valid token delivered exactly once, NULL tokens refused with their row",
        arguments: [(Wire.binary, false), (Wire.h2, true)]
    )
    func aTableIsDeliveredOnce(wire: Wire, journaled: Bool) async throws {
        guard let salvo = SalvoRun.executable else { return }
        let table = try await DeviceTable.make("pg_send_\(wire)", count: 100_000, seed: 81, nullRows: [7, 60_000])
        let simulator = try await Self.simulator(wire)
        let query = "SELECT token, lang, first_name FROM devices ORDER BY id"
        var arguments = [
            "send", "--from-postgres", table.server.urlWithoutPassword(database: table.database), "--query", query,
            "--payload-template", "hello.json", "--report", "report.json", "--rejects", "rejects.csv", "--quiet",
            "--connections", "2",
        ]
        if journaled { arguments += ["--journal", "journal"] }
        // The password from PGPASSWORD: never on the command line, never printed.
        let run = try TestProcess(
            salvo,
            arguments + Self.gatewayArguments(wire, simulator),
            in: table.folder,
            environment: ["PGPASSWORD": table.server.password]
        )
        let status = try await run.wait(seconds: 600)
        let output = run.output
        #expect(status == 1, "two NULL tokens refused: exit 1\n\(output)")
        #expect(!output.contains(table.server.password), "the password is never shown")
        #expect(output.contains("2 of the query's 100002 rows have a NULL token (rows 7, 60000)"), "\(output)")

        let report = try Self.report(table.folder)
        #expect(report.delivered == 100_000, "\(report)")
        #expect(report.invalidInput == 2)
        #expect(report.inputFiles?.map(\.path) == [PostgresSpool.inputName])
        // The whole snapshot's size, streamed or not (64 hex digits and more a row).
        #expect((report.inputFiles?.first?.bytes ?? 0) > 100_000 * 64, "\(report.inputFiles ?? [])")
        #expect(report.job?.settings["--query"] == query)
        #expect(
            report.job?.settings["--from-postgres"] == "\(table.server.host):\(table.server.port)/\(table.database)"
        )
        let rejects = try String(contentsOf: table.folder.appendingPathComponent("rejects.csv"), encoding: .utf8)
        let rows = rejects.split(separator: "\n").dropFirst().map {
            $0.split(separator: ",").prefix(2).joined(separator: ",")
        }
        #expect(rows == ["postgres,8", "postgres,60001"], "row N is line N + 1: \(rejects)")
        #expect(try Self.notOnce(table.tokens, simulator).isEmpty)
        #expect(simulator.ledger.snapshot().accepted == 100_000)
        if journaled {
            let snapshot = PostgresSpool.journalPath(table.folder.appendingPathComponent("journal").path)
            let manifest = try #require(
                try JobJournal.loadManifest(table.folder.appendingPathComponent("journal").path)
            )
            #expect(manifest.inputs.map(\.path) == [PostgresSpool.inputName])
            #expect(
                manifest.inputs.first?.xxh64Pieces
                    == InputFingerprints.xxh64Pieces(Array(try Data(contentsOf: URL(fileURLWithPath: snapshot))))
            )
        } else {
            #expect(!FileManager.default.fileExists(atPath: table.folder.appendingPathComponent("journal").path))
        }
        try await simulator.shutdown()
    }

    @Test(
        "without a journal the rows are sent as they arrive; a query that fails midway stops the job with its reason",
        arguments: Wire.allCases
    )
    func aQueryThatFailsMidwayStopsTheJob(wire: Wire) async throws {
        guard let salvo = SalvoRun.executable else { return }
        let table = try await DeviceTable.make("pg_midway_\(wire)", count: 60_000, seed: 86)
        let simulator = try await Self.simulator(wire)
        // Division by zero at id 40,000, after the first rows have come (a plain scan streams them in table order).
        let query = "SELECT token, 1 / (40000 - id) AS q FROM devices"
        let arguments = [
            "send", "--from-postgres", table.url, "--query", query, "--payload", "payload.json", "--report",
            "report.json", "--quiet", "--connections", "2",
        ]
        let run = try TestProcess(salvo, arguments + Self.gatewayArguments(wire, simulator), in: table.folder)
        let status = try await run.wait(seconds: 300)
        let output = run.output
        #expect(status == 3, "the job stopped on its input: exit 3\n\(output)")
        #expect(output.contains("division by zero"), "\(output)")
        let report = try Self.report(table.folder)
        #expect(report.stopped?.contains("division by zero") == true, "\(report)")
        // No token twice, none from the row that failed or after it (id 40,000 is index 39,999), and the report
        // counts what the simulator took.
        let counts = try table.tokens.map {
            Int(simulator.ledger.record(for: try DeviceToken(hex: $0).bytes)?.count ?? 0)
        }
        #expect(counts.allSatisfy { $0 <= 1 }, "no token twice")
        #expect(counts[39_999...].allSatisfy { $0 == 0 }, "nothing the query did not return")
        #expect(counts.reduce(0, +) == report.delivered, "\(report)")
        // Every row the job read and did not send is in the unsettled file (before: up to a chunk of them counted
        // `notSent` and listed nowhere), so sending that file completes the job.
        let unsettled = try String(
            contentsOf: table.folder.appendingPathComponent("report.unsettled.csv"),
            encoding: .utf8
        )
        .split(separator: "\n").dropFirst().map { String($0.prefix(64)) }
        #expect(report.notSent == unsettled.count, "notSent \(report.notSent), listed \(unsettled.count)")
        let listed = Set(unsettled)
        let missing = table.tokens.indices.filter { counts[$0] == 0 && !listed.contains(table.tokens[$0]) }
        #expect(
            missing.first.map { $0 >= report.validRows } ?? true,
            "rows read but neither sent nor listed: \(missing.prefix(5))"
        )
        #expect(report.delivered + report.notSent == report.validRows, "\(report)")
        try await simulator.shutdown()
    }

    @Test(
        "a NULL token of a one-column query, or of psql's one-column \\copy, is a refused row with its line",
        arguments: [false, true]
    )
    func aNullTokenOfAOneColumnQueryIsARefusedRow(throughPsql: Bool) async throws {
        guard let salvo = SalvoRun.executable else { return }
        let table = try await DeviceTable.make("pg_null_\(throughPsql)", count: 100, seed: 87, nullRows: [3, 50, 101])
        let simulator = try await Self.simulator(.binary)
        let options =
            ["--payload", "payload.json", "--report", "report.json", "--rejects", "rejects.csv", "--quiet"]
            + Self.gatewayArguments(.binary, simulator)
        let query = "SELECT token FROM devices ORDER BY id"
        let run: TestProcess
        if throughPsql {
            let copy = #"\copy (SELECT token FROM devices ORDER BY id) TO STDOUT CSV HEADER"#
            let arguments = options.map { "'\($0)'" }.joined(separator: " ")
            let command = "'\(table.server.psql)' -X -d '\(table.url)' -c '\(copy)' | '\(salvo)' send - \(arguments)"
            run = try TestProcess("/bin/sh", ["-c", command], in: table.folder)
        } else {
            run = try TestProcess(
                salvo,
                ["send", "--from-postgres", table.url, "--query", query] + options,
                in: table.folder
            )
        }
        let status = try await run.wait(seconds: 120)
        #expect(status == 1, "three rows refused: exit 1\n\(run.output)")
        let report = try Self.report(table.folder)
        #expect(report.inputRows == 103 && report.invalidInput == 3 && report.delivered == 100, "\(report)")
        let rejects = try String(contentsOf: table.folder.appendingPathComponent("rejects.csv"), encoding: .utf8)
            .split(separator: "\n").dropFirst()
        #expect(rejects.map { Int($0.split(separator: ",")[1]) } == [4, 51, 102], "row N is line N + 1: \(rejects)")
        #expect(try Self.notOnce(table.tokens, simulator).isEmpty)
        try await simulator.shutdown()
    }

    @Test("a query's rows take --language-column, --payload-dir and --partition as a file's do")
    func languagesAndPartitionsOverAQuery() async throws {
        guard let salvo = SalvoRun.executable else { return }
        let table = try await DeviceTable.make("pg_lang", count: 6_000, seed: 87)
        let templates = table.folder.appendingPathComponent("templates")
        try FileManager.default.createDirectory(at: templates, withIntermediateDirectories: true)
        let texts = [
            "en": #"{"aps":{"alert":"Hello {{first_name}}"}}"#, "fr": #"{"aps":{"alert":"Bonjour {{first_name}}"}}"#,
            "default": #"{"aps":{"alert":"Hi"}}"#,
        ]
        for (language, text) in texts {
            try Data(text.utf8).write(to: templates.appendingPathComponent("\(language).json"))
        }
        let simulator = try await Self.simulator(.binary)
        var delivered = 0
        for part in ["0/2", "1/2"] {
            let arguments = [
                "send", "--from-postgres", table.url, "--query",
                "SELECT token, lang, first_name FROM devices ORDER BY id",
                "--payload-dir", "templates", "--language-column", "lang", "--partition", part, "--report",
                "report.json", "--quiet",
            ]
            let run = try TestProcess(salvo, arguments + Self.gatewayArguments(.binary, simulator), in: table.folder)
            let status = try await run.wait(seconds: 300)
            #expect(status == 0, "partition \(part)\n\(run.output)")
            delivered += try Self.report(table.folder).delivered
        }
        // The two partitions together: every token once.
        #expect(delivered == table.tokens.count)
        #expect(try Self.notOnce(table.tokens, simulator).isEmpty)
        // Each row got its language's payload, filled from its row (row N is id N: `fr` when N is a multiple of 3).
        for (index, token) in table.tokens.enumerated().prefix(30) {
            let id = index + 1
            let text = id % 3 == 0 ? "Bonjour User \(id)" : "Hello User \(id)"
            let payload = Array(#"{"aps":{"alert":"\#(text)"}}"#.utf8)
            let record = simulator.ledger.record(for: try DeviceToken(hex: token).bytes)
            #expect(record?.payloadDigest == payload.withUnsafeBytes { TokenHash.digest($0) }, "row \(id)")
        }
        try await simulator.shutdown()
    }

    @Test("a journaled job killed mid-run resumes against its snapshot, though the table changed meanwhile")
    func aKilledJobResumesAgainstItsSnapshot() async throws {
        guard let salvo = SalvoRun.executable else { return }
        let count = 6000
        let table = try await DeviceTable.make("pg_resume", count: count, seed: 82)
        var configuration = SimulatorConfiguration.testing(CertificateFactory.shared)
        // Slow enough that the kill lands mid-flight.
        configuration.plan.slowReader = FaultPlan.SlowReader(chunkSize: 4096, delayMilliseconds: 20)
        let simulator = try await Simulator.start(configuration)
        let passwordFile = table.folder.appendingPathComponent("pgpass").path
        try Data((table.server.password + "\n").utf8).write(to: URL(fileURLWithPath: passwordFile))
        let arguments =
            [
                "send", "--from-postgres", table.server.urlWithoutPassword(database: table.database),
                "--postgres-password-file", passwordFile, "--query", "SELECT token FROM devices ORDER BY id",
                "--payload", "payload.json", "--connections", "2", "--report", "report.json", "--journal", "journal",
                "--quiet",
            ] + Self.gatewayArguments(.binary, simulator)

        let first = try TestProcess(salvo, arguments, in: table.folder)
        try await eventually("a quarter of the rows accepted", timeout: .seconds(60), every: .milliseconds(5)) {
            simulator.ledger.snapshot().accepted >= count / 4
        }
        try await first.kill()
        let acceptedAtKill = simulator.ledger.snapshot().accepted
        #expect(acceptedAtKill > 0 && acceptedAtKill < count, "killed mid-flight: \(acceptedAtKill)\n\(first.output)")

        // The table changes: rows deleted, others added. The job's rows are the snapshot's.
        var generator = TokenGenerator(seed: 83)
        let decoys = (0..<50).map { _ in generator.next().hexString }
        let values = decoys.enumerated().map { "(\(count + 1 + $0.offset), '\($0.element)', 'en', 'Decoy')" }
        try await table.server.run(
            "DELETE FROM devices WHERE id > \(count - 100); INSERT INTO devices VALUES \(values.joined(separator: ", "))",
            database: table.database
        )

        let second = try TestProcess(salvo, arguments, in: table.folder)
        let status = try await second.wait(seconds: 300)
        let output = second.output
        #expect(status == 0, "\(output)")
        #expect(output.contains("resuming against the snapshot taken at"), "\(output)")
        #expect(output.contains("the table is not read again"), "\(output)")
        let report = try Self.report(table.folder)
        #expect(report.delivered == count, "\(report)")
        #expect(report.resumed?.run == 2)
        for (index, token) in table.tokens.enumerated() {
            let delivered = simulator.ledger.record(for: try DeviceToken(hex: token).bytes)?.count ?? 0
            #expect(delivered >= 1, "token \(index) never delivered")
        }
        for decoy in decoys {
            #expect(
                simulator.ledger.record(for: try DeviceToken(hex: decoy).bytes) == nil,
                "a row added later was sent"
            )
        }
        // Another query in the same folder: refused by the journal, naming the option; the snapshot untouched.
        let snapshot = PostgresSpool.journalPath(table.folder.appendingPathComponent("journal").path)
        let before = try Data(contentsOf: URL(fileURLWithPath: snapshot))
        var other = arguments
        other[other.firstIndex(of: "--query")! + 1] = "SELECT token FROM devices"
        let third = try TestProcess(salvo, other, in: table.folder)
        #expect(try await third.wait(seconds: 60) == 3, "\(third.output)")
        #expect(third.output.contains("--query"), "\(third.output)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: snapshot)) == before)
        try await simulator.shutdown()
    }

    @Test("psql's \\copy piped into `salvo send -` delivers every row once")
    func aPsqlPipeIsDeliveredOnce() async throws {
        guard let salvo = SalvoRun.executable else { return }
        let table = try await DeviceTable.make("pg_pipe", count: 20_000, seed: 84)
        let simulator = try await Self.simulator(.binary)
        let arguments =
            (["--payload", "payload.json", "--report", "report.json", "--quiet"]
            + Self.gatewayArguments(.binary, simulator))
            .map { "'\($0)'" }.joined(separator: " ")
        let copy = #"\copy (SELECT token, first_name FROM devices ORDER BY id) TO STDOUT CSV HEADER"#
        let command = "'\(table.server.psql)' -X -d '\(table.url)' -c '\(copy)' | '\(salvo)' send - \(arguments)"
        let run = try TestProcess("/bin/sh", ["-c", command], in: table.folder)
        let status = try await run.wait(seconds: 300)
        #expect(status == 0, "\(run.output)")
        #expect(try Self.report(table.folder).delivered == table.tokens.count)
        #expect(try Self.notOnce(table.tokens, simulator).isEmpty)
        try await simulator.shutdown()
    }

    @Test("bad inputs: the documented exit status and a message that says what is wrong, without the password")
    func badInputs() async throws {
        guard let salvo = SalvoRun.executable else { return }
        let table = try await DeviceTable.make("pg_bad", count: 10, seed: 85)
        try await table.server.run("ALTER TABLE devices ADD COLUMN raw bytea", database: table.database)
        let paths = CertificateFactory.sharedFolder
        let send = [
            "--payload", "payload.json", "--gateway", "127.0.0.1:1", "--cert", paths.client, "--key", paths.clientKey,
            "--report", "report.json", "--quiet",
        ]
        func run(_ arguments: [String]) async throws -> (Int32, String) {
            let run = try TestProcess(salvo, ["send"] + arguments + send, in: table.folder)
            return (try await run.wait(seconds: 60), run.output)
        }
        let url = table.url
        let cases: [(arguments: [String], status: Int32, says: String)] = [
            (["--from-postgres", url], 64, "--from-postgres needs --query"),
            (["--query", "SELECT 1"], 64, "need --from-postgres"),
            (["tokens.csv", "--from-postgres", url, "--query", "SELECT token FROM devices"], 64, "name no token file"),
            (["--from-postgres", "mysql://u:pw@h/db", "--query", "SELECT 1"], 64, "postgres://"),
            (
                ["--from-postgres", "postgres://salvo:pw@127.0.0.1:1/db?connect_timeout=5", "--query", "SELECT 1"], 3,
                "cannot connect"
            ),
            (
                [
                    "--from-postgres", table.server.url(database: table.database, password: "wrong"), "--query",
                    "SELECT 1",
                ],
                3, "the server refused the login"
            ),
            (
                ["--from-postgres", url, "--query", "SELECT token FROM nowhere"], 3,
                "relation \"nowhere\" does not exist"
            ),
            (["--from-postgres", url, "--query", "SELECT id, lang FROM devices"], 3, "no column named 'token'"),
            (["--from-postgres", url, "--query", "SELECT raw AS token FROM devices"], 3, "of type bytea, not text"),
            (["--from-postgres", url, "--query", "SELECT token FROM devices WHERE false"], 3, "no rows"),
        ]
        for (arguments, status, says) in cases {
            let (exit, output) = try await run(arguments)
            #expect(exit == status, "\(arguments): \(output)")
            #expect(output.contains(says), "\(arguments): \(output)")
            #expect(!output.contains(table.server.password), "\(arguments): the password is shown")
        }
    }

    @Test("check reads the query's rows as send would")
    func checkReadsAQuery() async throws {
        guard let salvo = SalvoRun.executable else { return }
        let table = try await DeviceTable.make("pg_check", count: 500, seed: 86, nullRows: [3])
        let paths = CertificateFactory.sharedFolder
        let run = try TestProcess(
            salvo,
            [
                "check", "--from-postgres", table.url, "--query", "SELECT * FROM devices ORDER BY id", "--payload",
                "payload.json", "--gateway", "127.0.0.1:1", "--cert", paths.client, "--key", paths.clientKey,
                "--no-handshake",
            ],
            in: table.folder
        )
        let status = try await run.wait(seconds: 60)
        #expect(status == 0, "\(run.output)")
        #expect(run.output.contains("500 valid row(s) of 501"), "\(run.output)")
        #expect(run.output.contains("postgres:4"), "the NULL row named by its line: \(run.output)")
    }
}
