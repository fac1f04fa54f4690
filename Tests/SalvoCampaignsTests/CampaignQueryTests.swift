import APNSWire
import AsyncHTTPClient
import Foundation
import NIOHTTP1
import SalvoCampaigns
import SalvoPostgres
import SalvoRows
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// Campaigns whose audience is a query on the service's database, through the HTTP API in this process, against a
/// real PostgreSQL server and the simulator: a query is described when the campaign is made and each refusal names
/// its field, with nothing kept; one that fails while its rows are copied fails the campaign with the database's
/// message and nothing sent, and a resume copies the rows again.
@Suite(.tags(.network), .runs(.network), .serialized, .timeLimit(.minutes(5)))
struct CampaignQueryTests {
    static let payload = #""payload":{"aps":{"alert":"hello"}}"#

    /// A new database with `devices(n, token, first_name, k)`: rows 0..<rows, each with `campaignToken(n)`, k = 1.
    static func database(_ server: PostgresTestServer, rows: Int, prefix: String) async throws -> String {
        let database = try await server.makeDatabase(prefix)
        try await server.run(
            """
            CREATE TABLE devices (n int PRIMARY KEY, token text NOT NULL, first_name text, k int NOT NULL DEFAULT 1);
            INSERT INTO devices (n, token, first_name)
              SELECT i, encode(sha256(convert_to('campaign-token-' || i, 'UTF8')), 'hex'), 'person ' || i
              FROM generate_series(0, \(rows - 1)) AS i;
            """,
            database: database
        )
        return database
    }

    /// The database as `salvo serve --campaign-postgres` names it.
    static func query(_ server: PostgresTestServer, _ database: String) throws -> CampaignQuery {
        CampaignQuery(
            location: try PostgresLocation(
                url: server.url(database: database),
                environment: [:],
                option: "--campaign-postgres"
            )
        )
    }

    static func post(
        _ service: CampaignService,
        _ body: String,
        client: HTTPClient
    ) async throws
        -> CampaignService.Answer
    {
        try await service.call(
            .POST,
            "/v1/campaigns",
            contentType: "application/json",
            body: Array(body.utf8),
            client: client
        )
    }

