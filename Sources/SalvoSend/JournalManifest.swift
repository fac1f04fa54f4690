import SalvoEngine

/// What a job's journal holds besides the rows' states (`job.json` in the journal's folder): the inputs as the
/// job's first run saw them, the settings that change what is sent, the size of each file's share of the state
/// file, how many runs there were, and, once a run finished the job, its report and exit status.
///
/// `decide` is the journal's one judgement about a new run, a pure function tested without files.
public struct JournalManifest: Codable, Hashable, Sendable {
    /// An input file as the job saw it.
    public struct Input: Codable, Hashable, Sendable {
        public var path: String
        public var bytes: Int
        /// SHA-256 of the whole file, hex.
        public var sha256: String

        public init(path: String, bytes: Int, sha256: String) {
            self.path = path
            self.bytes = bytes
            self.sha256 = sha256
        }
    }

    /// How the job ended.
    public struct Finish: Codable, Hashable, Sendable {
        /// 0 when every row was valid and delivered, 1 when some row was refused or left uncertain.
        public var exitStatus: Int32
        /// The whole job's report.
        public var report: JobReport

        public init(exitStatus: Int32, report: JobReport) {
            self.exitStatus = exitStatus
            self.report = report
        }
    }

    /// What a run does with the journal it is given.
    public enum Decision: Hashable, Sendable {
        /// No job in the journal (or one that never got past validation): start one.
        case start
        /// An unfinished job with the same inputs: send only the rows without a settled outcome.
        case resume
        /// The job finished: send nothing, exit with its status.
        case finished(Finish)
        /// The journal holds another job, or an input changed: refuse, naming what differs.
        case refuse(String)
    }

    public static let currentVersion = 1

    public var version = Self.currentVersion
    public var inputs: [Input]
    /// The options that change what is sent (protocol, gateway, payload hash, format, expiry, partition, …), by
    /// name.
    public var settings: [String: String]
    /// Per input file, the lines it has in the state file.
    public var lineCounts: [Int]
    /// Runs of the job so far, this one included.
    public var runs = 1
    public var finish: Finish?

    public init(inputs: [Input], settings: [String: String], lineCounts: [Int]) {
        self.inputs = inputs
        self.settings = settings
        self.lineCounts = lineCounts
    }

    /// What a run with `inputs` and `settings` does with a journal that holds `stored` (nil: nothing).
    ///
    /// An input is compared by path, size and hash; a file that changed is named. Settings are compared by
    /// name and value; the first that differs is named.
    public static func decide(
        stored: JournalManifest?,
        inputs: [Input],
        settings: [String: String],
        directory: String
    ) -> Decision {
        guard let stored else { return .start }
        guard stored.version == Self.currentVersion else {
            return .refuse("--journal \(directory) was written by another version of the journal (\(stored.version))")
        }
        let storedPaths = stored.inputs.map(\.path)
        let paths = inputs.map(\.path)
        guard storedPaths == paths else {
            return .refuse(
                "--journal \(directory) holds a job over other token files (\(storedPaths.joined(separator: ", "))), "
                    + "not \(paths.joined(separator: ", ")): name another folder, or the same files"
            )
        }
        for (old, new) in zip(stored.inputs, inputs) where old != new {
            return .refuse(
                "\(new.path) changed since the job in --journal \(directory) started "
                    + "(\(old.bytes) bytes, SHA-256 \(old.sha256.prefix(16))…; now \(new.bytes) bytes, "
                    + "\(new.sha256.prefix(16))…): restore it, or start a new job in another folder"
            )
        }
        for name in Set(stored.settings.keys).union(settings.keys).sorted()
        where stored.settings[name] != settings[name] {
            return .refuse(
                "--journal \(directory) holds a job sent with \(name) \(stored.settings[name] ?? "(none)"), "
                    + "not \(settings[name] ?? "(none)"): run it with the same options, or start a new job in "
                    + "another folder"
            )
        }
        if let finish = stored.finish { return .finished(finish) }
        return .resume
    }
}
