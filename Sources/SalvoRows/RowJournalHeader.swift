import APNSWire

/// A job's identity: 16 random bytes made when the job starts, kept in its manifest and in its state file's header,
/// so that a state file is never taken for another job's (a copy from another folder, a half-restarted job).
public struct JournalJobID: Hashable, Sendable, CustomStringConvertible {
    public let high: UInt64
    public let low: UInt64

    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// A new job's identity.
    public static func random() -> JournalJobID {
        var generator = SystemRandomNumberGenerator()
        return JournalJobID(high: generator.next(), low: generator.next())
    }

    /// 32 lowercase hex digits; nil for anything else.
    public init?(hex: String) {
        guard let bytes = Hex.bytes(hex), bytes.count == 16 else { return nil }
        let word = { (range: Range<Int>) in bytes[range].reduce(UInt64(0)) { $0 << 8 | UInt64($1) } }
        self.init(high: word(0..<8), low: word(8..<16))
    }

    /// 32 lowercase hex digits.
    public var description: String {
        withUnsafeBytes(of: (self.high.bigEndian, self.low.bigEndian)) { Hex.string($0) }
    }
}

/// The first 64 bytes of a state file (`RowJournal`): what makes the rows' bytes after it trustworthy.
///
/// | offset | bytes | what |
/// |---|---|---|
/// | 0 | 8 | magic `SALVOROW` |
/// | 8 | 4 | layout version, little-endian (`layout`) |
/// | 12 | 4 | header size, little-endian (64) |
/// | 16 | 16 | the job's id (`JournalJobID`, high then low, big-endian) |
/// | 32 | 8 | the row count, little-endian: the file is the header and one byte a row |
/// | 40 | 24 | zero |
public struct RowJournalHeader: Hashable, Sendable {
    public static let size = 64
    public static let magic = Array("SALVOROW".utf8)
    /// The layout of the bytes after the header: one `RowState` a row.
    public static let layout: UInt32 = 1

    public var job: JournalJobID
    public var rows: Int
    public var layout = Self.layout

    public init(job: JournalJobID, rows: Int) {
        self.job = job
        self.rows = rows
    }

    /// The header in `bytes` (at least `size` of them), nil when the magic or the header size is not this
    /// format's.
    public init?(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count >= Self.size, Array(bytes[0..<8]) == Self.magic,
            Self.load(UInt32.self, bytes, 12) == UInt32(Self.size)
        else { return nil }
        self.layout = Self.load(UInt32.self, bytes, 8)
        self.job = Self.job(in: bytes)
        self.rows = Int(truncatingIfNeeded: Self.load(UInt64.self, bytes, 32))
    }

    /// The job id at its place in `bytes` (whatever the rest holds).
    public static func job(in bytes: UnsafeRawBufferPointer) -> JournalJobID {
        guard bytes.count >= 32 else { return JournalJobID(high: 0, low: 0) }
        var high: UInt64 = 0
        var low: UInt64 = 0
        for index in 0..<8 {
            high = high << 8 | UInt64(bytes[16 + index])
            low = low << 8 | UInt64(bytes[24 + index])
        }
        return JournalJobID(high: high, low: low)
    }

    private static func load<T: FixedWidthInteger>(_: T.Type, _ bytes: UnsafeRawBufferPointer, _ offset: Int) -> T {
        T(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: T.self))
    }

    /// Writes the header at `start` (`size` bytes).
    public func write(to start: UnsafeMutableRawPointer) {
        let bytes = UnsafeMutableRawBufferPointer(start: start, count: Self.size)
        bytes.initializeMemory(as: UInt8.self, repeating: 0)
        for (index, byte) in Self.magic.enumerated() { bytes[index] = byte }
        bytes.storeBytes(of: self.layout.littleEndian, toByteOffset: 8, as: UInt32.self)
        bytes.storeBytes(of: UInt32(Self.size).littleEndian, toByteOffset: 12, as: UInt32.self)
        for index in 0..<8 {
            bytes[16 + index] = UInt8(truncatingIfNeeded: self.job.high >> UInt64(56 - 8 * index))
            bytes[24 + index] = UInt8(truncatingIfNeeded: self.job.low >> UInt64(56 - 8 * index))
        }
        bytes.storeBytes(of: UInt64(self.rows).littleEndian, toByteOffset: 32, as: UInt64.self)
    }
}

