import ArgumentParser
import Foundation
import SalvoConsole
import SalvoPostgres
import SalvoRows

/// `send --write-back TABLE | --write-back-sql STATEMENT [--write-back-url URL] [--write-back-job TEXT]`: where the
/// tokens APNs reported gone are recorded once the job's outcomes are final (docs/postgres.md).
struct WriteBackOptions: ParsableArguments {
    @Option(
        name: .customLong("write-back"),
        help: """
            Record each token APNs reported gone (HTTP/2 410 with its time; invalid: binary status 8, \
            BadDeviceToken) in this PostgreSQL table (token text PRIMARY KEY, reason, reported_at, job; see \
            docs/postgres.md), once: a token already there is left as it is.
            """
    )
    var table: String?

    @Option(
        name: .customLong("write-back-sql"),
        help: """
            Instead of --write-back: run this statement for each batch of gone tokens, with :tokens (text[]), \
            :reasons (text[]), :reported_at (timestamptz[]) and :job (text), e.g. \
            "UPDATE devices SET opted_in = false WHERE token = ANY(:tokens) AND opted_in".
            """
    )
    var sql: String?

    @Option(
        name: .customLong("write-back-url"),
        help: """
            The PostgreSQL server to write back to, postgres://USER@HOST:PORT/DATABASE?sslmode=MODE (default: \
            --from-postgres's); the password as for --from-postgres.
            """
    )
    var url: String?

    @Option(name: .customLong("write-back-job"), help: "The job value written with each token (default: send TIME).")
    var job: String?

    var isGiven: Bool { self.table != nil || self.sql != nil }

    func validate() throws {
        if self.table != nil && self.sql != nil {
            throw ValidationError("give --write-back TABLE or --write-back-sql STATEMENT, not both")
        }
        if !self.isGiven {
            for (flag, value) in [("--write-back-url", self.url), ("--write-back-job", self.job)] where value != nil {
                throw ValidationError("\(flag) goes with --write-back or --write-back-sql")
            }
        }
    }

    /// With the source's URL: a write-back needs a server, `--write-back-url` or `--from-postgres`'s.
    func validate(sourceURL: String?) throws(ValidationError) {
        guard self.isGiven, self.url == nil, sourceURL == nil else { return }
        throw ValidationError(
            "\(self.table != nil ? "--write-back" : "--write-back-sql") needs a server: give --write-back-url "
                + "postgres://USER@HOST:PORT/DATABASE (or send --from-postgres)"
        )
    }

    /// The recorder these options ask for, nil without `--write-back`/`--write-back-sql`.
    ///
    /// - Parameters:
    ///   - sourceURL: `--from-postgres`, the server written back to when `--write-back-url` is not given.
    ///   - passwordFile: `--postgres-password-file`.
    func recorder(sourceURL: String?, passwordFile: String?) throws -> PostgresWriteBack? {
        guard self.isGiven else { return nil }
        try self.validate(sourceURL: sourceURL)
        guard let url = self.url ?? sourceURL else { return nil }
        return try Self.recorder(
            url: url,
            option: self.url != nil ? "--write-back-url" : "--from-postgres",
            table: self.table,
            sql: self.sql,
            passwordFile: passwordFile,
            job: self.job ?? "send \(UnixTime.iso8601(Int64(Date().timeIntervalSince1970)))"
        )
    }

    /// A PostgreSQL write-back to `url` (`option` names it in messages), into `table` (the default layout) or by
    /// `sql`; the default table `salvo_gone_tokens` when neither is given.
    static func recorder(
        url: String,
        option: String,
        table: String?,
        sql: String?,
        passwordFile: String?,
        job: String
    ) throws -> PostgresWriteBack {
        do throws(JobError) {
            let statement: WriteBackStatement
            if let sql {
                statement = try WriteBackStatement(sql: sql)
            } else {
                statement = try WriteBackStatement(table: table ?? WriteBackStatement.defaultTable)
            }
            let location: PostgresLocation
            do throws(JobError) {
                location = try PostgresLocation(url: url, passwordFile: passwordFile)
            } catch {
                // The location's messages name the source's option.
                throw JobError(error.code, error.message.replacingOccurrences(of: "--from-postgres", with: option))
            }
            return PostgresWriteBack(location: location, statement: statement, job: job)
        } catch {
            throw UserError(error.message)
        }
    }
}
