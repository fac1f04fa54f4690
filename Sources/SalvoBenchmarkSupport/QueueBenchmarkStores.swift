import Foundation
import SalvoPostgres
import SalvoRows
import SalvoService
import SalvoServiceStores

/// The stores of a `salvo-bench queue` run, fresh so that runs compare: the embedded store in a folder that does not
/// exist yet or is empty; a PostgreSQL store migrated first (as `salvo serve migrate` does) whose table holds no
/// notification (a new database). Each store is a worker of its own (`bench-1`, `bench-2`, …), its connection made.
public enum QueueBenchmarkStores {
    /// - Throws: `StoreFailure` naming `--store` and why: a folder that holds files, a PostgreSQL store that holds
    ///   notifications, more than one worker on the embedded store, or the store's own failure.
    public static func open(
        _ location: ServiceStoreLocation,
        workers: Int
    ) async throws(StoreFailure) -> [any ServiceStore] {
        switch location {
        case .folder(let path):
            guard workers == 1 else {
                throw StoreFailure("--workers \(workers): the embedded store (--store \(path)) has one worker only")
            }
            let entries = await BlockingWork.run { (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] }
            guard entries.isEmpty else {
                throw StoreFailure("--store \(path): the folder is not empty; the benchmark takes a new folder")
            }
        case .postgres(let postgres):
            _ = try await PostgresNotificationStore.migrate(location: postgres)
            let count = try await PostgresServerProbe(location: postgres).notificationCount()
            guard count == 0 else {
                throw StoreFailure(
                    "--store \(postgres.redacted): the store holds \(count) notifications; the benchmark takes an "
                        + "empty one (a new database)"
                )
            }
        }
        var stores: [any ServiceStore] = []
        do throws(StoreFailure) {
            for index in 1...workers {
                let store = try await location.open(workerID: "bench-\(index)")
                stores.append(store)
                // A small durable write: a PostgreSQL store's pool has its connection (and its login) before the
                // run's clock starts.
                try await store.checkWritable()
            }
        } catch {
            for store in stores { await store.close() }
            throw error
        }
        return stores
    }
}
