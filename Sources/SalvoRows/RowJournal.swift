import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#endif

/// What a job's journal knows about one row of its input.
public enum RowState: UInt8, Sendable, CaseIterable {
    /// Never handed to a connection (or handed out and given back unsent when the job stopped).
    case none = 0
    /// Handed to a connection and not settled: after a crash, uncertain.
    case written = 1
    case confirmed = 2
    case presumed = 3
    case rejected = 4
    case expired = 5

    /// Settled: never sent again by a run that resumes the job.
    public var isSettled: Bool { self.rawValue >= RowState.confirmed.rawValue }
}

/// The durable state of every row of a job: a header, then one byte per input line, in a file mapped shared into
/// memory, so that a mark is a store into the page cache (no system call, no lock, no allocation) and survives the
/// process being killed at any moment; `sync()` writes the marks to the disk (a job calls it about every 200 ms, never
/// per row), which bounds what a machine crash can lose. Refused rows also get a line in an append-only log with their
/// reason (`JournalRejectLog`), written as they are refused (rare: each costs the binary interface a reconnect).
///
/// A row is found by its file and line: the byte at `base[file] + line` past the header (`RowJournalHeader`), which
/// names the job the states belong to and how many rows there are. A state file is checked whole before any row of
/// it is trusted (`open`): its size, its header and every state byte; the file's blocks are allocated before it is
/// mapped, so a full disk is an error when the job starts, never a signal when a page is first written.
///
/// Marks come from the connections' queues and event loops; two connections never mark the same row at the same
/// time (a row is on one connection at a time), and one byte per row keeps their stores apart.
public final class RowJournal: @unchecked Sendable {
    /// The first row's byte (the header's end).
    @usableFromInline let bytes: UnsafeMutablePointer<UInt8>
    /// The whole mapping, header first (page-aligned: what `msync` and `munmap` take).
    private let mapping: UnsafeMutableRawPointer
    private let count: Int
    private let mappedBytes: Int
    private let descriptor: Int32
    /// Where each file's lines start.
    public let bases: [Int]
    /// Lines of each file (the highest line number a row of it has, plus one).
    public let lineCounts: [Int]
    /// `bases` and `lineCounts` side by side, in memory the journal frees: what finding a row's byte reads, twice per
    /// row sent (an array property read per row is a retain and a release of its storage).
    @usableFromInline let places: UnsafeMutablePointer<(base: Int, lines: Int)>
    @usableFromInline let fileCount: Int
    private let log: NIOLockedValueBox<Int32>
    /// The state file and the reject log.
    public let statePath: String
    public let logPath: String
    /// The job the states belong to (the header's).
    public let job: JournalJobID

    /// Makes a new state file for `lineCounts` (an earlier one at `statePath` is replaced), its header naming
    /// `job`, every row `.none`; opens the reject log for appending.
    ///
    /// - Throws: `JobError(.output)` naming the file that cannot be created, allocated ("no space left on device")
    ///   or mapped.
    public static func create(
        statePath: String,
        logPath: String,
        lineCounts: [Int],
        job: JournalJobID
    ) throws(JobError) -> RowJournal {
        let descriptor = Glibc.open(statePath, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw Self.error(statePath, "cannot create") }
        let journal = try RowJournal(
            descriptor: descriptor,
            statePath: statePath,
            logPath: logPath,
            lineCounts: lineCounts,
            job: job
        )
        journal.writeHeader()
        return journal
    }

    /// Opens the state file of a job that already ran, after checking it whole: its size against `lineCounts`,
    /// its header (magic, layout, row count, and with `job` the job it belongs to) and that every byte after the
    /// header is a `RowState`.
    ///
    /// - Throws: `JobError(.input)` saying what is wrong when the file is missing or fails a check (a damaged or
    ///   foreign journal: no row of it is trusted); `JobError(.output)` when it cannot be opened or mapped.
    public static func open(
        statePath: String,
        logPath: String,
        lineCounts: [Int],
        job: JournalJobID?
    ) throws(JobError) -> RowJournal {
        let (descriptor, found) = try Self.openChecked(statePath, rows: RowJournalCheck.rowCount(lineCounts))
        let journal = try RowJournal(
            descriptor: descriptor,
            statePath: statePath,
            logPath: logPath,
            lineCounts: lineCounts,
            job: found
        )
        try journal.check(job: job)
        return journal
    }

