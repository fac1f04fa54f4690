import Crypto
import Dispatch
import Foundation
import SalvoEngine

/// A job's journal folder (`send --journal DIR`): `job.json` (the `JournalManifest`), `rows.state` (one byte per
/// input line, the `RowJournal`) and `rejects.log` (refused rows with their reasons). The files and the syncing;
/// every decision is `JournalManifest.decide`'s and `JournalTally`'s.
public final class JobJournal: @unchecked Sendable {
    public let directory: String
    public private(set) var manifest: JournalManifest
    /// The rows' states; nil for a finished job, which sends nothing.
    public let rows: RowJournal?
    /// Syncs the rows and the log every `syncInterval` while the job runs (confined to its own queue).
    private var timer: DispatchSourceTimer?
    private let queue = DispatchQueue(label: "salvo.journal")
    /// How often the marks reach the disk: a machine that crashes loses at most this much of them.
    public static let syncInterval = DispatchTimeInterval.milliseconds(200)

    public static func manifestPath(_ directory: String) -> String { directory + "/job.json" }
    public static func statePath(_ directory: String) -> String { directory + "/rows.state" }
    public static func logPath(_ directory: String) -> String { directory + "/rejects.log" }

    private init(directory: String, manifest: JournalManifest, rows: RowJournal?) {
        self.directory = directory
        self.manifest = manifest
        self.rows = rows
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
            throw JobError(.input, "--journal \(directory): cannot read \(path): \(error)")
        }
    }

    /// The input files with their sizes and SHA-256 hashes.
    public static func fingerprint(_ files: [String]) throws(JobError) -> [JournalManifest.Input] {
        try Self.fingerprintAndCountLines(files).inputs
    }

    /// The input files with their sizes and SHA-256 hashes, and per file a bound on the line numbers its rows
    /// can have (its line ends plus two: one more than the last line's number), counted in the same read.
    static func fingerprintAndCountLines(
        _ files: [String]
    ) throws(JobError) -> (inputs: [JournalManifest.Input], lineCounts: [Int]) {
        var inputs: [JournalManifest.Input] = []
        var lineCounts: [Int] = []
        for path in files {
            guard let handle = FileHandle(forReadingAtPath: path) else {
                throw JobError(.input, "\(path): cannot open: \(String(cString: strerror(errno)))")
            }
            defer { try? handle.close() }
            var hash = SHA256()
            var bytes = 0
            var lineEnds = 0
            do {
                while let chunk = try handle.read(upToCount: 1 << 22), !chunk.isEmpty {
                    hash.update(data: chunk)
                    bytes += chunk.count
                    lineEnds += chunk.withUnsafeBytes { Self.lineEnds($0) }
                }
            } catch {
                throw JobError(.input, "\(path): cannot read: \(error)")
            }
            let digest = hash.finalize().map { String(format: "%02x", $0) }.joined()
            inputs.append(JournalManifest.Input(path: path, bytes: bytes, sha256: digest))
            lineCounts.append(lineEnds + 2)
        }
        return (inputs, lineCounts)
    }

    /// The line feeds in `bytes`, eight bytes at a time.
    static func lineEnds(_ bytes: UnsafeRawBufferPointer) -> Int {
        var count = 0
        var index = 0
        let words = bytes.count / 8
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        while index < words {
            // A zero byte of `word ^ 0x0a…` is a line feed: the exact test (no false positives).
            let word = bytes.loadUnaligned(fromByteOffset: index * 8, as: UInt64.self) ^ (ones &* 0x0a)
            let low7 = (word & ~highs) &+ ~highs
            count += (~(low7 | word | ~highs)).nonzeroBitCount
            index += 1
        }
        for offset in (words * 8)..<bytes.count where bytes[offset] == 0x0a { count += 1 }
        return count
    }

    /// SHA-256 of `bytes`, hex (the payload's entry among the settings).
    public static func sha256(_ bytes: [UInt8]) -> String {
        SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined()
    }

    /// Starts a new job in `directory` (created when missing): earlier state files are removed, the rows' file
    /// is made for `manifest.lineCounts`, and the manifest is written.
    public static func start(_ directory: String, manifest: JournalManifest) throws(JobError) -> JobJournal {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw JobError(.output, "--journal \(directory): cannot create the folder: \(error.localizedDescription)")
        }
        unlink(Self.statePath(directory))
        unlink(Self.logPath(directory))
        let rows = try RowJournal(
            statePath: Self.statePath(directory),
            logPath: Self.logPath(directory),
            lineCounts: manifest.lineCounts
        )
        let journal = JobJournal(directory: directory, manifest: manifest, rows: rows)
        try journal.save()
        return journal
    }

    /// Opens the unfinished job in `directory` for another run, with its rows' states mapped as `rows`.
    public static func resume(
        _ directory: String,
        manifest: JournalManifest,
        rows: RowJournal
    ) throws(JobError) -> JobJournal {
        var manifest = manifest
        manifest.runs += 1
        let journal = JobJournal(directory: directory, manifest: manifest, rows: rows)
        try journal.save()
        return journal
    }

    /// The finished job in `directory`: nothing to send.
    public static func finished(_ directory: String, manifest: JournalManifest) -> JobJournal {
        JobJournal(directory: directory, manifest: manifest, rows: nil)
    }

    /// The refused rows' reasons, as the log holds them.
    public func rejectLog() -> JournalRejectLog {
        let text = (try? String(contentsOfFile: Self.logPath(self.directory), encoding: .utf8)) ?? ""
        return JournalRejectLog(text: text)
    }

    /// Syncs the marks every `syncInterval` until `stopSyncing()`.
    public func startSyncing() {
        guard let rows = self.rows, self.timer == nil else { return }
        let timer = DispatchSource.makeTimerSource(queue: self.queue)
        timer.schedule(deadline: .now() + Self.syncInterval, repeating: Self.syncInterval)
        timer.setEventHandler { rows.sync() }
        timer.resume()
        self.timer = timer
    }

    /// Stops the periodic sync and syncs once more.
    public func stopSyncing() {
        self.timer?.cancel()
        self.timer = nil
        self.queue.sync {}
        self.rows?.sync()
    }

    /// Records that the job finished, with its report and exit status.
    public func finish(_ finish: JournalManifest.Finish) throws(JobError) {
        self.stopSyncing()
        self.manifest.finish = finish
        try self.save()
    }

    private func save() throws(JobError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let data: Data
        do {
            data = try encoder.encode(self.manifest)
        } catch {
            throw JobError(.output, "--journal \(self.directory): cannot encode the manifest: \(error)")
        }
        let writer = try AtomicFileWriter(path: Self.manifestPath(self.directory))
        try writer.write(String(decoding: data, as: UTF8.self))
        try writer.commit()
    }
}

/// The input files' sizes, SHA-256 hashes and line ends, read on a thread of their own from the moment it is made.
final class FileFingerprints: @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)
    // Written once by the hashing thread before `done` is signalled, read after waiting on it.
    private var result: Result<(inputs: [JournalManifest.Input], lineCounts: [Int]), JobError> = .success(([], []))

    init(_ files: [String]) {
        let thread = Thread { [self] in
            do throws(JobError) {
                self.result = .success(try JobJournal.fingerprintAndCountLines(files))
            } catch {
                self.result = .failure(error)
            }
            self.done.signal()
        }
        thread.start()
    }

    /// Waits for the hashes.
    func value() throws(JobError) -> [JournalManifest.Input] {
        self.done.wait()
        self.done.signal()
        return try self.result.get().inputs
    }

    /// Waits for the read, and returns per file a bound on its rows' line numbers (the journal's size).
    func lineCounts() throws(JobError) -> [Int] {
        self.done.wait()
        self.done.signal()
        return try self.result.get().lineCounts
    }
}
