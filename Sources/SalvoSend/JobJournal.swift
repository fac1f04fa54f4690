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

    /// The input files with their sizes and fingerprints: XXH64 of their pieces (`JournalManifest.Input.xxh64Pieces`,
    /// what a new job records); with `sha256` their SHA-256 and with `whole` the XXH64 of each whole file too (what
    /// journals of earlier builds recorded).
    public static func fingerprint(
        _ files: [String],
        spools: InputSpools = InputSpools(),
        sha256: Bool = false,
        whole: Bool = false
    ) throws(JobError) -> [JournalManifest.Input] {
        try Self.addingWholeFingerprints(
            to: Self.scan(files, spools: spools, countLines: false).inputs,
            spools: spools,
            sha256: sha256,
            whole: whole
        )
    }

    /// `inputs` (as `scan` fingerprinted them) with their files' SHA-256 (`sha256`) and whole-file XXH64 (`whole`) as
    /// well: a second read of each file, one thread, for the manifest of a journal an earlier build made.
    static func addingWholeFingerprints(
        to inputs: [JournalManifest.Input],
        spools: InputSpools,
        sha256: Bool,
        whole: Bool
    ) throws(JobError) -> [JournalManifest.Input] {
        guard sha256 || whole else { return inputs }
        let wholeFiles = try Self.wholeFingerprints(inputs.map(\.path), spools: spools, sha256: sha256)
        var inputs = inputs
        for index in inputs.indices {
            inputs[index].sha256 = wholeFiles[index].sha256
            if whole { inputs[index].xxh64 = wholeFiles[index].xxh64 }
        }
        return inputs
    }

    /// The input files with their sizes, their XXH64 and (with `sha256`) their SHA-256, each file read whole in order
    /// by one thread: the fingerprints journals of earlier builds recorded.
    ///
    /// SHA-256, when asked for, runs straight over the read buffer (swift-crypto: BoringSSL, with the CPU's SHA
    /// extensions where it has them); XXH64 (`XXH64`) in the same pass.
    static func wholeFingerprints(
        _ files: [String],
        spools: InputSpools,
        sha256: Bool = false
    ) throws(JobError) -> [JournalManifest.Input] {
        var inputs: [JournalManifest.Input] = []
        for path in files {
            var hash = sha256 ? SHA256() : nil
            var fast = XXH64()
            let bytes = try Self.read(path, spools: spools) { piece in
                hash?.update(bufferPointer: piece)
                fast.update(piece)
            }
            inputs.append(
                JournalManifest.Input(
                    path: path,
                    bytes: bytes,
                    sha256: hash.map { Hex.string($0.finalize()) } ?? "",
                    xxh64: fast.hexDigest
                )
            )
        }
        return inputs
    }

    /// The size of the pieces whose digests `xxh64Pieces` hashes: part of what a recorded fingerprint means, so never
    /// to change; also what a scan reads on each core at a time.
    public static let fingerprintPiece = 8 << 20

    /// The input files with their sizes and fingerprints (`JournalManifest.Input.xxh64Pieces`) and, with `countLines`,
    /// per file a bound on the line numbers its rows can have (its line ends plus two: one more than the last line's
    /// number); without it, `lineCounts` is empty. One read of each file, its pieces on every core at once: nothing
    /// else runs yet (a new job waits for its line ends, which size its state file, a resumed one for the
    /// fingerprints), and a fingerprint read beside the sending took CPU the send and the gateway needed on the same
    /// cores (4 % of a 10 M-row job's time against 2 % in this read).
    static func scan(
        _ files: [String],
        spools: InputSpools = InputSpools(),
        countLines: Bool = true
    ) throws(JobError) -> (inputs: [JournalManifest.Input], lineCounts: [Int]) {
        var inputs: [JournalManifest.Input] = []
        var lineCounts: [Int] = []
        for path in files {
            let scanned = try Self.withDescriptor(path, spools: spools) {
                descriptor,
                size throws(JobError) -> Scanned in
                let piece = Self.fingerprintPiece
                let pieces = (size + piece - 1) / piece
                let slots = UnsafeMutableBufferPointer<Scanned>.allocate(capacity: max(pieces, 1))
                let errors = UnsafeMutableBufferPointer<JobError?>.allocate(capacity: max(pieces, 1))
                _ = slots.initialize(from: repeatElement(Scanned(), count: slots.count))
                _ = errors.initialize(from: repeatElement(nil, count: errors.count))
                defer {
                    slots.deinitialize().deallocate()
                    errors.deinitialize().deallocate()
                }
                // Each iteration reads its own piece into its own buffer and writes its own slots.
                nonisolated(unsafe) let results = slots
                nonisolated(unsafe) let failures = errors
                DispatchQueue.concurrentPerform(iterations: pieces) { index in
                    let start = index * piece
                    do throws(JobError) {
                        results[index] = try Self.scanPiece(
                            descriptor,
                            path,
                            from: start,
                            to: min(size, start + piece),
                            countLines: countLines
                        )
                    } catch {
                        failures[index] = error
                    }
                }
                if let failure = errors.prefix(pieces).lazy.compactMap({ $0 }).first { throw failure }
                var whole = Scanned()
                for result in slots.prefix(pieces) {
                    whole.bytes += result.bytes
                    whole.lineEnds += result.lineEnds
                }
                whole.digest = XXH64.ofPieces(slots.prefix(pieces).lazy.map(\.digest))
                return whole
            }
            inputs.append(
                JournalManifest.Input(
                    path: path,
                    bytes: scanned.bytes,
                    sha256: "",
                    xxh64Pieces: XXH64.hex(scanned.digest)
                )
            )
            if countLines { lineCounts.append(scanned.lineEnds + 2) }
        }
        return (inputs, lineCounts)
    }

    /// What a scan found in a piece of a file, or in the whole of it.
    private struct Scanned {
        var bytes = 0
        var lineEnds = 0
        /// The piece's XXH64; the whole file's `xxh64Pieces`.
        var digest: UInt64 = 0
    }

    /// Bytes `start..<end` of an open file, read in blocks into a buffer of this call's: their XXH64 and (with
    /// `countLines`) their line ends.
    private static func scanPiece(
        _ descriptor: Int32,
        _ path: String,
        from start: Int,
        to end: Int,
        countLines: Bool
    ) throws(JobError) -> Scanned {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.block, alignment: 64)
        defer { buffer.deallocate() }
        var lines = LineEnds()
        var hash = XXH64()
        if countLines && start > 0 {
            // Whether the byte before the piece is a CR (counted there; an LF first here completes it).
            let before = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<1])
            lines.afterCarriageReturn =
                try Self.readFully(descriptor, path, into: before, at: start - 1) == 1
                && before[0] == 0x0d
        }
        var offset = start
        while offset < end {
            let read = try Self.readFully(
                descriptor,
                path,
                into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<min(Self.block, end - offset)]),
                at: offset
            )
            guard read > 0 else { break }  // the file is shorter than it was: the bound holds for what is there
            let block = UnsafeRawBufferPointer(rebasing: buffer[0..<read])
            if countLines { lines.count(block) }
            hash.update(block)
            offset += read
        }
        return Scanned(bytes: offset - start, lineEnds: lines.count, digest: hash.finalize())
    }

    /// Line ends counted over a file read in pieces.
    private struct LineEnds {
        var count = 0
        var afterCarriageReturn = false

        /// The file's rows' line numbers are below this: its line ends plus two.
        var bound: Int { self.count + 2 }

        mutating func count(_ piece: UnsafeRawBufferPointer) {
            self.count += JobJournal.lineEnds(piece, afterCarriageReturn: self.afterCarriageReturn)
            self.afterCarriageReturn = piece[piece.count - 1] == 0x0d
        }
    }

    /// The size of the blocks a file is read in, into a buffer that stays in the processor's cache.
    private static let block = 256 << 10

    /// Reads `path` in blocks of 256 KiB into one buffer and hands them to `body` in order; returns the bytes read.
    ///
    /// `pread(2)` into a buffer rather than a mapping of the file: mapping a 650 MB file from the page cache, a piece at
    /// a time, and releasing each piece (so that it does not count as the process's memory) took 0.10 s of which
    /// 0.07 s in the kernel, reading it into a 256 KiB buffer 0.05 s, on this project's machine.
    private static func read(
        _ path: String,
        spools: InputSpools,
        _ body: (UnsafeRawBufferPointer) -> Void
    ) throws(JobError) -> Int {
        try Self.withDescriptor(path, spools: spools) { descriptor, _ throws(JobError) -> Int in
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.block, alignment: 64)
            defer { buffer.deallocate() }
            var offset = 0
            while true {
                let read = try Self.readFully(descriptor, path, into: buffer, at: offset)
                guard read > 0 else { return offset }
                body(UnsafeRawBufferPointer(rebasing: buffer[0..<read]))
                offset += read
            }
        }
    }

    /// Opens `path` (its spool, if `spools` has one) and calls `body` with its descriptor and size.
    private static func withDescriptor<Result>(
        _ path: String,
        spools: InputSpools,
        _ body: (Int32, Int) throws(JobError) -> Result
    ) throws(JobError) -> Result {
        let descriptor = open(spools.path(of: path), O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw JobError(.input, "\(path): cannot open: \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            throw JobError(.input, "\(path): cannot read: \(String(cString: strerror(errno)))")
        }
        _ = posix_fadvise(descriptor, 0, 0, POSIX_FADV_SEQUENTIAL)
        return try body(descriptor, Int(status.st_size))
    }

    /// Reads from `offset` until `buffer` is full or the file ends; returns the bytes read.
    private static func readFully(
        _ descriptor: Int32,
        _ path: String,
        into buffer: UnsafeMutableRawBufferPointer,
        at offset: Int
    ) throws(JobError) -> Int {
        var filled = 0
        while filled < buffer.count {
            let count = pread(descriptor, buffer.baseAddress! + filled, buffer.count - filled, off_t(offset + filled))
            if count < 0 {
                if errno == EINTR { continue }
                throw JobError(.input, "\(path): cannot read: \(String(cString: strerror(errno)))")
            }
            if count == 0 { break }
            filled += count
        }
        return filled
    }

    /// The line ends in `bytes` as `CSVReader` counts them: each LF, each CRLF once, each bare CR; eight bytes at a
    /// time.
    ///
    /// - Parameter afterCarriageReturn: the byte before `bytes` (a file read in pieces) was a CR, already counted:
    ///   an LF first completes that CRLF and is not counted again.
    static func lineEnds(_ bytes: UnsafeRawBufferPointer, afterCarriageReturn: Bool = false) -> Int {
        // Most token files end their lines with LF alone: a piece with no CR needs no pairing.
        if let lineFeeds = Self.lineFeedsUnlessCarriageReturns(bytes) {
            return lineFeeds - (afterCarriageReturn && bytes.first == 0x0a ? 1 : 0)
        }
        return Self.lineEndsWithCarriageReturns(bytes, afterCarriageReturn: afterCarriageReturn)
    }

    /// The LFs in `bytes`, or nil when it holds a CR; sixteen bytes at a time, LFs counted and CRs looked for in the
    /// same pass (a new job waits for this count).
    ///
    /// `SIMD16<UInt8>` lanes: each step compares sixteen bytes with LF and with CR and adds the LF matches to sixteen
    /// byte counters, summed every 255 steps before one can overflow. About five times the speed of the eight-bytes-a-
    /// word count it replaced, which with a `memchr` for CRs first read the memory twice (0.13 s against 0.025 s for a
    /// 650 MB file in the page cache, one thread, pages already mapped).
    private static func lineFeedsUnlessCarriageReturns(_ bytes: UnsafeRawBufferPointer) -> Int? {
        let vectors = bytes.count / 16
        let lineFeed = SIMD16<UInt8>(repeating: 0x0a)
        let carriageReturn = SIMD16<UInt8>(repeating: 0x0d)
        let one = SIMD16<UInt8>(repeating: 1)
        var carriageReturns = SIMD16<UInt8>(repeating: 0)
        var count = 0
        var index = 0
        while index < vectors {
            var counters = SIMD16<UInt8>(repeating: 0)
            let end = min(vectors, index &+ 255)
            while index < end {
                let vector = bytes.loadUnaligned(fromByteOffset: index &* 16, as: SIMD16<UInt8>.self)
                counters &+= one.replacing(with: 0, where: vector .!= lineFeed)
                carriageReturns |= one.replacing(with: 0, where: vector .!= carriageReturn)
                index &+= 1
            }
            for lane in 0..<16 { count &+= Int(counters[lane]) }
        }
        var sawCarriageReturn = false
        for lane in 0..<16 where carriageReturns[lane] != 0 { sawCarriageReturn = true }
        for offset in (vectors * 16)..<bytes.count {
            if bytes[offset] == 0x0a { count += 1 }
            if bytes[offset] == 0x0d { sawCarriageReturn = true }
        }
        return sawCarriageReturn ? nil : count
    }

    /// `lineEnds` for a piece that holds CRs: eight bytes at a time, CRLF pairs counted once.
    private static func lineEndsWithCarriageReturns(
        _ bytes: UnsafeRawBufferPointer,
        afterCarriageReturn: Bool
    ) -> Int {
        var count = 0
        var index = 0
        var carriageReturnBefore = afterCarriageReturn
        let words = bytes.count / 8
        let ones: UInt64 = 0x0101_0101_0101_0101
        let lows: UInt64 = 0x7f7f_7f7f_7f7f_7f7f
        // The high bit of each byte of `word` that is zero (exact: no false positives).
        @inline(__always) func zeroBytes(_ word: UInt64) -> UInt64 { ~(((word & lows) &+ lows) | word | lows) }
        while index < words {
            let word = bytes.loadUnaligned(fromByteOffset: index * 8, as: UInt64.self)
            let lineFeeds = zeroBytes(word ^ (ones &* 0x0a))
            let carriageReturns = zeroBytes(word ^ (ones &* 0x0d))
            // A CR followed by an LF, in this word (the CR's bit moved up one byte) or across the words.
            let pairs = (carriageReturns << 8) & lineFeeds
            let pairBefore = carriageReturnBefore && lineFeeds & 0x80 != 0 ? 1 : 0
            count += lineFeeds.nonzeroBitCount + carriageReturns.nonzeroBitCount - pairs.nonzeroBitCount - pairBefore
            carriageReturnBefore = carriageReturns >> 63 != 0
            index += 1
        }
        for offset in (words * 8)..<bytes.count {
            let byte = bytes[offset]
            if byte == 0x0d {
                count += 1
            } else if byte == 0x0a && !carriageReturnBefore {
                count += 1
            }
            carriageReturnBefore = byte == 0x0d
        }
        return count
    }

    /// SHA-256 of `bytes`, hex (the payload's entry among the settings).
    public static func sha256(_ bytes: [UInt8]) -> String {
        Hex.string(SHA256.hash(data: bytes))
    }

    /// XXH64 of `bytes`, 16 hex digits (an input's fingerprint in a new job's manifest).
    public static func xxh64(_ bytes: [UInt8]) -> String {
        bytes.withUnsafeBytes { XXH64.hex($0) }
    }

    /// `JournalManifest.Input.xxh64Pieces` of a file holding `bytes`, hashed in order on one thread.
    public static func xxh64Pieces(_ bytes: [UInt8]) -> String {
        let digests = bytes.withUnsafeBytes { all in
            stride(from: 0, to: all.count, by: Self.fingerprintPiece).map { start in
                var piece = XXH64()
                piece.update(
                    UnsafeRawBufferPointer(rebasing: all[start..<min(all.count, start + Self.fingerprintPiece)])
                )
                return piece.finalize()
            }
        }
        return XXH64.hex(XXH64.ofPieces(digests))
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

/// The input files' sizes and fingerprints and (for a new job) line ends, read on a thread of their own from the moment
/// it is made: one read of each file, its pieces on every core (`JobJournal.scan`: the line ends size a new job's
/// state file), then, for the journal of an earlier build, the whole-file fingerprints its manifest recorded
/// (`JobJournal.addingWholeFingerprints`: SHA-256, or XXH64 of the whole file).
final class FileFingerprints: @unchecked Sendable {
    private let counted = DispatchSemaphore(value: 0)
    private let done = DispatchSemaphore(value: 0)
    // Each written by the reading thread before its semaphore is signalled, read after waiting on it.
    private var lineCountsResult: Result<[Int], JobError> = .success([])
    private var result: Result<[JournalManifest.Input], JobError> = .success([])

    /// Starts reading `files`: their line ends are counted with `countLines` (a new job's; a resumed job's state
    /// file is sized already); with `sha256` and `whole`, the whole files' SHA-256 and XXH64 are read after.
    init(
        _ files: [String],
        spools: InputSpools,
        countLines: Bool = true,
        sha256: Bool = false,
        whole: Bool = false
    ) {
        let thread = Thread { [self] in
            let scanned: [JournalManifest.Input]
            do throws(JobError) {
                let (inputs, lineCounts) = try JobJournal.scan(files, spools: spools, countLines: countLines)
                self.lineCountsResult = .success(lineCounts)
                scanned = inputs
            } catch {
                self.lineCountsResult = .failure(error)
                self.result = .failure(error)
                self.counted.signal()
                self.done.signal()
                return
            }
            self.counted.signal()
            do throws(JobError) {
                self.result = .success(
                    try JobJournal.addingWholeFingerprints(
                        to: scanned,
                        spools: spools,
                        sha256: sha256,
                        whole: whole
                    )
                )
            } catch {
                self.result = .failure(error)
            }
            self.done.signal()
        }
        thread.start()
    }

    /// Waits for the fingerprints.
    func value() throws(JobError) -> [JournalManifest.Input] {
        self.done.wait()
        self.done.signal()
        return try self.result.get()
    }

    /// Waits for the line ends, and returns per file a bound on its rows' line numbers (the journal's size).
    func lineCounts() throws(JobError) -> [Int] {
        self.counted.wait()
        self.counted.signal()
        return try self.lineCountsResult.get()
    }
}
