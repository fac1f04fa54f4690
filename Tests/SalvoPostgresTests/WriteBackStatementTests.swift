import Foundation
import SalvoPostgres
import SalvoRows
import SalvoTestTraits
import Testing

/// The write-back's statements and counts, without a server: the named parameters of `--write-back-sql`, the table
/// name of `--write-back`, the timestamps' array literal, one entry per token.
@Suite("write-back statement", .tags(.pure), .runs(.pure))
struct WriteBackStatementTests {
    @Test("named parameters become placeholders in order of first use, each cast to its type")
    func namedParameters() throws {
        let statement = try WriteBackStatement(
            sql: "UPDATE devices SET gone_at = g.at, why = g.why FROM UNNEST(:tokens, :reported_at, :reasons) "
                + "AS g(token, at, why) WHERE devices.token = g.token AND devices.note <> :job AND g.token = ANY(:tokens);"
        )
        #expect(statement.parameters == [.tokens, .reportedAt, .reasons, .job])
        #expect(
            statement.sql
                == "UPDATE devices SET gone_at = g.at, why = g.why FROM UNNEST($1::text[], $2::text::timestamptz[], "
                + "$3::text[]) AS g(token, at, why) WHERE devices.token = g.token AND devices.note <> $4::text AND "
                + "g.token = ANY($1::text[])"
        )
        #expect(statement.target == "--write-back-sql")
    }

    @Test("casts, quoted text, comments and dollar quotes are left alone")
    func notParameters() throws {
        let sql = """
            INSERT INTO t(token, note) SELECT x::text, ':reasons' || "odd:job" || $q$:tokens$q$ -- :nothing
            FROM UNNEST(:tokens) AS x /* :reasons */ ON CONFLICT DO NOTHING
            """
        let statement = try WriteBackStatement(sql: sql)
        #expect(statement.parameters == [.tokens])
        #expect(statement.sql == sql.replacingOccurrences(of: "UNNEST(:tokens)", with: "UNNEST($1::text[])"))
    }

    @Test("a statement without :tokens, an unknown parameter, an open quote or an empty one is refused")
    func refused() {
        for (sql, words) in [
            ("DELETE FROM devices WHERE token = ANY(:reasons)", "names no :tokens"),
            ("UPDATE d SET x = 1 WHERE token = ANY(:token)", ":token is not a parameter"),
            ("UPDATE d SET x = 'open WHERE token = ANY(:tokens)", "quote is not closed"),
            ("UPDATE d SET x = 1 /* WHERE token = ANY(:tokens)", "comment is not closed"),
            (" ;\n", "is empty"),
        ] {
            let error = #expect(throws: JobError.self) { try WriteBackStatement(sql: sql) }
            #expect(error?.message.contains(words) == true, "\(sql): \(error?.message ?? "")")
            #expect(error?.code == .configuration)
        }
    }

    @Test("a table is a plain name or schema.name; anything else is refused before anything is sent")
    func tableNames() throws {
        let statement = try WriteBackStatement(table: "crm.gone_tokens")
        #expect(statement.sql.hasPrefix("INSERT INTO crm.gone_tokens (token, reason, reported_at, job) "))
        #expect(statement.sql.hasSuffix("ON CONFLICT (token) DO NOTHING"))
        #expect(statement.parameters == [.tokens, .reasons, .reportedAt, .job])
        for bad in ["", "gone tokens", "a.b.c", "1st", "gone;DROP TABLE x", "\"Gone\"", "a."] {
            #expect(throws: JobError.self, "\(bad)") { try WriteBackStatement(table: bad) }
        }
    }

    @Test("timestamps travel as a UTC array literal with NULL for a token without a time")
    func timestampLiteral() {
        let literal = WriteBackStatement.timestampArray([1_764_172_800_123, nil, 0, -1, 951_782_400_000])
        #expect(
            literal
                == "{\"2025-11-26 16:00:00.123+00\",NULL,\"1970-01-01 00:00:00.000+00\","
                + "\"1969-12-31 23:59:59.999+00\",\"2000-02-29 00:00:00.000+00\"}"
        )
        #expect(WriteBackStatement.timestampArray([Int64?]()) == "{}")
    }

    @Test("one entry per token, the latest time kept, first-seen order")
    func uniqueTokens() {
        let tokens = [
            GoneToken(token: "aa", reason: "Unregistered", reportedAt: 5),
            GoneToken(token: "bb", reason: "InvalidToken", reportedAt: nil),
            GoneToken(token: "aa", reason: "Unregistered", reportedAt: 9),
            GoneToken(token: "aa", reason: "Unregistered", reportedAt: nil),
            GoneToken(token: "bb", reason: "InvalidToken", reportedAt: nil),
        ]
        #expect(
            GoneToken.unique(tokens) == [
                GoneToken(token: "aa", reason: "Unregistered", reportedAt: 9),
                GoneToken(token: "bb", reason: "InvalidToken", reportedAt: nil),
            ]
        )
    }

    @Test("a failed write-back is an output failure naming the destination and the tokens not recorded")
    func failureReport() {
        var report = WriteBackReport(destination: "gone at 127.0.0.1:5432/app", tokens: 10, written: 4)
        #expect(report.isComplete)
        #expect(report.outputFailure == nil)
        report.failed = 6
        report.error = "relation \"gone\" does not exist"
        #expect(!report.isComplete)
        let failure = report.outputFailure
        #expect(failure?.output == OutputFailure.writeBack)
        #expect(failure?.rowsMissing == 6)
        #expect(
            failure?.summary
                == "the write-back to gone at 127.0.0.1:5432/app failed (6 tokens not recorded): relation \"gone\" "
                + "does not exist"
        )
    }
}
