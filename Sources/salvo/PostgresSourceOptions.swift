import ArgumentParser
import Foundation
import SalvoConsole
import SalvoPostgres
import SalvoRows
import SalvoSend

/// `--from-postgres URL --query SQL`: the tokens are the rows of a query, copied into a CSV spool (`PostgresSpool`) and
/// read as a token file named `postgres`: with a journal once the copy is whole (the job's snapshot), without one
/// while it is written.
struct PostgresSourceOptions: ParsableArguments {
    @Option(
        name: .customLong("from-postgres"),
        help: ArgumentHelp(
            "Send to the rows of --query on this PostgreSQL server instead of token files.",
            discussion: """
                postgres://USER@HOST:PORT/DATABASE?sslmode=disable|prefer|require|verify-ca|verify-full; the \
                password from the URL, --postgres-password-file or PGPASSWORD (never shown).
                """,
            valueName: "url"
        )
    )
    var url: String?

    @Option(
        help: ArgumentHelp(
            "With --from-postgres: the query whose rows are the tokens (the token column by --column, like a header).",
            valueName: "sql"
        )
    )
    var query: String?

    @Option(
        name: .customLong("postgres-password-file"),
        help: ArgumentHelp("With --from-postgres: the password is this file's first line.", valueName: "file")
    )
    var passwordFile: String?

    var isGiven: Bool { self.url != nil }

    /// Refuses `--query` without `--from-postgres` and the other way round, token files beside a query, and a URL
    /// that does not parse (exit 64).
    func validate(tokens: [String], header: HeaderMode) throws(ValidationError) {
        guard let url else {
            if self.query != nil || self.passwordFile != nil {
                throw ValidationError("--query and --postgres-password-file need --from-postgres URL")
            }
            return
        }
        guard let query, !query.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
            throw ValidationError("--from-postgres needs --query SQL: the query whose rows are the tokens")
        }
        guard tokens.isEmpty else {
            throw ValidationError(
                "--from-postgres takes its tokens from --query: name no token file (got \(tokens.joined(separator: " ")))"
            )
        }
        guard header != .absent else {
            throw ValidationError("--header absent does not apply to --from-postgres: its rows have their column names")
        }
        do {
            // The password file is read when the command runs; here only the URL's form is judged.
            _ = try PostgresLocation(url: url, environment: ["USER": "-"])
        } catch {
            throw ValidationError(error.message)
        }
    }

    /// The job's identity beyond its rows: the server and database (never the user or the password) and the query
    /// text. A rerun with another query or server is refused by the journal, naming the option.
    var settings: [String: String] {
        guard let url else { return [:] }
        let server = (try? PostgresLocation(url: url, environment: ProcessInfo.processInfo.environment))?.server
        return ["--from-postgres": server ?? "", "--query": self.query ?? ""]
    }

    /// Runs the query into its spool and names it in `spools` as the input `postgres`; returns the input files for
    /// the job (`files` unchanged without `--from-postgres`). Which spool is `PostgresSourcePlan`'s decision:
    ///
    /// With a journal: a folder that holds the snapshot and the job of an earlier run resumes against that snapshot,
    /// and the table is not read again (a note says so, with the snapshot's time); otherwise the rows are snapshotted
    /// into the folder (with `restart` too). Without one: streamed into a temporary file, gone when the process ends,
    /// which the job reads while it is written (this returns once the first row is in).
    ///
    /// A server that cannot be reached, refuses the login or the query, or a result without a usable token column,
    /// is a `UserError` saying so (exit 3).
    func prepare(
        _ files: [String],
        column: TokenColumn,
        journal: String? = nil,
        restart: Bool = false,
        spools: inout InputSpools
    ) async throws -> [String] {
        guard let url, let query else { return files }
        let location: PostgresLocation
        do {
            location = try PostgresLocation(url: url, passwordFile: self.passwordFile)
        } catch {
            throw UserError(error.message)
        }
        let name = PostgresSpool.inputName
        let found = journal.map { directory in
            PostgresSourcePlan.Journal(
                directory: directory,
                restart: restart,
                holdsSnapshotAndJob: Self.canResume(journal: directory),
                storedSettings: (try? JobJournal.loadManifest(directory))?.settings
            )
        }
        switch PostgresSourcePlan.decide(journal: found, query: query, server: location.server) {
        case .resume(let snapshot, let announce):
            spools.read(name, from: snapshot)
            if announce, let journal {
                let taken = PostgresSpool.snapshotTime(journal: journal).map {
                    UnixTime.iso8601(Int64($0.timeIntervalSince1970))
                }
                printError(
                    "resuming against the snapshot taken at \(taken ?? "an unknown time") (\(snapshot)); the table is "
                        + "not read again",
                    prefix: "note: "
                )
            }
        case .stream:
            let stream: PostgresSpool.Stream
            do {
                stream = try await PostgresSpool.streamToTemporaryFile(
                    query: query,
                    from: location,
                    tokenColumn: column
                )
            } catch {
                throw UserError(error.message)
            }
            spools.read(name, from: InputSpools.Spool(path: stream.path, growing: stream.growing))
            Task {
                if case .success(let snapshot) = await stream.ended() { Self.warnOfNullTokens(snapshot) }
            }
        case .snapshot(let journal):
            let snapshot: PostgresSpool.Snapshot
            do {
                snapshot = try await PostgresSpool.spool(
                    query: query,
                    from: location,
                    tokenColumn: column,
                    intoJournal: journal
                )
            } catch {
                throw UserError(error.message)
            }
            spools.read(name, from: snapshot.path)
            Self.warnOfNullTokens(snapshot)
        }
        return [name]
    }

    /// Names the first rows whose token is NULL (refused, each with its line, as an empty token is).
    private static func warnOfNullTokens(_ snapshot: PostgresSpool.Snapshot) {
        guard snapshot.nullTokens > 0 else { return }
        let rows = snapshot.firstNullRows.map(String.init).joined(separator: ", ")
        let more = snapshot.nullTokens > snapshot.firstNullRows.count ? ", …" : ""
        printError(
            "\(snapshot.nullTokens) of the query's \(snapshot.rows) rows have a NULL token (rows \(rows)\(more)): "
                + "they are refused, each on its line of \(PostgresSpool.inputName) (row N is line N + 1, after the "
                + "header)",
            prefix: "warning: "
        )
    }

    /// Whether the journal folder holds a whole snapshot and a job.
    static func canResume(journal directory: String) -> Bool {
        access(PostgresSpool.journalPath(directory), R_OK) == 0 && access(JobJournal.manifestPath(directory), R_OK) == 0
    }
}
