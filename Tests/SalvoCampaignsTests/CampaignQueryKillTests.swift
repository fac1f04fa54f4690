import APNSWire
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import SalvoRows
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// `salvo serve --campaign-postgres` as its users run it, with a campaign whose audience is a query: the process is
/// `kill -9`ed in the middle, the table changed meanwhile (rows hidden from the query, rows added), and the service
/// started again on the same store resumes the campaign from the copy its first run took, never the table; a pause and
/// a resume follow. The simulator's ledger then holds each row of that copy, once but for the rows the kill left
/// written and unanswered, and none of the rows added later; the campaign's report equals what
/// `salvo send --from-postgres --journal` reports for the same rows; the database's password shows nowhere.
@Suite(.tags(.process), .runs(.process), .serialized, .timeLimit(.minutes(5)))
struct CampaignQueryKillTests {
    @Test func aQueryCampaignKilledMidwaySendsTheRowsOfItsFirstCopyOnce() async throws {
        guard let salvo = TestProcess.salvoPath else {
            Issue.record("\(TestProcess.salvoMissing)")
            return
        }
        let rows = 3000
        let invalid = 4
        let server = try PostgresTestServer.shared()
        let database = try await server.makeDatabase("campaign_query_kill")
        try await server.run(
            """
            CREATE TABLE devices (n int PRIMARY KEY, token text NOT NULL, hidden bool NOT NULL DEFAULT false);
            INSERT INTO devices (n, token)
              SELECT i, encode(sha256(convert_to('campaign-token-' || i, 'UTF8')), 'hex')
              FROM generate_series(0, \(rows - 1)) AS i;
            INSERT INTO devices (n, token) SELECT \(rows) + i, 'not-a-token-' || i FROM generate_series(0, \(invalid - 1)) AS i;
            """,
            database: database
        )
        let query = "SELECT token FROM devices WHERE NOT hidden ORDER BY n"
        let setup = try await CampaignSimulator.start()
        let folder = try campaignFolder("campaign-query-kill")
        let store = folder + "/store"
        let passwordFile = folder + "/database-password"
        try Data((server.password + "\n").utf8).write(to: URL(fileURLWithPath: passwordFile))
        let (created, createdOutput) = try await TestProcess.run(
            salvo,
            ["serve", "keys", "create", "--store", store, "--name", "kill"],
            input: .nothing
        )
        #expect(created == 0, "\(createdOutput)")
        let key = try #require(
            createdOutput.split(separator: "\n").first { $0.hasPrefix("key: ") }.map { String($0.dropFirst(5)) }
        )
        let free = try ClosedPort()
        let port = free.port
        free.close()
        let arguments =
            [
                "serve", "--listen", "127.0.0.1:\(port)", "--store", store, "--log-level", "info", "--shutdown-grace",
                "2", "--campaign-postgres", server.urlWithoutPassword(database: database),
                "--campaign-postgres-password-file", passwordFile,
            ]
            + (try setup.commandLineOptions(in: folder))
        var server1 = try TestProcess(salvo, arguments, input: .nothing, output: .together)
        var outputs: [String] = []
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let api = ServeAPI(base: "http://127.0.0.1:\(port)", key: key, client: client)

