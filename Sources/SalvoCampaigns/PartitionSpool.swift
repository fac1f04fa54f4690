import Foundation
import SalvoRows
import SalvoSend
import SalvoService

#if canImport(Glibc)
import Glibc
#endif

/// The files of a fleet's campaign on one worker, and the cutting of its audience: at its creation the audience is
/// read once and cut into partitions of `rowsPerPartition` rows, each a CSV of its own (the audience's header, then
/// its rows as they were, in order) with the audience's line of each of its lines, put in the store a few at a time;
/// a worker that claims a partition writes it into `parts/N/` of the campaign's folder and runs it there as a
/// `send --journal` job of its own (`CampaignJob.request(partition:)`). Its progress is its journal's: the state bytes
/// and the refused rows' log, read from the files (the state file is mapped shared, so a read sees every mark) for
/// the checkpoints, and written back into a new journal when a partition that ran elsewhere is claimed. Every call
/// blocks (file I/O): the caller runs it on `BlockingWork`.
public enum PartitionSpool {
    /// How many partitions are put in the store at once while an audience is cut.
    static let batch = 8

    public static func folder(_ folder: CampaignFolder, _ id: String, _ part: Int) -> String {
        folder.folder(id) + "/parts/" + String(part)
    }

    public static func journal(_ folder: CampaignFolder, _ id: String, _ part: Int) -> String {
        Self.folder(folder, id, part) + "/journal"
    }

    /// Reads `audience` and hands its partitions to `put`, `batch` at a time, in order.
    ///
    /// - Returns: the number of partitions.
    /// - Throws: `JobError` when the audience cannot be read, or what `put` throws.
    public static func cut(
        audience: String,
        rowsPerPartition: Int,
        put: ([CampaignPartition]) throws -> Void
    ) throws -> Int {
        let reader: CSVReader
        var header: [UInt8] = []
        do throws(InputError) {
            reader = try CSVReader(path: audience)
            guard try reader.next() != nil else { throw InputError(file: audience, line: nil, message: "empty") }
            LocalTimePlan.appendRecord((0..<reader.fields.count).map { reader.string($0) }, to: &header)
        } catch {
            throw JobError(.input, error.description)
        }
        reader.keepsBlankLines = true
        let headerLines = header.count(where: { $0 == 0x0A })
        var pending: [CampaignPartition] = []
        var count = 0
        var current = CampaignPartition(part: 0, rows: 0, audience: header, lines: [])
        func startLines() {
            for line in 0..<headerLines { Self.appendLine(line + 1, to: &current.lines) }
        }
        startLines()
        var fields: [String] = []
        while true {
            let line: Int?
            do throws(InputError) {
                line = try reader.next()
            } catch {
                throw JobError(.input, error.description)
            }
            guard let line else { break }
            fields.removeAll(keepingCapacity: true)
            for index in 0..<reader.fields.count { fields.append(reader.string(index)) }
            var record: [UInt8] = []
            if fields.count == 1 && fields[0].isEmpty {
                record = [0x0A]
            } else {
                LocalTimePlan.appendRecord(fields, to: &record)
            }
            current.audience += record
            for _ in 0..<record.count(where: { $0 == 0x0A }) { Self.appendLine(line, to: &current.lines) }
            current.rows += 1
            if current.rows == rowsPerPartition {
                pending.append(current)
                count += 1
                current = CampaignPartition(part: count, rows: 0, audience: header, lines: [])
                startLines()
                if pending.count == Self.batch {
                    try put(pending)
                    pending.removeAll()
                }
            }
        }
        if current.rows > 0 {
            pending.append(current)
            count += 1
        }
        if !pending.isEmpty { try put(pending) }
        return count
    }

    /// The lines a partition's file's header takes (its first record's, a quoted field's line ends included).
    public static func headerLines(_ audience: [UInt8]) -> Int {
        var quoted = false
        var lines = 0
        for byte in audience {
            if byte == UInt8(ascii: "\"") { quoted.toggle() }
            if byte == 0x0A {
                lines += 1
                if !quoted { return lines }
            }
        }
        return max(1, lines)
    }

    static func appendLine(_ line: Int, to bytes: inout [UInt8]) {
        withUnsafeBytes(of: UInt64(line).littleEndian) { bytes += $0 }
    }

    /// The audience's line of line `line` (1-based) of a partition's file, from its map.
    static func originalLine(_ line: Int, lines: [UInt8]) -> Int? {
        let offset = (line - 1) * 8
        guard line >= 1, offset + 8 <= lines.count else { return nil }
        var value: UInt64 = 0
        for index in (0..<8).reversed() { value = value << 8 | UInt64(lines[offset + index]) }
        return Int(value)
    }

    /// Writes the claimed partition's file into its folder (what an earlier claim left there removed first).
    public static func write(_ claim: PartitionClaim, folder: CampaignFolder) throws(JobError) {
        let path = Self.folder(folder, claim.campaign, claim.part)
        CampaignFolder.remove(path)
        for made in [folder.folder(claim.campaign) + "/parts", path] {
            guard mkdir(made, 0o700) == 0 || errno == EEXIST else {
                throw JobError(.output, "\(made): cannot create the folder: \(String(cString: strerror(errno)))")
            }
        }
        let writer = try AtomicFileWriter(path: path + "/audience.csv")
        try writer.write(claim.audience)
        try writer.commit()
    }

