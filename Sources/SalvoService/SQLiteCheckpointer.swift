import GRDB
import GRDBSQLite
import SalvoRows
import Synchronization

/// Copies the store's write-ahead log into its database file on a connection and a thread of its own, so that no
/// cycle's commit waits for it.
///
/// SQLite's own checkpoint runs inside the commit that takes the log past 1,000 pages: that commit also writes those
/// pages to the database file and syncs it, and every request of the cycle waits (a tail of tens of milliseconds on
/// a 202 at a thousand requests a second). Here the writer's commits only count the log's pages (SQLite's log hook,
/// `install(on:)`, which replaces its own checkpoint), and a passive checkpoint on another connection runs beside
/// the writer, which goes on appending meanwhile; once a checkpoint has copied the whole log and no reader needs its
/// older pages, the writer starts the log from its beginning again, so it stays near the size that starts one. One
/// at a time; after a commit that leaves the log at `threshold` pages or more.
final class SQLiteCheckpointer: Sendable {
    /// The log's pages after the last commit, set by the log hook on the writer's thread.
    private let pages = Atomic<Int>(0)
    private let running = Mutex(false)
    private let queue = Mutex<DatabaseQueue?>(nil)
    /// The log's pages that start a checkpoint: SQLite's own default.
    private let threshold = 1000

    init() {}

    /// Counts the pages of `connection`'s log after each of its commits, instead of SQLite's checkpoint there.
    /// The checkpointer outlives the connection (the store holds both, and closes the connection first).
    func install(on connection: OpaquePointer) {
        let context = Unmanaged.passUnretained(self).toOpaque()
        sqlite3_wal_hook(
            connection,
            { context, _, _, pages in
                guard let context else { return SQLITE_OK }
                Unmanaged<SQLiteCheckpointer>.fromOpaque(context).takeUnretainedValue().pages.store(
                    Int(pages),
                    ordering: .relaxed
                )
                return SQLITE_OK
            },
            context
        )
    }

    /// Opens the checkpoint's own connection, once the store's file exists.
    func open(path: String) throws {
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        configuration.label = "salvo.store.checkpoint"
        let queue = try DatabaseQueue(path: path, configuration: configuration)
        self.queue.withLock { $0 = queue }
    }

    /// After a commit: starts a checkpoint when the log is at the threshold and none runs. Returns at once.
    func committed() {
        guard self.pages.load(ordering: .relaxed) >= self.threshold,
            let queue = self.queue.withLock({ $0 })
        else { return }
        let start = self.running.withLock { running -> Bool in
            guard !running else { return false }
            running = true
            return true
        }
        guard start else { return }
        queue.asyncWriteWithoutTransaction { db in
            // A checkpoint that cannot finish now (a reader on older pages) leaves the rest to the next one.
            _ = try? db.checkpoint(.passive)
            self.running.withLock { $0 = false }
        }
    }

    /// Waits for a checkpoint under way, then closes the connection.
    func close() async {
        guard let queue = self.queue.withLock({ $0 }) else { return }
        await BlockingWork.run {
            queue.inDatabase { _ in }
            try? queue.close()
        }
    }
}
