import SalvoBinary
import SalvoRows

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
        /// SHA-256 of the whole file, hex: a payload template's, and an input's in journals made before inputs were
        /// fingerprinted with XXH64; empty otherwise.
        public var sha256: String
        /// XXH64 of the whole file, 16 hex digits: an input's fingerprint in journals made after SHA-256 and before
        /// `xxh64Pieces` (a first run that ended before it was read left it nil).
        public var xxh64: String?
        /// A new job's fingerprint of an input, 16 hex digits: XXH64 of the XXH64 digests of the file's pieces of
        /// `InputFingerprints.fingerprintPiece` bytes in order, each digest as 8 bytes, little-endian. The pieces are hashed
        /// on every core at once, in the read that counts the file's lines (`InputFingerprints.scan`), so a new job's
        /// manifest holds it from the first write; nil in journals made before it.
        public var xxh64Pieces: String?
        /// The file's modification time (nanoseconds since 1970) when the job started: with the size, what a run
        /// compares for a manifest that holds no fingerprint (a first run of an earlier build, which hashed beside the
        /// sending, that ended before the hash was read).
        public var modified: Int?

        public init(
            path: String,
            bytes: Int,
            sha256: String,
            xxh64: String? = nil,
            xxh64Pieces: String? = nil,
            modified: Int? = nil
        ) {
            self.path = path
            self.bytes = bytes
            self.sha256 = sha256
            self.xxh64 = xxh64
            self.xxh64Pieces = xxh64Pieces
            self.modified = modified
        }

        /// Whether a fingerprint of the file's contents is recorded (any kind).
        public var isFingerprinted: Bool { !self.sha256.isEmpty || self.xxh64 != nil || self.xxh64Pieces != nil }

        /// Whether `other` (the file as it is now, fingerprinted) is this file unchanged: the same size and the same
        /// fingerprint of the oldest kind recorded here (SHA-256 where this holds one, else XXH64 of the whole file,
        /// else XXH64 of its pieces), or, with none recorded, the same size and modification time.
        public func isUnchanged(_ other: Input) -> Bool {
            guard self.path == other.path, self.bytes == other.bytes else { return false }
            if !self.sha256.isEmpty { return self.sha256 == other.sha256 }
            if let recorded = self.xxh64 { return recorded == other.xxh64 }
            if let recorded = self.xxh64Pieces { return recorded == other.xxh64Pieces }
            return self.modified != nil && self.modified == other.modified
        }

        /// The recorded fingerprint for messages: its kind and its first digits, or the modification time.
        var fingerprintDescription: String {
            if !self.sha256.isEmpty { return "SHA-256 \(self.sha256.prefix(16))…" }
            if let xxh64 = self.xxh64 { return "XXH64 \(xxh64)" }
            if let pieces = self.xxh64Pieces { return "XXH64 of its pieces \(pieces)" }
            return "modified at \(self.modified ?? 0) ns"
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

    /// The journal's layout, which a run resumes only from its own: the state file is keyed by the rows' line
    /// numbers, so a build that numbers lines otherwise would give each row a neighbour's state. 2: a bare CR ends
    /// a line (before, only LF and CRLF did). 3: the state file starts with a header (`RowJournalHeader`: magic,
    /// layout, the job's id, the row count) that is checked before any row is trusted.
    public static let currentVersion = 3

    public var version = Self.currentVersion
    public var inputs: [Input]
    /// The payload template files the job may use (`--payload-template`, every file of `--payload-dir`); nil in a
    /// manifest written before templates were recorded (taken as none).
    public var payloadFiles: [Input]?
    /// The options that change what is sent (protocol, gateway, payload hash, format, expiry, partition, …), by
    /// name.
    public var settings: [String: String]
    /// Per input file, the lines it has in the state file.
    public var lineCounts: [Int]
    /// The job's identity (`JournalJobID`, 32 hex digits), made when the job starts and written into its state
    /// file's header too; nil until then (and in a manifest of a version before 3).
    public var job: String?
    /// Runs of the job so far, this one included.
    public var runs = 1
    public var finish: Finish?

    public init(inputs: [Input], settings: [String: String], lineCounts: [Int], payloadFiles: [Input] = []) {
        self.inputs = inputs
        self.settings = settings
        self.lineCounts = lineCounts
        self.payloadFiles = payloadFiles.isEmpty ? nil : payloadFiles
    }

    /// The settings that name the payload templates: compared before the templates' files, so that another folder
    /// is named as such rather than file by file.
    static let templateSettings = ["--payload-template", "--payload-dir"]

    /// What a run with `inputs`, `payloadFiles` and `settings` does with a journal that holds `stored` (nil:
    /// nothing).
    ///
    /// An input is compared by path, size and hash; a file that changed is named. The payload template files
    /// likewise: one changed, added or removed is named. Settings are compared by name and value; the first that
    /// differs is named.
    public static func decide(
        stored: JournalManifest?,
        inputs: [Input],
        payloadFiles: [Input] = [],
        settings: [String: String],
        directory: String
    ) -> Decision {
        guard let stored else { return .start }
        guard stored.version == Self.currentVersion else {
            return .refuse(
                "--journal \(directory) holds a job begun by another build of salvo (journal version "
                    + "\(stored.version), this build's is \(Self.currentVersion)), whose journal this build does not "
                    + "read (its rows would be numbered or laid out otherwise): finish the job with the build that "
                    + "started it, or begin it again here with --journal-restart (rows already delivered may be sent "
                    + "again), or start it afresh in another folder"
            )
        }
        let storedPaths = stored.inputs.map(\.path)
        let paths = inputs.map(\.path)
        guard storedPaths == paths else {
            return .refuse(
                "--journal \(directory) holds a job over other token files (\(storedPaths.joined(separator: ", "))), "
                    + "not \(paths.joined(separator: ", ")): name another folder, or the same files"
            )
        }
        for (old, new) in zip(stored.inputs, inputs) where !old.isUnchanged(new) {
            return .refuse(Self.changed(old, new, directory: directory))
        }
        if let refusal = Self.differingSetting(stored.settings, settings, among: Self.templateSettings, directory) {
            return .refuse(refusal)
        }
        let storedFiles = stored.payloadFiles ?? []
        for old in storedFiles {
            guard let new = payloadFiles.first(where: { $0.path == old.path }) else {
                return .refuse(
                    "\(old.path), a payload template of the job in --journal \(directory), is gone: restore it, or "
                        + "start a new job in another folder"
                )
            }
            if !old.isUnchanged(new) { return .refuse(Self.changed(old, new, directory: directory)) }
        }
        for new in payloadFiles where !storedFiles.contains(where: { $0.path == new.path }) {
            return .refuse(
                "\(new.path) is a payload template the job in --journal \(directory) did not have (rows would "
                    + "take it): remove it, or start a new job in another folder"
            )
        }
        let names = Set(stored.settings.keys).union(settings.keys).sorted()
        if let refusal = Self.differingSetting(stored.settings, settings, among: names, directory) {
            return .refuse(refusal)
        }
        if let finish = stored.finish { return .finished(finish) }
        return .resume
    }

    private static func changed(_ old: Input, _ new: Input, directory: String) -> String {
        "\(new.path) changed since the job in --journal \(directory) started "
            + "(\(old.bytes) bytes, "
            + old.fingerprintDescription
            + "; now \(new.bytes) bytes, "
            + Self.comparable(new, to: old).fingerprintDescription
            + "): restore it, or start a new job in another folder"
    }

    /// `new` with only the fingerprint of the kind `old` recorded (what `isUnchanged` compared), for a message.
    private static func comparable(_ new: Input, to old: Input) -> Input {
        var shown = new
        if !old.sha256.isEmpty {
            shown.xxh64 = nil
            shown.xxh64Pieces = nil
        } else if old.xxh64 != nil {
            shown.sha256 = ""
            shown.xxh64Pieces = nil
        } else if old.xxh64Pieces != nil {
            shown.sha256 = ""
            shown.xxh64 = nil
        } else {
            shown.sha256 = ""
            shown.xxh64 = nil
            shown.xxh64Pieces = nil
        }
        return shown
    }

    /// The refusal for the first of `names` whose value differs, or nil.
    private static func differingSetting(
        _ stored: [String: String],
        _ settings: [String: String],
        among names: [String],
        _ directory: String
    ) -> String? {
        for name in names where stored[name] != settings[name] {
            return "--journal \(directory) holds a job sent with \(name) \(stored[name] ?? "(none)"), "
                + "not \(settings[name] ?? "(none)"): run it with the same options, or start a new job in "
                + "another folder"
        }
        return nil
    }
}