        var campaignReport: JobReport?
        do {
            try await api.up()
            let (status, made, _) = try await api.call(
                .POST,
                "/v1/campaigns",
                contentType: "application/json",
                body: #"{"rate":1500,"payload":{"aps":{"alert":"k"}},"audience":{"postgres":{"query":"\#(query)"}}}"#
            )
            #expect(status == 201, "\(made)")
            let id = try #require(made["id"]?.stringValue)
            try await eventually("a third delivered", timeout: .seconds(60), every: .milliseconds(5)) {
                setup.simulator.ledger.snapshot().accepted >= rows / 3
            }
            try await server1.kill()
            outputs.append(server1.output)
            #expect(setup.simulator.ledger.snapshot().accepted < rows)

            // The table changes while the service is down: a tenth of the rows hidden from the query, new rows added.
            try await server.run(
                """
                UPDATE devices SET hidden = true WHERE n % 10 = 3;
                INSERT INTO devices (n, token)
                  SELECT 100000 + i, encode(sha256(convert_to('campaign-token-' || (100000 + i), 'UTF8')), 'hex')
                  FROM generate_series(0, 499) AS i;
                """,
                database: database
            )
            server1 = try TestProcess(salvo, arguments, input: .nothing, output: .together)
            try await api.up()
            let (inherited, final) = try await api.pauseAtTwoThirdsAndFinish(id, rows: rows, simulator: setup.simulator)
            campaignReport = final
            #expect(final.inputRows == rows + invalid, "the first copy's rows: \(final.summary)")
            #expect(final.confirmed == rows && final.invalidInput == invalid && final.notSent == 0, "\(final.summary)")
            #expect(final.resumed?.run == 3, "\(final.summary)")
            let (_, _, rejects) = try await api.call(.GET, "/v1/campaigns/\(id)/rejects")
            let rejectsText = String(decoding: rejects, as: UTF8.self)
            #expect(rejectsText.contains("postgres,\(rows + 2),"), "line N + 1 of the input postgres: \(rejectsText)")

            let verdict = setup.simulator.verdict(
                expected: ExpectedTokens((0..<rows).map { try! DeviceToken(hex: campaignToken($0)) }),
                listLimit: rows
            )
            #expect(verdict.neverDelivered == 0, "\(verdict.summary)")
            #expect(verdict.deliveredOnce + verdict.deliveredMoreThanOnce == rows)
            #expect(verdict.unexpected == 0, "none of the rows added after the copy: \(verdict.summary)")
            #expect(verdict.deliveredMoreThanOnce <= inherited, "\(verdict.summary); inherited uncertain \(inherited)")
            print(
                "query campaign kill test: \(verdict.deliveredOnce) delivered once, \(verdict.deliveredMoreThanOnce) "
                    + "twice, \(inherited) left uncertain by the kill"
            )
        } catch {
            Issue.record("\(error)\n\(server1.output.suffix(2000))")
        }
        server1.signal(SIGTERM)
        #expect(try await server1.wait(seconds: 30) == 0, "\(server1.output.suffix(2000))")
        outputs.append(server1.output)
        for output in outputs {
            #expect(!output.contains(server.password), "the database's password is never shown")
            #expect(output.contains("campaigns may name queries"), "\(output.prefix(1000))")
        }
        try await client.shutdown()
        try await setup.simulator.shutdown()

        // `salvo send --from-postgres --journal` of the same rows (the table as the campaign's copy found it).
        guard let campaignReport else { return }
        try await server.run(
            "UPDATE devices SET hidden = false; DELETE FROM devices WHERE n >= 100000",
            database: database
        )
        let other = try await CampaignSimulator.start()
        let sendFolder = try campaignFolder("campaign-query-send")
        try Data(#"{"aps":{"alert":"k"}}"#.utf8).write(to: URL(fileURLWithPath: sendFolder + "/payload.json"))
        let (status, output) = try await TestProcess.run(
            salvo,
            [
                "send", "--from-postgres", server.urlWithoutPassword(database: database), "--postgres-password-file",
                passwordFile, "--query", query, "--protocol", "h2", "--payload", sendFolder + "/payload.json",
                "--journal", sendFolder + "/journal", "--report", sendFolder + "/report.json", "--quiet",
            ] + (try other.commandLineOptions(in: sendFolder)),
            input: .nothing
        )
        #expect(status == 1, "salvo send: refused rows make exit 1: \(output)")
        let sendReport = try JSONDecoder().decode(
            JobReport.self,
            from: Data(contentsOf: URL(fileURLWithPath: sendFolder + "/report.json"))
        )
        #expect(
            ReportCounts(campaignReport) == ReportCounts(sendReport),
            "\(campaignReport.summary)\n\(sendReport.summary)"
        )
        try await other.simulator.shutdown()
    }
}