    /// The names in a store's campaign folder besides `incoming`: a campaign's folder each.
    static func campaignFolders(_ store: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: store + "/campaigns")) ?? []).filter {
            $0 != "incoming"
        }
    }

    @Test func aQueryIsDescribedWhenTheCampaignIsMadeAndEachRefusalNamesItsField() async throws {
        let server = try PostgresTestServer.shared()
        let database = try await Self.database(server, rows: 5, prefix: "campaign_query_refusals")
        let setup = try await CampaignSimulator.start()
        let folder = try campaignFolder("campaign-query-refusals")
        let plain = try await CampaignService.start(simulator: setup, folder: folder + "/plain")
        let service = try await CampaignService.start(
            simulator: setup,
            folder: folder + "/store",
            query: try Self.query(server, database)
        )
        let closed = try ClosedPort()
        closed.close()
        let down = try await CampaignService.start(
            simulator: setup,
            folder: folder + "/down",
            query: CampaignQuery(
                location: try PostgresLocation(
                    url: "postgres://salvo:\(server.password)@127.0.0.1:\(closed.port)/none?sslmode=disable",
                    environment: [:],
                    option: "--campaign-postgres"
                )
            )
        )
        try await withCampaignClient { client in
            _ = await service.service.putTemplate(
                name: "hello",
                body: Array(#"{"aps":{"alert":"Hi {{first_name}}"}}"#.utf8)
            )
            func audience(_ query: String) -> String {
                #""audience":{"postgres":{"query":"\#(query)"}}"#
            }
            let tokens = audience("SELECT token FROM devices")
            let cases: [(answer: CampaignService.Answer, status: Int, field: String?, says: String)] = [
                (
                    try await Self.post(plain, "{\(tokens),\(Self.payload)}", client: client), 422,
                    "audience.postgres", "--campaign-postgres"
                ),
                (
                    try await Self.post(
                        service,
                        "{\(audience("SELEC token FROM devices")),\(Self.payload)}",
                        client: client
                    ),
                    422, "audience.postgres.query", "42601"
                ),
                (
                    try await Self.post(
                        service,
                        "{\(audience("SELECT token FROM nowhere")),\(Self.payload)}",
                        client: client
                    ),
                    422, "audience.postgres.query", "42P01"
                ),
                (
                    try await Self.post(
                        service,
                        "{\(audience("SELECT first_name FROM devices")),\(Self.payload)}",
                        client: client
                    ),
                    422, "audience.postgres.column", "no column named 'token'"
                ),
                (
                    try await Self.post(
                        service,
                        "{\(audience("SELECT n AS token FROM devices")),\(Self.payload)}",
                        client: client
                    ),
                    422, "audience.postgres.column", "not text"
                ),
                (
                    try await Self.post(
                        service,
                        "{\(audience("SELECT token FROM devices; DROP TABLE devices")),\(Self.payload)}",
                        client: client
                    ),
                    422, "audience.postgres.query", "42601"
                ),
                (
                    try await Self.post(service, #"{\#(tokens),"template":"hello"}"#, client: client), 422, "template",
                    "{{first_name}}"
                ),
                (
                    try await Self.post(
                        service,
                        #"{\#(tokens),\#(Self.payload),"deliver_at_local":"09:00"}"#,
                        client: client
                    ),
                    422, "zone_column", "time_zone"
                ),
                (
                    try await Self.post(down, "{\(tokens),\(Self.payload)}", client: client), 503, "audience.postgres",
                    "cannot connect"
                ),
            ]
            for (index, refusal) in cases.enumerated() {
                #expect(refusal.answer.status == refusal.status, "case \(index): \(refusal.answer.text)")
                #expect(refusal.answer.field == refusal.field, "case \(index): \(refusal.answer.text)")
                #expect(refusal.answer.text.contains(refusal.says), "case \(index): \(refusal.answer.text)")
                #expect(!refusal.answer.text.contains(server.password), "case \(index): the password is never shown")
            }
            // Described, never run: the statement after the query did nothing.
            #expect(try await server.run("SELECT count(*) FROM devices", database: database) == "5\n")
            // Nothing of a refused campaign stays.
            for each in [plain, service, down] {
                let list = try await each.call(.GET, "/v1/campaigns", client: client)
                #expect(list.json["campaigns"] == .array([]), "\(list.text)")
                #expect(Self.campaignFolders(each.folder).isEmpty)
            }

            // The template's field is a column of the query: made, run and delivered.
            let made = try await Self.post(
                service,
                #"{\#(audience("SELECT token, first_name FROM devices")),"template":"hello"}"#,
                client: client
            )
            #expect(made.status == 201, "\(made.text)")
            let id = try #require(made.json["id"]?.stringValue)
            try await service.waitFor(id, state: "finished", client: client)
            #expect(try await service.campaign(id, client: client)["counts"]?["delivered"]?.intValue == 5)
            let settings = try await service.campaign(id, client: client)["settings"]
            #expect(settings?["audience"]?["postgres"]?["query"] == .string("SELECT token, first_name FROM devices"))

            // What only running the query shows fails the campaign at its first run, with the database's words: no
            // rows, or a change to the database (the session is read-only).
            try await server.run("CREATE SEQUENCE numbers", database: database)
            for (query, says) in [
                ("SELECT token FROM devices WHERE n < 0", "returned no rows"),
                ("SELECT token, nextval('numbers') AS number FROM devices", "read-only transaction"),
            ] {
                let made = try await Self.post(service, "{\(audience(query)),\(Self.payload)}", client: client)
                #expect(made.status == 201, "\(made.text)")
                let id = try #require(made.json["id"]?.stringValue)
                try await service.waitFor(id, state: "failed", client: client)
                let message = try await service.campaign(id, client: client)["message"]?.stringValue ?? ""
                #expect(message.contains(says), "\(message)")
            }
            #expect(
                try await server.run("SELECT is_called FROM numbers", database: database) == "f\n",
                "never advanced"
            )
        }
        for each in [plain, service, down] { await each.stop() }
        try await setup.simulator.shutdown()
    }

    @Test func aQueryThatFailsMidwayFailsTheCampaignWithNothingSentAndAResumeCopiesItAgain() async throws {
        let rows = 20_000
        let server = try PostgresTestServer.shared()
        let database = try await Self.database(server, rows: rows, prefix: "campaign_query_midway")
        // Row 15000 divides by zero: the server has sent the rows before it when the query fails.
        try await server.run("UPDATE devices SET k = 0 WHERE n = 15000", database: database)
        let setup = try await CampaignSimulator.start()
        let folder = try campaignFolder("campaign-query-midway")
        let service = try await CampaignService.start(
            simulator: setup,
            folder: folder + "/store",
            query: try Self.query(server, database)
        )
        try await withCampaignClient { client in
            let made = try await Self.post(
                service,
                #"{"audience":{"postgres":{"query":"SELECT token, first_name, 1 / k AS one FROM devices"}},"#
                    + Self.payload + "}",
                client: client
            )
            #expect(made.status == 201, "\(made.text)")
            let id = try #require(made.json["id"]?.stringValue)
            try await service.waitFor(id, state: "failed", client: client)
            let failed = try await service.campaign(id, client: client)
            let message = failed["message"]?.stringValue ?? ""
            #expect(message.contains("22012") && message.contains("division by zero"), "\(message)")
            #expect(!message.contains(server.password))
            // Nothing sent, no copy kept.
            #expect(setup.simulator.ledger.snapshot().accepted == 0)
            let campaignFolder = service.folder + "/campaigns/" + id
            #expect(!FileManager.default.fileExists(atPath: campaignFolder + "/postgres.csv"))
            #expect(!FileManager.default.fileExists(atPath: campaignFolder + "/postgres.csv.partial"))

            // The row mended, a resume copies the rows again and sends them.
            try await server.run("UPDATE devices SET k = 1", database: database)
            let resumed = try await service.call(.POST, "/v1/campaigns/\(id)/resume", client: client)
            #expect(resumed.status == 200, "\(resumed.text)")
            try await service.waitFor(id, state: "finished", client: client)
            let finished = try await service.campaign(id, client: client)
            #expect(finished["counts"]?["delivered"]?.intValue == rows, "\(finished)")
            #expect(FileManager.default.fileExists(atPath: campaignFolder + "/postgres.csv"))
            let verdict = setup.simulator.verdict(
                expected: ExpectedTokens((0..<rows).map { try! DeviceToken(hex: campaignToken($0)) })
            )
            #expect(verdict.deliveredOnce == rows && verdict.unexpected == 0, "\(verdict.summary)")
            // The rejects name the input as `send --from-postgres` does.
            let report = try JSONDecoder().decode(
                JobReport.self,
                from: Data(try await service.call(.GET, "/v1/campaigns/\(id)/report", client: client).body)
            )
            #expect(report.inputRows == rows && report.confirmed == rows, "\(report.summary)")
        }
        await service.stop()
        try await setup.simulator.shutdown()
    }
}