/// What a state file's bytes prove, checked before any row of it is trusted: a pure reading of the bytes, used by a
/// resuming run (which refuses on the first problem) and by `salvo journal verify` (which says all of it).
public struct RowJournalCheck: Sendable {
    /// The header, nil when the file is shorter than one or its magic is not a state file's.
    public var header: RowJournalHeader?
    /// What is wrong, worst first; empty when the file can be trusted.
    public var problems: [String] = []
    /// Rows in each state, indexed by `RowState.rawValue` (bytes after the header; a file that fails its size
    /// check is still counted, for what it is worth).
    public var stateCounts = [Int](repeating: 0, count: RowState.allCases.count)
    /// Bytes after the header that are not a `RowState`, and the file offsets of the first few.
    public var badBytes = 0
    public var badOffsets: [Int] = []

    public var isIntact: Bool { self.problems.isEmpty }

    /// Checks `file` (the whole state file) against `rows` rows and, when given, the job `job`.
    public init(_ file: UnsafeRawBufferPointer, rows: Int?, job: JournalJobID?, badOffsetsKept: Int = 5) {
        if let rows, let problem = Self.sizeProblem(size: file.count, rows: rows) { self.problems.append(problem) }
        guard file.count >= RowJournalHeader.size else {
            if rows == nil { self.problems.append("it holds \(file.count) bytes, less than its header's 64") }
            return
        }
        guard let header = RowJournalHeader(file) else {
            self.problems.append("its header is not a state file's (SALVOROW and a header size of 64 at its start)")
            return
        }
        self.header = header
        if file[40..<RowJournalHeader.size].contains(where: { $0 != 0 }) {
            self.problems.append("its header's reserved bytes (offsets 40–63) are not zero")
        }
        if header.layout != RowJournalHeader.layout {
            self.problems.append(
                "its header names row layout \(header.layout); this build reads layout \(RowJournalHeader.layout)"
            )
        }
        if let job, header.job != job {
            self.problems.append("it belongs to another job (job \(header.job); the manifest's is \(job))")
        }
        if let rows, header.rows != rows {
            self.problems.append("its header counts \(header.rows) rows; the manifest's inputs have \(rows)")
        } else if rows == nil, let problem = Self.sizeProblem(size: file.count, rows: header.rows) {
            self.problems.append(problem)
        }
        self.countStates(UnsafeRawBufferPointer(rebasing: file[RowJournalHeader.size...]), badOffsetsKept)
        if self.badBytes > 0 {
            let offsets = self.badOffsets.map(String.init).joined(separator: ", ")
            self.problems.append(
                "\(self.badBytes) of its row bytes are not row states (0–\(RowState.allCases.count - 1)), the first "
                    + "at file offset\(self.badOffsets.count == 1 ? "" : "s") \(offsets)"
            )
        }
    }

    private mutating func countStates(_ rows: UnsafeRawBufferPointer, _ badOffsetsKept: Int) {
        var counts = [Int](repeating: 0, count: 256)
        counts.withUnsafeMutableBufferPointer { counts in
            for byte in rows { counts[Int(byte)] += 1 }
        }
        self.stateCounts = Array(counts.prefix(RowState.allCases.count))
        self.badBytes = rows.count - self.stateCounts.reduce(0, +)
        guard self.badBytes > 0 else { return }
        for (index, byte) in rows.enumerated() where Int(byte) >= RowState.allCases.count {
            self.badOffsets.append(RowJournalHeader.size + index)
            if self.badOffsets.count == badOffsetsKept { break }
        }
    }

    /// The rows of a job whose files have `lineCounts` lines (as its manifest says, which may be damaged too):
    /// `Int.max` for a negative count or a sum that overflows, which no file matches.
    public static func rowCount(_ lineCounts: [Int]) -> Int {
        var total = 0
        for count in lineCounts {
            guard count >= 0 else { return Int.max }
            let (sum, overflow) = total.addingReportingOverflow(count)
            guard !overflow else { return Int.max }
            total = sum
        }
        return total
    }

    /// What is wrong with a state file of `size` bytes for `rows` rows, nil when the size is right.
    public static func sizeProblem(size: Int, rows: Int) -> String? {
        // `rows` may come from a damaged header: any value, so no arithmetic that can trap on it.
        guard rows >= 0 else { return "its header counts \(rows) rows" }
        let (expected, overflow) = RowJournalHeader.size.addingReportingOverflow(rows)
        guard !overflow else { return "its header counts \(rows) rows, more than any file can hold" }
        guard size != expected else { return nil }
        return "it holds \(size) bytes; the job's \(rows) rows need \(expected) (a 64-byte header and one byte a row): "
            + (size < expected ? "it was cut short" : "it has bytes past its end")
    }
}
