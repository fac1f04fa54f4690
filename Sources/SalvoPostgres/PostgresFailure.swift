import NIOCore
import NIOSSL
import PostgresNIO
import SalvoRows

/// A driver's error as a person reads it: what failed (connecting, logging in, the query), the server's own message
/// and SQLSTATE where it sent one, and never the password.
public enum PostgresFailure {
    /// An error met while connecting to and logging in at `location`.
    ///
    /// - Returns: `JobError(.credentials)` when the server refused the login (SQLSTATE class 28) or wants a password
    ///   none of the three sources gave; `JobError(.input)` for another refusal by the server (a database that does
    ///   not exist); `JobError(.unreachable)` when no connection could be made.
    public static func connecting(_ error: any Error, to location: PostgresLocation) -> JobError {
        let place = "\(location.option) \(location.redacted)"
        guard let error = error as? PSQLError else {
            return JobError(.unreachable, "\(place): cannot connect: \(Self.describe(error))")
        }
        switch error.code {
        case .server:
            let state = error.serverInfo?[.sqlState] ?? ""
            let message = Self.serverMessage(error)
            if state.hasPrefix("28") {
                return JobError(
                    .credentials,
                    "\(place): the server refused the login (\(location.passwordSource.rawValue)): \(message)"
                )
            }
            return JobError(.input, "\(place): the server refused the connection: \(message)")
        case .authMechanismRequiresPassword:
            return JobError(
                .credentials,
                "\(place): the server asks for a password and none was given (in the URL, "
                    + "--postgres-password-file or PGPASSWORD)"
            )
        case .unsupportedAuthMechanism, .saslError:
            return JobError(.credentials, "\(place): the login failed (\(error.code)): \(Self.underlying(error))")
        case .sslUnsupported:
            return JobError(
                .unreachable,
                "\(place): the server does not offer TLS, which sslmode=\(location.tlsMode.rawValue) requires"
            )
        default:
            return JobError(.unreachable, "\(place): cannot connect: \(Self.underlying(error))")
        }
    }

    /// An error met while the query ran or its rows were read.
    ///
    /// - Returns: `JobError(.input)` with the server's message for a query the server refused or that failed while it
    ///   ran; `JobError(.unreachable)` when the connection was lost.
    public static func querying(_ error: any Error, query: String, at location: PostgresLocation) -> JobError {
        // The row-callback interface reports in the older error type.
        if let error = error as? PostgresError {
            switch error {
            case .server(let message):
                let fields = message.fields
                var text = Self.serverMessage {
                    switch $0 {
                    case .severity: fields[.severity]
                    case .sqlState: fields[.sqlState]
                    case .message: fields[.message]
                    case .detail: fields[.detail]
                    case .hint: fields[.hint]
                    default: nil
                    }
                }
                text += Self.place(fields[.position], in: query)
                return JobError(.input, "--query failed on \(location.redacted): \(text)")
            case .connectionClosed:
                return JobError(
                    .unreachable,
                    "--from-postgres \(location.redacted): the connection was lost while the query's rows were read"
                )
            case .protocol(let message):
                return JobError(.input, "--query failed on \(location.redacted): \(message)")
            }
        }
        guard let error = error as? PSQLError else {
            return JobError(.input, "--query failed: \(Self.describe(error))")
        }
        switch error.code {
        case .server:
            let message = Self.serverMessage(error) + Self.place(error.serverInfo?[.position], in: query)
            return JobError(.input, "--query failed on \(location.redacted): \(message)")
        case .serverClosedConnection, .uncleanShutdown, .connectionError:
            return JobError(
                .unreachable,
                "--from-postgres \(location.redacted): the connection was lost while the query's rows were read: "
                    + Self.underlying(error)
            )
        default:
            return JobError(.input, "--query failed on \(location.redacted): \(error.code): \(Self.underlying(error))")
        }
    }

    /// The query refused or failed by the server, from its ErrorResponse's fields (by their code letters, as
    /// `CopyOutHandler` reads them); `positionOffset` is added to the position it names.
    static func queryFailed(
        fields: [UInt8: String],
        query: String,
        positionOffset: Int,
        at location: PostgresLocation
    ) -> JobError {
        var text = Self.serverMessage { field in
            switch field {
            case .severity: fields[UInt8(ascii: "S")]
            case .sqlState: fields[UInt8(ascii: "C")]
            case .message: fields[UInt8(ascii: "M")]
            case .detail: fields[UInt8(ascii: "D")]
            case .hint: fields[UInt8(ascii: "H")]
            default: nil
            }
        }
        text += Self.place(fields[UInt8(ascii: "P")], in: query, offset: positionOffset)
        return JobError(.input, "--query failed on \(location.redacted): \(text)")
    }

    /// ` (at character 19 of the query: …FROM nowhere…)` for the 1-based character `position` names (less `offset`
    /// when the query ran inside another statement), or nothing.
    private static func place(_ position: String?, in query: String, offset: Int = 0) -> String {
        guard let position = position.flatMap(Int.init).map({ $0 + offset }), position >= 1 else { return "" }
        return " (at character \(position) of the query: \(Self.excerpt(query, at: position)))"
    }

    /// `ERROR 42P01: relation "devices" does not exist`, with the server's detail and hint when it sent them.
    static func serverMessage(_ error: PSQLError) -> String {
        Self.serverMessage { field in error.serverInfo?[field] }
    }

    /// The same, from the fields as `field` looks them up.
    static func serverMessage(_ field: (PSQLError.ServerInfo.Field) -> String?) -> String {
        var text = "\(field(.severity) ?? "ERROR") \(field(.sqlState) ?? "?????"): \(field(.message) ?? "(no message)")"
        if let detail = field(.detail) { text += "; \(detail)" }
        if let hint = field(.hint) { text += "; hint: \(hint)" }
        return text
    }

    private static func underlying(_ error: PSQLError) -> String {
        error.underlying.map(Self.describe) ?? "\(error.code)"
    }

    /// An error's own words: an `IOError`'s reason (`connection refused`), a TLS error's, else its description.
    static func describe(_ error: any Error) -> String {
        if let error = error as? PSQLError { return Self.underlying(error) }
        if let error = error as? IOError { return String(describing: error) }
        if let error = error as? NIOSSLError { return "TLS: \(error)" }
        if let error = error as? BoringSSLError { return "TLS: \(error)" }
        return String(describing: error)
    }

    /// Twenty characters of `query` around the 1-based character `position`.
    private static func excerpt(_ query: String, at position: Int) -> String {
        let characters = Array(query)
        let start = max(0, min(position - 1, characters.count) - 10)
        let end = min(characters.count, start + 20)
        return "…" + String(characters[start..<end]) + "…"
    }
}
