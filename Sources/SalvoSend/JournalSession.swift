import Foundation
import SalvoRows

/// One run of a journaled job, from the journal's lock to the decision: a new job started, an earlier run resumed,
/// a finished job (nothing to send), or refused (a `JobError`). It holds the lock from before the manifest is read,
/// owns the journal it opens, and attaches the journal's rows to the token source, so that reading tallies what an
/// earlier run settled.
///
/// Two steps around the source's opening: `init` locks, reads the manifest and starts hashing the inputs (a finished
/// job ends there); `journal(opened:)` starts or resumes once the first rows are read (a new job's state file is
/// sized from its line ends).
struct JournalSession {
    /// The journal of a finished job: nothing is sent, and the run returns its report.
    let finished: JobJournal?

    private let options: SendJournal
    private let request: SendRequest
    private let source: TokenSource
    private let lock: JournalLock
    private let stored: JournalManifest?
    private let hashing: InputFingerprints.Reading
    /// The state file of the job being resumed, attached to the source already.
    private let rows: RowJournal?

    /// - Parameter stop: a stop requested while the lock is awaited (`--wait-for-journal`) ends the wait.
    init(_ options: SendJournal, request: SendRequest, source: TokenSource, stop: JobStop?) throws(JobError) {
        self.options = options
        self.request = request
        self.source = source
        // One run per journal, from before the manifest is read until the run's record is written (the lock goes
        // with the journal; a refusal releases it).
        var stopped: (@Sendable () -> String?)?
        if let stop { stopped = { stop.reason } }
        self.lock = try JournalLock.acquire(options.directory, waitSeconds: options.waitSeconds, stopped: stopped)
        // A restart begins the job again over whatever the folder holds (a damaged or foreign journal included).
        let stored = options.restart ? nil : try JobJournal.loadManifest(options.directory)
        self.stored = stored
        // The files are fingerprinted beside the opening (and, for a new job, their line ends counted in the same
        // read: they size its state file). Nothing is sent before the fingerprints match: a changed file never goes
        // against an old journal. A journal that recorded its inputs' SHA-256 or whole-file XXH64 (made by an earlier
        // build) is compared by those.
        self.hashing = InputFingerprints.Reading(
            request.files,
            spools: request.inputSpools,
            countLines: stored == nil,
            sha256: stored?.inputs.contains { !$0.sha256.isEmpty } == true,
            whole: stored?.inputs.contains { $0.xxh64 != nil } == true
        )
        var finished: JobJournal?
        var rows: RowJournal?
        if let stored, stored.finish != nil {
            if case .refuse(let message) = JournalManifest.decide(
                stored: stored,
                inputs: try self.hashing.value(),
                payloadFiles: request.payloadFiles,
                settings: request.journalSettings(options),
                directory: options.directory
            ) {
                throw JobError(.input, message)
            }
            finished = JobJournal.finished(options.directory, manifest: stored, lock: self.lock)
        } else if let stored, stored.version == JournalManifest.currentVersion {
            // Probably a resume: validation tallies what the journal holds (reading it only), as the rows are taken;
            // the state file is checked whole first (a damaged or foreign one is refused, nothing sent).
            let opened = try JobJournal.openRows(options.directory, manifest: stored)
            source.attach(opened, resendWritten: request.onUncertain == .resend)
            // Reading starts where every row before is done with (from the last sync), not at the top.
            if let checkpoint = JobJournal.loadCheckpoint(options.directory, manifest: stored) {
                source.resume(at: checkpoint)
            }
            rows = opened
        }
        self.finished = finished
        self.rows = rows
    }

    /// The journal of this run, once the source has opened with `summary`: a new job started, or the stored one
    /// resumed.
    ///
    /// - Throws: `JobError(.input)` when the stored job cannot be resumed with these inputs and settings.
    func journal(opened summary: TokenSource.Summary) throws(JobError) -> JobJournal {
        let settings = self.request.journalSettings(self.options)
        guard let stored = self.stored else {
            // A new job: its manifest holds the files' fingerprints from its first write (read with the line ends
            // that size its state file).
            let lineCounts = summary.isFinal ? summary.lineCounts : try self.hashing.lineCounts()
            let manifest = JournalManifest(
                inputs: try self.hashing.value().map { input in
                    var input = input
                    input.modified = Self.modificationTime(input.path, spools: self.request.inputSpools)
                    return input
                },
                settings: settings,
                lineCounts: lineCounts,
                payloadFiles: self.request.payloadFiles
            )
            let started = try JobJournal.start(self.options.directory, manifest: manifest, lock: self.lock)
            self.source.attach(started.rows!, resendWritten: self.request.onUncertain == .resend)
            return started
        }
        let inputs = try self.hashing.value().map { input in
            var input = input
            input.modified = Self.modificationTime(input.path, spools: self.request.inputSpools)
            return input
        }
        switch JournalManifest.decide(
            stored: stored,
            inputs: inputs,
            payloadFiles: self.request.payloadFiles,
            settings: settings,
            directory: self.options.directory
        ) {
        case .refuse(let message):
            throw JobError(.input, message)
        case .resume:
            guard let rows = self.rows else { break }
            // The manifest keeps its first run's modification times; a fingerprint the first run (of an earlier
            // build, which read it beside the sending) did not finish is recorded now.
            var manifest = stored
            for index in manifest.inputs.indices where !manifest.inputs[index].isFingerprinted {
                manifest.inputs[index].xxh64Pieces = inputs[index].xxh64Pieces
            }
            return try JobJournal.resume(self.options.directory, manifest: manifest, rows: rows, lock: self.lock)
        case .start, .finished:
            break
        }
        // Not reached: with a stored job, `decide` resumes or refuses (a finished one ended in `init`), and a job of
        // this version has its rows open.
        throw JobError(.input, "--journal \(self.options.directory): the job there cannot be resumed or started")
    }

    /// The file's modification time in nanoseconds since 1970, nil when it cannot be read.
    static func modificationTime(_ path: String, spools: InputSpools) -> Int? {
        var status = stat()
        guard stat(spools.path(of: path), &status) == 0 else { return nil }
        return Int(status.st_mtim.tv_sec) * 1_000_000_000 + Int(status.st_mtim.tv_nsec)
    }
}
