import Foundation
import SalvoPostgres
import SalvoRows
import SalvoSend
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// A query's rows copied into the CSV spool by a real server: the text of each type, NULL tokens, and a clear error
/// for each way the copy cannot be made.
@Suite("PostgreSQL spool", .tags(.network), .runs(.network)) struct PostgresSpoolTests {
    static func folder() throws -> String {
        let folder = TestScratch.root.appendingPathComponent("postgres-spool-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        return folder
    }

    static func location(
        _ server: PostgresTestServer,
        _ database: String,
        sslmode: String = "disable"
    ) throws
        -> PostgresLocation
    {
        try PostgresLocation(url: server.url(database: database, sslmode: sslmode), environment: [:])
    }

    /// The spools of a job that reads `stream` as the input `postgres`, as `send --from-postgres` names it.
    static func spools(_ stream: PostgresSpool.Stream) -> InputSpools {
        var spools = InputSpools()
        spools.read(PostgresSpool.inputName, from: InputSpools.Spool(path: stream.path, growing: stream.growing))
        return spools
    }

    /// The rows of `query` streamed into a temporary file, once the copy has ended.
    /// The error a stream of `query` ends with; nil, and an issue recorded, when it ends without one.
    static func refusal(_ query: String, from location: PostgresLocation, column: TokenColumn) async -> JobError? {
        do {
            _ = try await Self.streamed(query: query, from: location, tokenColumn: column, in: try Self.folder())
        } catch let error as JobError {
            return error
        } catch {
            Issue.record("\(query): \(error)")
            return nil
        }
        Issue.record("\(query): no error")
        return nil
    }

    static func streamed(
        query: String,
        from location: PostgresLocation,
        tokenColumn: TokenColumn,
        in folder: String
    ) async throws(JobError) -> PostgresSpool.Snapshot {
        let stream = try await PostgresSpool.streamToTemporaryFile(
            query: query,
            from: location,
            tokenColumn: tokenColumn,
            in: folder
        )
        return try await stream.ended().get()
    }

    @Test("every column as PostgreSQL's text; a NULL token an empty field; the journal's snapshot whole")
    func typesAndNulls() async throws {
        let server = try PostgresTestServer.shared()
        let database = try await server.makeDatabase("spool_types")
        try await server.run(
            """
            CREATE TABLE devices (id int PRIMARY KEY, token varchar(64), lang text, name text, active bool,
              score float8, price numeric(10,2), big int8, seen timestamptz, born date, uid uuid, meta jsonb);
            INSERT INTO devices VALUES
              (1, 'aa', 'en', 'Ann, "the first"', true, 1.5, 12.30, 9000000000, '2026-11-23 17:29:49.5+00',
               '1999-12-31', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"k": 1}'),
              (2, NULL, 'fr', E'two\\nlines', false, -0.25, -1, -1, '1970-01-01 00:00:00+00', '2000-03-01', NULL,
               NULL),
              (3, 'cc', '', NULL, NULL, 3, 0, 0, NULL, NULL, NULL, '[]');
            """,
            database: database
        )
        let folder = try Self.folder()
        let journal = folder + "/journal"
        let snapshot = try await PostgresSpool.spool(
            query: "SELECT * FROM devices ORDER BY id",
            from: try Self.location(server, database),
            tokenColumn: .name("TOKEN"),
            intoJournal: journal
        )
        #expect(snapshot.path == PostgresSpool.journalPath(journal))
        #expect(snapshot.rows == 3)
        #expect(snapshot.nullTokens == 1)
        #expect(snapshot.firstNullRows == [2])
        #expect(snapshot.columns.first == "id")
        let text = try String(contentsOfFile: snapshot.path, encoding: .utf8)
        let expected =
            [
                "id,token,lang,name,active,score,price,big,seen,born,uid,meta",
                #"1,aa,en,"Ann, ""the first""",t,1.5,12.30,9000000000,2026-11-23 17:29:49.5+00,1999-12-31,"#
                    + #"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11,"{""k"": 1}""#,
                "2,,fr,\"two\nlines\",f,-0.25,-1.00,-1,1970-01-01 00:00:00+00,2000-03-01,,",
                #"3,cc,"",,,3,0.00,0,,,,[]"#,
            ].joined(separator: "\n") + "\n"
        #expect(text == expected)
        #expect(snapshot.bytes == text.utf8.count)
        #expect(snapshot.sha256 == JobJournal.sha256(Array(text.utf8)))
        #expect(!FileManager.default.fileExists(atPath: snapshot.path + ".partial"))
    }

    @Test("over TLS when the URL asks for it (sslmode=require)")
    func tls() async throws {
        let server = try PostgresTestServer.shared()
        let database = try await server.makeDatabase("spool_tls")
        try await server.run("CREATE TABLE t (token text); INSERT INTO t VALUES ('x')", database: database)
        // Rows only where the session is encrypted: the result proves the connection's TLS.
        let query = "SELECT token FROM t WHERE (SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid())"
        let encrypted = try await Self.streamed(
            query: query,
            from: try Self.location(server, database, sslmode: "require"),
            tokenColumn: .name("token"),
            in: try Self.folder()
        )
        #expect(encrypted.rows == 1)
        let plain = await #expect(throws: JobError.self) {
            try await Self.streamed(
                query: query,
                from: try Self.location(server, database, sslmode: "disable"),
                tokenColumn: .name("token"),
                in: try Self.folder()
            )
        }
        #expect(plain?.message.contains("no rows") == true, "\(plain?.message ?? "")")
    }

    @Test("an unreachable server, a wrong password, a failing query: each said plainly, the password never shown")
    func connectionAndQueryFailures() async throws {
        let server = try PostgresTestServer.shared()
        let database = try await server.makeDatabase("spool_fail")
        try await server.run("CREATE TABLE t (token text, n int); INSERT INTO t VALUES ('a', 1)", database: database)
        func copy(_ url: String, _ query: String = "SELECT * FROM t") async -> JobError? {
            await #expect(throws: JobError.self) {
                try await Self.streamed(
                    query: query,
                    from: try PostgresLocation(url: url, environment: [:]),
                    tokenColumn: .name("token"),
                    in: try Self.folder()
                )
            }
        }
        // Nothing listens on port 1.
        let unreachable = await copy("postgres://salvo:pw@127.0.0.1:1/db?sslmode=disable&connect_timeout=5")
        #expect(unreachable?.code == .unreachable)
        #expect(unreachable?.message.contains("cannot connect") == true, "\(unreachable?.message ?? "")")

        let wrong = await copy(server.url(database: database, password: "not-the-password"))
        #expect(wrong?.code == .credentials)
        #expect(wrong?.message.contains("28P01") == true, "\(wrong?.message ?? "")")
        #expect(wrong?.message.contains("not-the-password") == false)

        let missingTable = await copy(server.url(database: database), "SELECT token FROM nowhere")
        #expect(missingTable?.code == .input)
        #expect(missingTable?.message.contains("relation \"nowhere\" does not exist") == true)
        #expect(missingTable?.message.contains("42P01") == true, "\(missingTable?.message ?? "")")
        #expect(missingTable?.message.contains("at character 19 of the query") == true)

        let failsMidway = await copy(server.url(database: database), "SELECT token, 1 / (n - 1) AS q FROM t")
        #expect(failsMidway?.message.contains("division by zero") == true, "\(failsMidway?.message ?? "")")

        let noDatabase = await copy(server.url(database: "no_such_database"))
        #expect(noDatabase?.message.contains("no_such_database") == true, "\(noDatabase?.message ?? "")")
        #expect(noDatabase?.message.contains(server.password) == false)
    }

    @Test("no token column, a token column that is not text, no rows: refused by name; any other column read")
    func resultFailures() async throws {
        let server = try PostgresTestServer.shared()
        let database = try await server.makeDatabase("spool_result")
        try await server.run(
            "CREATE TABLE t (device text, raw bytea, n int, p point); INSERT INTO t VALUES ('a', '\\x01', 1, '(1,2)')",
            database: database
        )
        let location = try Self.location(server, database)
        // A function of the type's, not a local one around `#expect(throws:)`: Swift 6.3.1's optimizer crashes
        // splitting that coroutine (-O, signal 11 in CoroSplit).
        func copy(_ query: String, column: TokenColumn = .name("token")) async -> JobError? {
            await Self.refusal(query, from: location, column: column)
        }
        let noColumn = await copy("SELECT device, n FROM t")
        #expect(noColumn?.message.contains("no column named 'token' (it returns: device, n)") == true)
        let bytea = await copy("SELECT raw AS token FROM t")
        #expect(bytea?.message.contains("of type bytea, not text") == true, "\(bytea?.message ?? "")")
        #expect(bytea?.message.contains("encode(token, 'hex')") == true)
        let integer = await copy("SELECT n FROM t", column: .number(1))
        #expect(integer?.message.contains("of type integer, not text") == true, "\(integer?.message ?? "")")
        let empty = await copy("SELECT device AS token FROM t WHERE false")
        #expect(empty?.message.contains("no rows") == true)
        // Cast as the messages say, the token is read; a column of any other type comes in its text form.
        let folder = try Self.folder()
        let cast = try await PostgresSpool.spool(
            query: "SELECT encode(raw, 'hex') AS token, p, n FROM t -- the token as hex\n;  ",
            from: location,
            tokenColumn: .name("token"),
            intoJournal: folder + "/journal"
        )
        #expect(cast.rows == 1)
        #expect(try String(contentsOfFile: cast.path, encoding: .utf8) == "token,p,n\n01,\"(1,2)\",1\n")
    }

    @Test("streamed: read while the rows arrive, and a query that fails midway ends the input with its reason")
    func aStreamIsReadWhileItArrivesAndFailsWithTheQuery() async throws {
        let server = try PostgresTestServer.shared()
        let location = try Self.location(server, try await server.makeDatabase("spool_stream"))
        let rows = 100_000
        let whole = try await PostgresSpool.streamToTemporaryFile(
            query: "SELECT md5(i::text) || md5((-i)::text) AS token, i FROM generate_series(1, \(rows)) AS i",
            from: location,
            tokenColumn: .name("token"),
            in: try Self.folder()
        )
        #expect(whole.columns == ["token", "i"])
        // Read at once, while the copy may still be writing: every row, in order, then the end. A reader waits for the
        // rows to come, blocking its thread, so it reads on `BlockingWork`'s threads as a send's does, never the
        // cooperative pool's: with the pool held to one thread, the copy's end could not be told there otherwise.
        let wholeSpools = Self.spools(whole)
        let read = try await BlockingWork.run { () throws -> Int in
            let reader = try CSVReader(path: PostgresSpool.inputName, spools: wholeSpools)
            var read = 0
            while try reader.next() != nil { read += 1 }
            return read
        }
        #expect(read == rows + 1, "the header and every row")
        let snapshot = try await whole.ended().get()
        #expect(snapshot.rows == rows && snapshot.sha256.isEmpty)

        // Division by zero at row 60,000: the first rows arrive, then the input ends with the server's reason.
        let failing = try await PostgresSpool.streamToTemporaryFile(
            query: "SELECT md5(i::text) || md5((-i)::text) AS token, 1 / (60000 - i) AS q "
                + "FROM generate_series(1, \(rows)) AS i",
            from: location,
            tokenColumn: .name("token"),
            in: try Self.folder()
        )
        let failingSpools = Self.spools(failing)
        let (before, error) = try await BlockingWork.run { () throws -> (Int, InputError?) in
            let cut = try CSVReader(path: PostgresSpool.inputName, spools: failingSpools)
            var before = 0
            do {
                while try cut.next() != nil { before += 1 }
            } catch let error as InputError {
                return (before, error)
            }
            return (before, nil)
        }
        #expect(error != nil, "the input ended without the query's failure")
        #expect(error?.message.contains("division by zero") == true, "\(error?.message ?? "")")
        // The header and rows 1 to 59,999: the row that fails is not written, nor any after it.
        #expect(before <= 60_000, "no row past the failure")
        if case .success = await failing.ended() { Issue.record("the copy said it ended whole") }
    }
}
