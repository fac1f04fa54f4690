import APNSWire
import Crypto
import Dispatch
import Foundation
import SalvoBinary
import SalvoRows

#if canImport(Glibc)
import Glibc
#endif

/// A job's journal folder (`send --journal DIR`): `job.json` (the `JournalManifest`), `rows.state` (a header, then
/// one byte per input line, the `RowJournal`), `rejects.log` (refused rows with their reasons), `checkpoint.json`
/// (the `InputCheckpoint` before which every row is done with, so that a resumed run starts reading there) and
/// `journal.lock` (the `JournalLock` a run holds for its whole life). The files and the syncing; every decision is
/// `JournalManifest.decide`'s and `JournalTally`'s.
public final class JobJournal: @unchecked Sendable {
    public let directory: String
    /// The manifest as last saved (read on `queue`, where `finish` records the job's end).
    public var manifest: JournalManifest { self.queue.sync { self.current } }
    private var current: JournalManifest
    /// The rows' states; nil for a finished job, which sends nothing.
    public let rows: RowJournal?
    /// This run's hold on the folder, released when the journal is.
    public let lock: JournalLock?
    /// Syncs the rows and the log every `syncInterval` while the job runs. Confined to `queue`: made, cancelled and
    /// cleared only there (`startSyncing` and `stopSyncing` may be called from any thread).
    private var timer: DispatchSourceTimer?
    /// Where the rows' source is settled up to (`TokenSource.settledCheckpoint`), asked at each sync; and the last
    /// checkpoint written (both confined to `queue` while syncing).
    private var checkpoint: (@Sendable () -> InputCheckpoint?)?
    private var writtenCheckpoint: InputCheckpoint?
    private let queue = DispatchQueue(label: "salvo.journal")
    /// How often the marks reach the disk: a machine that crashes loses at most this much of them.
    public static let syncInterval = DispatchTimeInterval.milliseconds(200)

    public static func manifestPath(_ directory: String) -> String { directory + "/job.json" }
    public static func statePath(_ directory: String) -> String { directory + "/rows.state" }
    public static func logPath(_ directory: String) -> String { directory + "/rejects.log" }
    public static func checkpointPath(_ directory: String) -> String { directory + "/checkpoint.json" }

    private init(directory: String, manifest: JournalManifest, rows: RowJournal?, lock: JournalLock?) {
        self.directory = directory
        self.current = manifest
        self.rows = rows
        self.lock = lock
    }

    deinit { self.timer?.cancel() }

    /// The manifest in `directory`, nil when there is none.
    ///
    /// - Throws: `JobError(.input)` for a manifest that cannot be read or parsed.
    public static func loadManifest(_ directory: String) throws(JobError) -> JournalManifest? {
        let path = Self.manifestPath(directory)
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        do {
            let data = try Data(contentsOf: URL(fileURLWithPath: path))
            return try JSONDecoder().decode(JournalManifest.self, from: data)
        } catch {
            throw JobError(.input, "--journal \(directory): cannot read \(path): \(error). " + Self.advice(directory))
        }
    }

    /// What to do about a journal that cannot be trusted: nothing was sent.
    public static func advice(_ directory: String) -> String {
        "Nothing was sent. Run again with --journal-restart to begin the job again in this folder (rows already "
            + "delivered may be sent again), or see what can be trusted with `salvo journal verify \(directory)`"
    }

    /// The state file of the unfinished job of `manifest` in `directory`, checked whole before any row of it is
    /// trusted (`RowJournal.open`).
    ///
    /// - Throws: `JobError(.input)` saying what is wrong and what to do when the file is missing, of another job,
    ///   the wrong size or holds a byte that is not a state; `JobError(.output)` when it cannot be opened.
    public static func openRows(_ directory: String, manifest: JournalManifest) throws(JobError) -> RowJournal {
        guard let text = manifest.job, let job = JournalJobID(hex: text) else {
            throw JobError(
                .input,
                "--journal \(directory) is damaged: \(Self.manifestPath(directory)) names no job id. "
                    + Self.advice(directory)
            )
        }
        do {
            return try RowJournal.open(
                statePath: Self.statePath(directory),
                logPath: Self.logPath(directory),
                lineCounts: manifest.lineCounts,
                job: job
            )
        } catch {
            guard error.code == .input else { throw error }
            throw JobError(.input, "--journal \(directory) is damaged: \(error.message). " + Self.advice(directory))
        }
    }

