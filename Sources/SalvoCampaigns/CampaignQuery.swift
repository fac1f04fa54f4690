import Foundation
import SalvoPostgres
import SalvoRows
import SalvoService

#if canImport(Glibc)
import Glibc
#endif

/// The audience of a campaign that names a query: the rows of that query on the service's own database
/// (`salvo serve --campaign-postgres URL`, its password from `--campaign-postgres-password-file`; never the caller's,
/// never shown), read by the code of `send --from-postgres` (`PostgresSpool`) in read-only sessions.
///
/// The query is described when the campaign is made (`check`: its columns, without running it), and its rows are
/// copied once, at the campaign's first run, into the campaign's folder (`snapshot`: `postgres.csv`, written beside
/// and renamed when whole, as a journaled `send` keeps its snapshot). Every later run (a resume, a restart of the
/// service) reads that file and never the table, so a campaign sends the rows of one snapshot. A copy that fails
/// (the query fails midway, the server is lost) leaves no file and nothing sent: the run fails with the database's
/// message, and a resume copies again.
public struct CampaignQuery: Sendable {
    public let location: PostgresLocation

    public init(location: PostgresLocation) {
        self.location = location
    }

    /// The name the audience's rows go by in the campaign's report and rejects, as with `send --from-postgres`.
    public static let inputName = PostgresSpool.inputName

    /// The query's columns, as the server describes it without running it.
    ///
    /// - Throws: `ServiceProblem`: 422 `invalid-campaign` naming `audience.postgres.query` (the server refuses the
    ///   query: its message, the position in the query) or `audience.postgres.column` (no such column, or not text);
    ///   503 when the database cannot be reached or refuses the service's login (nothing is made; try again).
    public func check(query: String, column: String) async throws(ServiceProblem) -> [String] {
        do throws(JobError) {
            return try await PostgresSpool.describe(
                query: query,
                from: self.location,
                tokenColumn: .name(column),
                readOnly: true
            )
        } catch {
            throw Self.problem(error)
        }
    }

    /// The campaign's snapshot of the query's rows, at `path`: the file when an earlier run took it, else the rows
    /// copied now (the folder's lock held meanwhile, and let go after).
    ///
    /// - Throws: `ServiceProblem` as `check`, for a query that fails while its rows are copied (nothing is kept) or
    ///   returns none.
    public func snapshot(query: String, column: String, path: String) async throws(ServiceProblem) {
        guard await BlockingWork.run({ access(path, R_OK) != 0 }) else { return }
        let folder = String(path[..<(path.lastIndex(of: "/") ?? path.endIndex)])
        do throws(JobError) {
            _ = try await PostgresSpool.spool(
                query: query,
                from: self.location,
                tokenColumn: .name(column),
                intoJournal: folder,
                readOnly: true,
                releasingLock: true
            )
        } catch {
            throw Self.problem(error)
        }
    }

    /// A `JobError` of `PostgresSpool` as the API says it: in the API's words (its fields, not `send`'s options).
    static func problem(_ error: JobError) -> ServiceProblem {
        let detail = Self.apiWords(error.message)
        if [JobError.Code.unreachable, .credentials, .configuration].contains(error.code) {
            let reason = "the campaigns' database: \(detail)"
            return ServiceProblem(
                .unavailable,
                detail: reason,
                errors: [FieldError(field: "audience.postgres", reason: reason)],
                retryAfter: 30
            )
        }
        let field =
            detail.contains("token column") || detail.contains("no column named")
            ? "audience.postgres.column" : "audience.postgres.query"
        return ServiceProblem(.invalidCampaign, detail: detail, field: field)
    }

    /// `send`'s option names in a message of `PostgresSpool` as the API's fields.
    static func apiWords(_ message: String) -> String {
        message.replacingOccurrences(of: "--query", with: "the query")
            .replacingOccurrences(of: "name the token column with --column", with: "name the token column (column)")
            .replacingOccurrences(of: "--column", with: "column")
    }
}