    /// The partition's progress as its journal holds it now: the state bytes past the header, and the log.
    public static func checkpoint(journal: String, at: Int64) -> PartitionCheckpoint? {
        guard let state = CampaignFolder.contents(JobJournal.statePath(journal)),
            state.count >= RowJournalHeader.size
        else { return nil }
        return PartitionCheckpoint(
            states: Array(state[RowJournalHeader.size...]),
            rejectsLog: CampaignFolder.contents(JobJournal.logPath(journal)) ?? [],
            at: at
        )
    }

    /// Puts a checkpoint's states and log into a journal made for the same file (by a run stopped before its first
    /// row), so that the next run resumes from them: their settled rows are never sent again and their written rows
    /// are the journal's uncertain ones.
    public static func restore(journal: String, states: [UInt8], rejectsLog: [UInt8]) throws(JobError) {
        let statePath = JobJournal.statePath(journal)
        let descriptor = open(statePath, O_RDWR | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw JobError(.output, "\(statePath): cannot open: \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0, Int(status.st_size) == RowJournalHeader.size + states.count else {
            throw JobError(.input, "\(statePath): the checkpoint is not of this partition's file")
        }
        let written = states.withUnsafeBytes {
            pwrite(descriptor, $0.baseAddress, $0.count, off_t(RowJournalHeader.size))
        }
        guard written == states.count, fsync(descriptor) == 0 else {
            throw JobError(.output, "\(statePath): cannot write: \(String(cString: strerror(errno)))")
        }
        let log = try AtomicFileWriter(path: JobJournal.logPath(journal))
        try log.write(rejectsLog)
        try log.commit()
        unlink(JobJournal.checkpointPath(journal))
        CampaignFolder.sync(journal)
    }

    /// The files the partition's last run wrote.
    public static func files(_ folder: CampaignFolder, _ id: String, _ part: Int) -> PartitionFiles {
        let path = Self.folder(folder, id, part)
        return PartitionFiles(
            report: CampaignFolder.contents(path + "/report.json"),
            rejects: CampaignFolder.contents(path + "/rejects.csv"),
            unsettled: CampaignFolder.contents(path + "/unsettled.csv"),
            unregistered: CampaignFolder.contents(path + "/unregistered.csv")
        )
    }

    // MARK: The campaign's files

    /// The partitions' reports added up: the campaign's report (nil before any partition ran).
    public static func report(_ results: [PartitionResult]) -> JobReport? {
        Self.report(reports: results.compactMap(\.files.report))
    }

    /// The partitions' reports (their JSON) merged; nil when none is there yet.
    public static func report(reports: [[UInt8]]) -> JobReport? {
        LocalTimePlan.mergeReports(reports.compactMap { try? JSONDecoder().decode(JobReport.self, from: Data($0)) })
    }

    /// The partitions' CSV files of one kind joined (one header), each partition's file name and line replaced by the
    /// audience's (`audience`, the line from its map). nil when no partition has one.
    ///
    /// - Parameter fileColumn: the 0-based column of the file's name (the line is the next one); -1: none.
    public static func csv(
        _ results: [PartitionResult],
        _ kind: KeyPath<PartitionFiles, [UInt8]?>,
        fileColumn: Int,
        audience: String
    ) -> [UInt8]? {
        var out: [UInt8]?
        for result in results {
            guard let bytes = result.files[keyPath: kind] else { continue }
            var records = CSVRecords(bytes)
            guard let header = records.next() else { continue }
            if out == nil {
                out = []
                LocalTimePlan.appendRecord(header, to: &out!)
            }
            while var fields = records.next() {
                if fileColumn >= 0, fields.count > fileColumn + 1, let line = Int(fields[fileColumn + 1]) {
                    fields[fileColumn] = audience
                    fields[fileColumn + 1] = String(Self.originalLine(line, lines: result.lines) ?? line)
                }
                LocalTimePlan.appendRecord(fields, to: &out!)
            }
        }
        return out
    }
}

/// The records of a CSV held in memory (RFC 4180: quoted fields with doubled quotes, CRLF or LF).
struct CSVRecords: IteratorProtocol {
    private let bytes: [UInt8]
    private var index = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    mutating func next() -> [String]? {
        guard self.index < self.bytes.count else { return nil }
        var fields: [String] = []
        var field: [UInt8] = []
        var quoted = false
        while self.index < self.bytes.count {
            let byte = self.bytes[self.index]
            self.index += 1
            if quoted {
                if byte == UInt8(ascii: "\"") {
                    if self.index < self.bytes.count && self.bytes[self.index] == UInt8(ascii: "\"") {
                        field.append(byte)
                        self.index += 1
                    } else {
                        quoted = false
                    }
                } else {
                    field.append(byte)
                }
            } else if byte == UInt8(ascii: "\"") {
                quoted = true
            } else if byte == UInt8(ascii: ",") {
                fields.append(String(decoding: field, as: UTF8.self))
                field.removeAll()
            } else if byte == 0x0A {
                break
            } else if byte != 0x0D {
                field.append(byte)
            }
        }
        fields.append(String(decoding: field, as: UTF8.self))
        return fields
    }
}