    /// Opens the state file at `statePath` (checked as `open` checks it, whichever job it names), or creates it
    /// for a new job when it is missing or empty.
    public convenience init(statePath: String, logPath: String, lineCounts: [Int]) throws(JobError) {
        var status = stat()
        if stat(statePath, &status) == 0 && status.st_size > 0 {
            let (descriptor, found) = try Self.openChecked(statePath, rows: RowJournalCheck.rowCount(lineCounts))
            try self.init(
                descriptor: descriptor,
                statePath: statePath,
                logPath: logPath,
                lineCounts: lineCounts,
                job: found
            )
            try self.check(job: nil)
        } else {
            let descriptor = Glibc.open(statePath, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
            guard descriptor >= 0 else { throw Self.error(statePath, "cannot create") }
            try self.init(
                descriptor: descriptor,
                statePath: statePath,
                logPath: logPath,
                lineCounts: lineCounts,
                job: .random()
            )
            self.writeHeader()
        }
    }

    /// Opens an existing state file whose size fits `rows` rows; returns it with the job its header names.
    private static func openChecked(_ statePath: String, rows: Int) throws(JobError) -> (Int32, JournalJobID) {
        let descriptor = Glibc.open(statePath, O_RDWR | O_CLOEXEC)
        guard descriptor >= 0 else {
            if errno == ENOENT { throw JobError(.input, "\(statePath) is missing") }
            throw Self.error(statePath, "cannot open")
        }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            close(descriptor)
            throw Self.error(statePath, "cannot stat")
        }
        if let problem = RowJournalCheck.sizeProblem(size: Int(status.st_size), rows: rows) {
            close(descriptor)
            throw JobError(.input, "\(statePath): \(problem)")
        }
        var header = [UInt8](repeating: 0, count: RowJournalHeader.size)
        let read = header.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, 0) }
        guard read == RowJournalHeader.size else {
            close(descriptor)
            throw Self.error(statePath, "cannot read")
        }
        return (descriptor, header.withUnsafeBytes { RowJournalHeader.job(in: $0) })
    }

    /// The whole file checked (`RowJournalCheck`): the first problem, thrown.
    private func check(job: JournalJobID?) throws(JobError) {
        let check = RowJournalCheck(
            UnsafeRawBufferPointer(start: self.mapping, count: self.mappedBytes),
            rows: self.count,
            job: job,
            badOffsetsKept: 3
        )
        if let problem = check.problems.first { throw JobError(.input, "\(self.statePath): \(problem)") }
    }

    /// A new file's header, on the disk before a manifest can name its job.
    private func writeHeader() {
        RowJournalHeader(job: self.job, rows: self.count).write(to: self.mapping)
        self.sync()
    }

    /// Allocates the file's blocks (a full disk fails here, not as SIGBUS on a later store), maps it and opens the
    /// log. Takes `descriptor` (closed on failure).
    private init(
        descriptor: Int32,
        statePath: String,
        logPath: String,
        lineCounts: [Int],
        job: JournalJobID
    ) throws(JobError) {
        var bases: [Int] = []
        var total = 0
        for count in lineCounts {
            bases.append(total)
            total += count
        }
        self.bases = bases
        self.lineCounts = lineCounts
        self.fileCount = lineCounts.count
        self.count = total
        self.statePath = statePath
        self.logPath = logPath
        self.job = job
        let fileBytes = RowJournalHeader.size + total
        // posix_fallocate returns the error rather than setting errno; it also sizes a shorter file up.
        let allocated = posix_fallocate(descriptor, 0, off_t(fileBytes))
        guard allocated == 0 else {
            close(descriptor)
            if allocated == ENOSPC {
                throw JobError(
                    .output,
                    "--journal: cannot allocate \(statePath) (\(fileBytes) bytes): no space left on device"
                )
            }
            errno = allocated
            throw Self.error(statePath, "cannot allocate \(fileBytes) bytes for")
        }
        self.mappedBytes = fileBytes
        let mapped = mmap(nil, fileBytes, PROT_READ | PROT_WRITE, MAP_SHARED, descriptor, 0)
        guard let mapped, mapped != MAP_FAILED else {
            close(descriptor)
            throw Self.error(statePath, "cannot map")
        }
        self.mapping = mapped
        self.bytes = (mapped + RowJournalHeader.size).assumingMemoryBound(to: UInt8.self)
        self.descriptor = descriptor
        let log = Glibc.open(logPath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard log >= 0 else {
            munmap(mapped, fileBytes)
            close(descriptor)
            throw Self.error(logPath, "cannot open")
        }
        self.log = NIOLockedValueBox(log)
        // Allocated last: an init that throws runs no deinit, which frees it.
        self.places = .allocate(capacity: max(1, lineCounts.count))
        for (file, lines) in lineCounts.enumerated() { self.places[file] = (bases[file], lines) }
    }

    deinit {
        self.sync()
        self.places.deallocate()
        munmap(self.mapping, self.mappedBytes)
        close(self.descriptor)
        close(self.log.withLockedValue { $0 })
    }

    private static func error(_ path: String, _ what: String) -> JobError {
        JobError(.output, "--journal: \(what) \(path): \(String(cString: strerror(errno)))")
    }

    @inlinable @inline(__always)
    func index(file: Int, line: Int) -> Int? {
        guard file >= 0, file < self.fileCount else { return nil }
        let place = self.places[file]
        guard line >= 0, line < place.lines else { return nil }
        return place.base + line
    }

    /// The state of the row at `line` of input file `file`.
    @inlinable
    public func state(file: Int, line: Int) -> RowState {
        guard let index = self.index(file: file, line: line) else { return .none }
        return RowState(rawValue: self.bytes[index]) ?? .none
    }

    /// Records the state of a row: a store into the mapped file. Inlined where rows are sent (the shards' windows,
    /// another module): twice per row sent.
    @inlinable @inline(__always)
    public func mark(file: Int, line: Int, _ state: RowState) {
        guard let index = self.index(file: file, line: line) else { return }
        self.bytes[index] = state.rawValue
    }

    /// Records a refused row: its reason goes to the log first, then its state.
    public func reject(file: Int, line: Int, status: Int, reason: String, token: String) {
        let record = JournalRejectLog.Record(file: file, line: line, status: status, reason: reason, token: token)
        let text = record.logLine
        self.log.withLockedValue { descriptor in
            var utf8 = text.utf8CString
            utf8.removeLast()
            _ = utf8.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        }
        self.mark(file: file, line: line, .rejected)
    }

    /// Writes the marks and the log to the disk.
    public func sync() {
        msync(self.mapping, self.mappedBytes, MS_SYNC)
        fsync(self.descriptor)
        self.log.withLockedValue { _ = fsync($0) }
    }

    /// How many of the lines `lines` of input file `file` hold a settled row (lines past the file's count are not
    /// counted). A scan of the mapped bytes, for `CheckpointTrail`.
    public func settledCount(file: Int, lines: Range<Int>) -> Int {
        guard file < self.bases.count else { return 0 }
        let lower = max(0, lines.lowerBound)
        let upper = min(self.lineCounts[file], lines.upperBound)
        guard lower < upper else { return 0 }
        let base = self.bases[file]
        var count = 0
        for index in (base + lower)..<(base + upper) where self.bytes[index] >= RowState.confirmed.rawValue {
            count += 1
        }
        return count
    }

    /// Whether no row holds a mark (every state byte is `.none`): a journal this run made, or one whose earlier run
    /// marked nothing. Eight bytes at a time; ends at the first mark.
    public func holdsNoMark() -> Bool {
        let raw = UnsafeRawPointer(self.bytes)
        var index = 0
        while index &+ 8 <= self.count {
            if raw.loadUnaligned(fromByteOffset: index, as: UInt64.self) != 0 { return false }
            index &+= 8
        }
        while index < self.count {
            if self.bytes[index] != 0 { return false }
            index &+= 1
        }
        return true
    }

    /// Every row's state, in order (for a tally or a test).
    public func states(file: Int) -> [RowState] {
        guard file < self.bases.count else { return [] }
        let base = self.bases[file]
        return (0..<self.lineCounts[file]).map { RowState(rawValue: self.bytes[base + $0]) ?? .none }
    }

    /// How many rows of every file are in each state, indexed by `RowState.rawValue` (a scan of the mapped bytes:
    /// what a resumed run says before it sends).
    public func stateCounts() -> [Int] {
        var counts = [Int](repeating: 0, count: 256)
        for index in 0..<self.count { counts[Int(self.bytes[index])] += 1 }
        return Array(counts.prefix(RowState.allCases.count))
    }
}