    /// SHA-256 of `bytes`, hex (the payload's entry among the settings).
    public static func sha256(_ bytes: [UInt8]) -> String {
        Hex.string(SHA256.hash(data: bytes))
    }

    /// Starts a new job in `directory` (created when missing): earlier state files are removed, the rows' file
    /// is made for `manifest.lineCounts` with a header naming the job (a new id when the manifest has none), and the
    /// manifest is written.
    public static func start(
        _ directory: String,
        manifest: JournalManifest,
        lock: JournalLock? = nil
    ) throws(JobError) -> JobJournal {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw JobError(.output, "--journal \(directory): cannot create the folder: \(error.localizedDescription)")
        }
        unlink(Self.statePath(directory))
        unlink(Self.logPath(directory))
        unlink(Self.checkpointPath(directory))
        var manifest = manifest
        let job = manifest.job.flatMap(JournalJobID.init(hex:)) ?? .random()
        manifest.job = job.description
        let rows = try RowJournal.create(
            statePath: Self.statePath(directory),
            logPath: Self.logPath(directory),
            lineCounts: manifest.lineCounts,
            job: job
        )
        let journal = JobJournal(directory: directory, manifest: manifest, rows: rows, lock: lock)
        try journal.save()
        return journal
    }

    /// Opens the unfinished job in `directory` for another run, with its rows' states mapped as `rows`.
    public static func resume(
        _ directory: String,
        manifest: JournalManifest,
        rows: RowJournal,
        lock: JournalLock? = nil
    ) throws(JobError) -> JobJournal {
        var manifest = manifest
        manifest.runs += 1
        let journal = JobJournal(directory: directory, manifest: manifest, rows: rows, lock: lock)
        try journal.save()
        return journal
    }

    /// The finished job in `directory`: nothing to send.
    public static func finished(_ directory: String, manifest: JournalManifest, lock: JournalLock? = nil) -> JobJournal
    {
        JobJournal(directory: directory, manifest: manifest, rows: nil, lock: lock)
    }

    /// The refused rows' reasons, as the log holds them.
    public func rejectLog() -> JournalRejectLog {
        let text = (try? String(contentsOfFile: Self.logPath(self.directory), encoding: .utf8)) ?? ""
        return JournalRejectLog(text: text)
    }

    /// Syncs the marks every `syncInterval` until `stopSyncing()`; with `checkpoint`, each sync also records the
    /// checkpoint it gives, when it moved.
    public func startSyncing(checkpoint: (@Sendable () -> InputCheckpoint?)? = nil) {
        guard self.rows != nil else { return }
        self.queue.sync {
            guard self.timer == nil else { return }
            self.checkpoint = checkpoint
            let timer = DispatchSource.makeTimerSource(queue: self.queue)
            timer.schedule(deadline: .now() + Self.syncInterval, repeating: Self.syncInterval)
            timer.setEventHandler { [weak self] in self?.sync() }
            timer.resume()
            self.timer = timer
        }
    }

    /// Stops the periodic sync and syncs once more.
    public func stopSyncing() {
        self.queue.sync {
            self.timer?.cancel()
            self.timer = nil
            self.sync()
        }
    }

    /// Syncs the marks (and the checkpoint) now, leaving the periodic sync as it is: for a caller that is not the
    /// job's (the record a second signal's deadline writes), which must not stop what the job's thread started.
    public func syncNow() {
        self.queue.sync { self.sync() }
    }

    /// On `queue`: the checkpoint as the marks are now, the marks to the disk, then the checkpoint (so that one on
    /// the disk never passes a mark that is not).
    private func sync() {
        dispatchPrecondition(condition: .onQueue(self.queue))
        let point = self.checkpoint?()
        self.rows?.sync()
        guard let point, point != self.writtenCheckpoint else { return }
        // A checkpoint that cannot be written costs a later run time, never a row: the job goes on.
        if (try? Self.write(point, job: self.current, to: self.directory)) != nil { self.writtenCheckpoint = point }
    }

    /// Removes the checkpoint (it proved wrong): the next run reads the input from its top.
    public func discardCheckpoint() {
        self.queue.sync {
            self.checkpoint = nil
            unlink(Self.checkpointPath(self.directory))
        }
    }

    /// The checkpoint file's contents: the checkpoint, and the job it belongs to.
    private struct CheckpointFile: Codable {
        /// `job(of:)` of the manifest the checkpoint was written for.
        var job: String
        var checkpoint: InputCheckpoint
    }

    /// A job's identity for its checkpoint: its inputs' hashes and its state file's shape.
    private static func job(of manifest: JournalManifest) -> String {
        // The oldest kind of fingerprint an input has (so a journal of an earlier build keeps its checkpoints'
        // identity).
        let fingerprints = manifest.inputs.map { input in
            if !input.sha256.isEmpty { return input.sha256 }
            if let whole = input.xxh64 { return "xxh64:\(whole)" }
            return input.xxh64Pieces.map { "xxh64-pieces:\($0)" } ?? ""
        }
        return Self.sha256(Array((fingerprints + manifest.lineCounts.map(String.init)).joined(separator: ",").utf8))
    }

    private static func write(_ point: InputCheckpoint, job manifest: JournalManifest, to directory: String) throws {
        let data = try JSONEncoder().encode(CheckpointFile(job: Self.job(of: manifest), checkpoint: point))
        let writer = try AtomicFileWriter(path: Self.checkpointPath(directory))
        try writer.write(String(decoding: data, as: UTF8.self))
        try writer.commit()
    }

    /// The checkpoint in `directory` written for the job of `manifest`; nil when there is none, it cannot be read,
    /// or it is another job's (a run that finds none reads the input from its top).
    public static func loadCheckpoint(_ directory: String, manifest: JournalManifest) -> InputCheckpoint? {
        guard let data = FileManager.default.contents(atPath: Self.checkpointPath(directory)),
            let file = try? JSONDecoder().decode(CheckpointFile.self, from: data),
            file.job == Self.job(of: manifest)
        else { return nil }
        return file.checkpoint
    }

    /// Records that the job finished, with its report and exit status.
    ///
    /// - Parameter gate: the manifest is written through it, completing the job's record (`OutputGate`); once it is
    ///   closed the job is not recorded finished.
    /// - Returns: false when the gate refused it.
    @discardableResult
    public func finish(_ finish: JournalManifest.Finish, through gate: OutputGate? = nil) throws(JobError) -> Bool {
        self.stopSyncing()
        let record = { () throws(JobError) -> Void in
            let saved: Result<Void, JobError> = self.queue.sync {
                self.current.finish = finish
                return Result { () throws(JobError) in try self.save() }
            }
            try saved.get()
        }
        guard let gate else {
            try record()
            return true
        }
        return try gate.pass(completing: true, record)
    }

    /// Writes the manifest; on `queue`, or before the journal is shared.
    private func save() throws(JobError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let data: Data
        do {
            data = try encoder.encode(self.current)
        } catch {
            throw JobError(.output, "--journal \(self.directory): cannot encode the manifest: \(error)")
        }
        let writer = try AtomicFileWriter(path: Self.manifestPath(self.directory))
        try writer.write(String(decoding: data, as: UTF8.self))
        try writer.commit()
    }
}
