/// How a run reads the rows of `--from-postgres`: against the snapshot an earlier run kept in the journal, streamed
/// into a temporary file while the job reads it, or snapshotted whole into the journal first. A decision over what
/// the caller found (the journal folder's contents, the stored job's settings), so that it is tested without a
/// server or a file.
public enum PostgresSourcePlan: Hashable, Sendable {
    /// The journal holds the snapshot and the job of an earlier run: the job resumes against `snapshot`, and the
    /// table is not read again. `announce`: the stored job is of this query on this server, so a note says which
    /// snapshot is used (a journal of another query or server is the journal's to refuse, naming the option).
    case resume(snapshot: String, announce: Bool)
    /// No journal keeps the rows: they are sent as they arrive, the job reading the file while it is written.
    case stream
    /// The rows are snapshotted whole into the journal folder `journal` before the job opens its input.
    case snapshot(journal: String)

    /// What the caller knows of the journal folder of a run that names one.
    public struct Journal: Hashable, Sendable {
        public var directory: String
        /// `--journal-restart`: the job begins again, whatever the folder holds.
        public var restart: Bool
        /// The folder holds a whole snapshot (`PostgresSpool.journalPath`) and a job's manifest.
        public var holdsSnapshotAndJob: Bool
        /// The settings of the job stored there (nil: none, or one that cannot be read).
        public var storedSettings: [String: String]?

        public init(
            directory: String,
            restart: Bool = false,
            holdsSnapshotAndJob: Bool,
            storedSettings: [String: String]? = nil
        ) {
            self.directory = directory
            self.restart = restart
            self.holdsSnapshotAndJob = holdsSnapshotAndJob
            self.storedSettings = storedSettings
        }
    }

    /// The plan for a run of `query` on `server` (`PostgresLocation.server`) with `journal` (nil: no journal).
    public static func decide(journal: Journal?, query: String, server: String) -> PostgresSourcePlan {
        guard let journal else { return .stream }
        guard !journal.restart, journal.holdsSnapshotAndJob else { return .snapshot(journal: journal.directory) }
        let stored = journal.storedSettings
        return .resume(
            snapshot: PostgresSpool.journalPath(journal.directory),
            announce: stored?["--query"] == query && stored?["--from-postgres"] == server
        )
    }
}
