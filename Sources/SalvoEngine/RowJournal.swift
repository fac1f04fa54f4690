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

/// The durable state of every row of a job: one byte per input line, in a file mapped shared into memory, so that
/// a mark is a store into the page cache (no system call, no lock, no allocation) and survives the process being
/// killed at any moment; `sync()` writes the marks to the disk (a job calls it about every 200 ms, never per row),
/// which bounds what a machine crash can lose. Refused rows also get a line in an append-only log with their
/// reason (`JournalRejectLog`), written as they are refused (rare: each costs the binary interface a reconnect).
///
/// A row is found by its file and line: the byte at `base[file] + line`. Marks come from the connections' queues
/// and event loops; two connections never mark the same row at the same time (a row is on one connection at a
/// time), and one byte per row keeps their stores apart.
public final class RowJournal: @unchecked Sendable {
    private let bytes: UnsafeMutablePointer<UInt8>
    private let count: Int
    private let mappedBytes: Int
    private let descriptor: Int32
    /// Where each file's lines start.
    public let bases: [Int]
    /// Lines of each file (the highest line number a row of it has, plus one).
    public let lineCounts: [Int]
    private let log: NIOLockedValueBox<Int32>
    /// The state file and the reject log.
    public let statePath: String
    public let logPath: String

    /// Maps the state file (created, zeroed, when missing) and opens the reject log for appending.
    ///
    /// - Parameter lineCounts: per input file, one more than its last row's line number.
    /// - Throws: `JobError(.output)` naming the file that cannot be created, sized or mapped.
    public init(statePath: String, logPath: String, lineCounts: [Int]) throws(JobError) {
        var bases: [Int] = []
        var total = 0
        for count in lineCounts {
            bases.append(total)
            total += count
        }
        self.bases = bases
        self.lineCounts = lineCounts
        self.count = total
        self.statePath = statePath
        self.logPath = logPath
        let descriptor = open(statePath, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw Self.error(statePath, "cannot open") }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            close(descriptor)
            throw Self.error(statePath, "cannot stat")
        }
        if Int(status.st_size) != total {
            guard ftruncate(descriptor, off_t(total)) == 0 else {
                close(descriptor)
                throw Self.error(statePath, "cannot size")
            }
        }
        self.mappedBytes = max(total, 1)
        let mapped = mmap(nil, self.mappedBytes, PROT_READ | PROT_WRITE, MAP_SHARED, descriptor, 0)
        guard let mapped, mapped != UnsafeMutableRawPointer(bitPattern: -1) else {
            close(descriptor)
            throw Self.error(statePath, "cannot map")
        }
        self.bytes = mapped.assumingMemoryBound(to: UInt8.self)
        self.descriptor = descriptor
        let log = open(logPath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard log >= 0 else {
            munmap(mapped, self.mappedBytes)
            close(descriptor)
            throw Self.error(logPath, "cannot open")
        }
        self.log = NIOLockedValueBox(log)
    }

    deinit {
        self.sync()
        munmap(self.bytes, self.mappedBytes)
        close(self.descriptor)
        close(self.log.withLockedValue { $0 })
    }

    private static func error(_ path: String, _ what: String) -> JobError {
        JobError(.output, "--journal: \(what) \(path): \(String(cString: strerror(errno)))")
    }

    @inline(__always)
    private func index(file: Int, line: Int) -> Int? {
        guard file < self.bases.count, line >= 0, line < self.lineCounts[file] else { return nil }
        return self.bases[file] + line
    }

    /// The state of the row at `line` of input file `file`.
    public func state(file: Int, line: Int) -> RowState {
        guard let index = self.index(file: file, line: line) else { return .none }
        return RowState(rawValue: self.bytes[index]) ?? .none
    }

    /// Records the state of a row: a store into the mapped file.
    @inline(__always)
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
        msync(self.bytes, self.mappedBytes, MS_SYNC)
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
