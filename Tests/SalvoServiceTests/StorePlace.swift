import SalvoPostgres
import SalvoService
import SalvoServiceStores
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// The stores the behavioural tests run against, each case a store: the embedded SQLite file (a `.pure` test: files
/// only) and PostgreSQL (a `.network` test: a real server, `PostgresTestServer`). `SALVO_TEST_TAGS` chooses which.
enum StoreKind: String, Sendable, CaseIterable, CustomTestStringConvertible {
    case sqlite
    case postgres

    /// The kinds the selected tags run.
    static var selected: [StoreKind] {
        var kinds: [StoreKind] = []
        if TestKind.selected.contains(.pure) { kinds.append(.sqlite) }
        if TestKind.selected.contains(.network) { kinds.append(.postgres) }
        return kinds
    }

    var testDescription: String { self.rawValue }
}

/// Where a test keeps its store, to open it, close it and open it again: a scratch folder, or a database of its
/// own (migrated) on the test server.
struct StorePlace: Sendable {
    let kind: StoreKind
    let folder: String
    let location: PostgresLocation?

    static func make(_ kind: StoreKind, _ prefix: String) async throws -> StorePlace {
        let folder = try scratchFolder(prefix)
        guard kind == .postgres else { return StorePlace(kind: kind, folder: folder, location: nil) }
        let location = try await Self.database(prefix)
        _ = try await PostgresNotificationStore.migrate(location: location)
        return StorePlace(kind: kind, folder: folder, location: location)
    }

    /// A new, empty database on the test server, with no schema in it.
    static func database(_ prefix: String) async throws -> PostgresLocation {
        let server = try PostgresTestServer.shared()
        let database = try await server.makeDatabase(prefix)
        return try PostgresLocation(url: server.url(database: database), option: "--store")
    }

    /// The store, as worker `worker` for PostgreSQL.
    func open(worker: String = "worker-a", lease: Duration = .seconds(120)) async throws -> any ServiceStore {
        guard let location else { return try await SQLiteNotificationStore.open(directory: self.folder) }
        var options = PostgresNotificationStore.Options(workerID: worker)
        options.lease = lease
        return try await PostgresNotificationStore.open(location: location, options: options)
    }
}
