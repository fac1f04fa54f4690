import Foundation
import SalvoPostgres
import SalvoRows
import SalvoService

/// Where `salvo serve` keeps its store (`--store`): a folder for one node's SQLite file, or a PostgreSQL URL
/// (`postgres://…`, `postgresql://…`) for a database a fleet shares. Shown without a password.
public enum ServiceStoreLocation: Sendable, CustomStringConvertible {
    case folder(String)
    case postgres(PostgresLocation)

    /// Reads `--store`: a URL with the PostgreSQL scheme, else a folder.
    ///
    /// - Throws: `StoreFailure` for a PostgreSQL URL that does not parse (the password left out of the message).
    public init(_ text: String, passwordFile: String? = nil) throws(StoreFailure) {
        let lowered = text.lowercased()
        guard lowered.hasPrefix("postgres://") || lowered.hasPrefix("postgresql://") else {
            if let passwordFile {
                throw StoreFailure(
                    "--postgres-password-file \(passwordFile) goes with a PostgreSQL store (--store postgres://…)"
                )
            }
            self = .folder(text)
            return
        }
        do {
            self = .postgres(try PostgresLocation(url: text, passwordFile: passwordFile, option: "--store"))
        } catch {
            throw StoreFailure(error.message)
        }
    }

    public var description: String {
        switch self {
        case .folder(let path): path
        case .postgres(let location): location.redacted
        }
    }

    /// Opens the store: the SQLite file in the folder (created if missing), or the PostgreSQL store as worker
    /// `workerID` with rows leased for `lease` (its schema made by `salvo serve migrate` first).
    public func open(workerID: String, lease: Duration = .seconds(120)) async throws(StoreFailure) -> any ServiceStore {
        switch self {
        case .folder(let path):
            return try await SQLiteNotificationStore.open(directory: path)
        case .postgres(let location):
            var options = PostgresNotificationStore.Options(workerID: workerID)
            options.lease = lease
            return try await PostgresNotificationStore.open(location: location, options: options)
        }
    }
}

/// A worker's id when `--worker-id` gives none: the host's name, the process id and four random bytes, so that two
/// processes on one host, or one process started again, never share one.
public enum WorkerID {
    public static func make() -> String {
        let host = ProcessInfo.processInfo.hostName.split(separator: ".").first.map(String.init) ?? "host"
        let random = (0..<4).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        return "\(host)-\(ProcessInfo.processInfo.processIdentifier)-\(random)"
    }

    /// Ids a worker may have: 1 to 128 visible ASCII characters.
    public static func isValid(_ id: String) -> Bool {
        (1...128).contains(id.utf8.count) && id.utf8.allSatisfy { $0 >= 0x21 && $0 <= 0x7E }
    }
}
