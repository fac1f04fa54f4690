import Foundation
import SalvoRows
import SalvoService

#if canImport(Glibc)
import Glibc
#endif

/// The rows of a local-time campaign grouped by the instant each goes at (`LocalTimeSchedule`), made by one pass over
/// the audience before its first group is sent: each group is a CSV of its own (the audience's header, then its rows
/// as they were, in order) in `local/INSTANT/` of the campaign's folder, with a map of its lines to the audience's
/// (`lines.bin`: the audience's line of each of its lines, 8 bytes each); the rows that used the fallback are listed
/// in `local/fallback.csv` with their line; `local/plan.json`, written last, says the pass is whole. A pass cut short
/// (a stop, a crash) leaves no plan, and the next run makes it again from the start.
///
/// Memory: two writers per group (about forty groups at most, each writer with a 64 KiB buffer) and the instants of
/// the zone names seen (at most `zoneCacheLimit`), whatever the audience's size.
///
/// Each group is then sent as a `send --journal` job of its own on its file (`CampaignJob.request(group:)`), with its
/// journal in its folder: the journal's guarantees are those of one input read in order, whose rows it numbers by line
/// and whose checkpoints and fingerprint are the input's, so one journal over the whole audience could not be run a
/// group at a time without teaching it a second way to choose rows. The campaign's report is the groups' reports added
/// up (`mergeReports`), and its rejects and unsettled files are the groups', with the audience's file and lines
/// (`mergeCSV`). Every call blocks (file I/O): the caller runs it on `BlockingWork`.
public struct LocalTimePlan: Hashable, Sendable, Codable {
    public struct Group: Hashable, Sendable, Codable {
        /// Milliseconds since 1970.
        public var instant: Int64
        public var rows: Int
    }

    /// In order of instant.
    public var groups: [Group]
    /// The audience's rows (the header aside).
    public var inputRows: Int
    /// Rows whose zone was empty or unknown (the skipped ones included).
    public var fallbackRows: Int
    /// Rows not sent: their zone was empty or unknown, and the fallback is `skip`.
    public var skippedRows: Int

    public var scheduleGroups: [LocalTimeSchedule.Group] {
        self.groups.map { LocalTimeSchedule.Group(instant: $0.instant, rows: $0.rows) }
    }

    /// The most zone names whose instant is kept while grouping (an audience with more distinct names has the rest
    /// worked out again for each row).
    public static let zoneCacheLimit = 4096
    /// What each group's two files gather before a write: about forty groups hold some 5 MiB.
    static let groupBufferBytes = 1 << 16
    /// The header of `fallback.csv`.
    public static let fallbackHeader = "line,zone,reason,fallback"

    // MARK: Files

    public static func folder(_ folder: CampaignFolder, _ id: String) -> String { folder.folder(id) + "/local" }
    public static func planPath(_ folder: CampaignFolder, _ id: String) -> String {
        Self.folder(folder, id) + "/plan.json"
    }
    public static func fallbackPath(_ folder: CampaignFolder, _ id: String) -> String {
        Self.folder(folder, id) + "/fallback.csv"
    }
    public static func groupFolder(_ folder: CampaignFolder, _ id: String, _ instant: Int64) -> String {
        Self.folder(folder, id) + "/" + String(instant)
    }

    /// The plan a whole pass left, nil when there is none.
    public static func load(_ folder: CampaignFolder, _ id: String) -> LocalTimePlan? {
        guard let bytes = CampaignFolder.contents(Self.planPath(folder, id)) else { return nil }
        return try? JSONDecoder().decode(LocalTimePlan.self, from: Data(bytes))
    }

    /// Whether the group's run ended with every row given its outcome (its `done` file).
    public static func isSent(_ folder: CampaignFolder, _ id: String, _ instant: Int64) -> Bool {
        access(Self.groupFolder(folder, id, instant) + "/done", F_OK) == 0
    }

    /// Marks the group sent.
    public static func markSent(_ folder: CampaignFolder, _ id: String, _ instant: Int64) throws(JobError) {
        let writer = try AtomicFileWriter(path: Self.groupFolder(folder, id, instant) + "/done")
        try writer.commit()
        CampaignFolder.sync(Self.groupFolder(folder, id, instant))
    }

    // MARK: The pass

    /// Refuses an audience whose header lacks the zone column (read as the pass reads it).
    public static func checkHeader(audience: String, zoneColumn: String) throws(ServiceProblem) {
        let names: [String]
        do throws(InputError) {
            let reader = try CSVReader(path: audience)
            guard try reader.next() != nil else {
                throw InputError(file: audience, line: nil, message: "the audience is empty")
            }
            names = (0..<reader.fields.count).map { reader.string($0) }
        } catch {
            throw ServiceProblem(.invalidCampaign, detail: error.description, field: "audience")
        }
        try Self.checkZoneColumn(names, zoneColumn: zoneColumn, audience: "the audience's header")
    }

    /// Refuses columns `names` (of `audience`, for the message) without `zoneColumn`.
    static func checkZoneColumn(_ names: [String], zoneColumn: String, audience: String) throws(ServiceProblem) {
        guard names.contains(zoneColumn) else {
            throw ServiceProblem(
                .invalidCampaign,
                detail: "\(audience) has no column \(CampaignSettings.shown(zoneColumn)) for the rows' "
                    + "time zones (its columns: \(names.prefix(20).joined(separator: ", ")))",
                field: "zone_column"
            )
        }
    }

    /// Groups the rows of `audience` by instant into the campaign's `local/` folder (what an earlier pass left there
    /// removed first). `stopped` is asked every few thousand rows: true, the pass ends with nil and leaves no plan.
    ///
    /// - Throws: `JobError` when the audience cannot be read or the files cannot be written.
    public static func make(
        audience: String,
        zoneColumn: String,
        schedule: LocalTimeSchedule,
        folder: CampaignFolder,
        id: String,
        stopped: () -> Bool
    ) throws(JobError) -> LocalTimePlan? {
        let root = Self.folder(folder, id)
        CampaignFolder.remove(root)
        guard mkdir(root, 0o700) == 0 else {
            throw JobError(.output, "\(root): cannot create the folder: \(String(cString: strerror(errno)))")
        }
        let reader: CSVReader
        let zoneIndex: Int
        var header: [UInt8] = []
        do throws(InputError) {
            reader = try CSVReader(path: audience)
            guard try reader.next() != nil else { throw InputError(file: audience, line: nil, message: "empty") }
            let names = (0..<reader.fields.count).map { reader.string($0) }
            guard let index = names.firstIndex(of: zoneColumn) else {
                throw InputError(file: audience, line: 1, message: "no column \(zoneColumn) in the header")
            }
            zoneIndex = index
            Self.appendRecord(names, to: &header)
        } catch {
            throw JobError(.input, error.description)
        }
        // From here a blank line is a row (which `send` refuses with its line), as `send` reads it.
        reader.keepsBlankLines = true

        final class GroupFile {
            let writer: AtomicFileWriter
            let lines: AtomicFileWriter
            var rows = 0

            init(writer: AtomicFileWriter, lines: AtomicFileWriter) {
                self.writer = writer
                self.lines = lines
            }
        }
        var groups: [Int64: GroupFile] = [:]
        var placements: [String: LocalTimeSchedule.Placement] = [:]
        let fallbackWriter = try AtomicFileWriter(path: Self.fallbackPath(folder, id))
        try fallbackWriter.write(Self.fallbackHeader + "\n")
        var plan = LocalTimePlan(groups: [], inputRows: 0, fallbackRows: 0, skippedRows: 0)
        var record: [UInt8] = []
        var fields: [String] = []
        while true {
            let line: Int?
            do throws(InputError) {
                line = try reader.next()
            } catch {
                throw JobError(.input, error.description)
            }
            guard let line else { break }
            plan.inputRows += 1
            if plan.inputRows & 4095 == 0, stopped() { return nil }
            let zone = zoneIndex < reader.fields.count ? reader.string(zoneIndex) : ""
            let placement: LocalTimeSchedule.Placement
            if let known = placements[zone] {
                placement = known
            } else {
                placement = schedule.placement(zone: zone)
                if placements.count < Self.zoneCacheLimit { placements[zone] = placement }
            }
            if case .fallback(let instant, let reason) = placement {
                plan.fallbackRows += 1
                if instant == nil { plan.skippedRows += 1 }
                let shown = zone.count > 80 ? String(zone.prefix(77)) + "..." : zone
                try fallbackWriter.write(
                    [String(line), shown, reason, instant == nil ? "skip" : schedule.fallback.description].map(csvField)
                        .joined(separator: ",") + "\n"
                )
            }
            guard let instant = placement.instant else { continue }
            let group: GroupFile
            if let existing = groups[instant] {
                group = existing
            } else {
                let path = Self.groupFolder(folder, id, instant)
                guard mkdir(path, 0o700) == 0 else {
                    throw JobError(.output, "\(path): cannot create the folder: \(String(cString: strerror(errno)))")
                }
                group = GroupFile(
                    writer: try AtomicFileWriter(path: path + "/audience.csv", bufferBytes: Self.groupBufferBytes),
                    lines: try AtomicFileWriter(path: path + "/lines.bin", bufferBytes: Self.groupBufferBytes)
                )
                try group.writer.write(header)
                // The header's lines are the audience's first.
                for headerLine in 0..<header.count(where: { $0 == 0x0A }) {
                    try Self.appendLine(headerLine + 1, to: group.lines)
                }
                groups[instant] = group
            }
            fields.removeAll(keepingCapacity: true)
            for index in 0..<reader.fields.count { fields.append(reader.string(index)) }
            record.removeAll(keepingCapacity: true)
            if !(fields.count == 1 && fields[0].isEmpty) {
                Self.appendRecord(fields, to: &record)
            } else {
                record = [0x0A]
            }
            try group.writer.write(record)
            // The audience's line for each line the record takes in the group's file.
            for _ in 0..<record.count(where: { $0 == 0x0A }) { try Self.appendLine(line, to: group.lines) }
            group.rows += 1
        }
        for (_, group) in groups {
            try group.writer.commit()
            try group.lines.commit()
        }
        try fallbackWriter.commit()
        plan.groups = groups.map { Group(instant: $0.key, rows: $0.value.rows) }.sorted { $0.instant < $1.instant }
        for group in plan.groups { CampaignFolder.sync(Self.groupFolder(folder, id, group.instant)) }
        let planWriter = try AtomicFileWriter(path: Self.planPath(folder, id))
        let encoded: Data
        do {
            encoded = try JSONEncoder().encode(plan)
        } catch {
            throw JobError(.output, "the plan cannot be written: \(error)")
        }
        try planWriter.write(Array(encoded))
        try planWriter.commit()
        CampaignFolder.sync(root)
        return plan
    }

    /// An entry of a `lines.bin`: the audience's line, 8 bytes little-endian.
    static func appendLine(_ line: Int, to writer: AtomicFileWriter) throws(JobError) {
        let value = UInt64(line).littleEndian
        try writer.write(withUnsafeBytes(of: value) { Array($0) })
    }

    /// One CSV record: the fields quoted where needed, ending in LF.
    static func appendRecord(_ fields: [String], to out: inout [UInt8]) {
        for (index, field) in fields.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            out += csvField(field).utf8
        }
        out.append(0x0A)
    }

    // MARK: The campaign's files

    /// The groups' reports added up: one report for the campaign (`seconds`: the runs' total).
    public static func mergeReports(_ reports: [JobReport]) -> JobReport? {
        guard let first = reports.first else { return nil }
        var merged = JobReport()
        merged.mode = first.mode
        merged.gateway = first.gateway
        merged.onUncertain = first.onUncertain
        merged.job = first.job
        for report in reports {
            merged.mergeJob(report)
            // The groups ran one after another, each on its own rows.
            merged.connections = max(merged.connections, report.connections)
            merged.inputRows += report.inputRows
            merged.seconds += report.seconds
        }
        merged.notificationsPerSecond = merged.seconds > 0 ? Double(merged.delivered) / merged.seconds : 0
        return merged
    }

    /// Joins the groups' CSV files named `name` (`rejects.csv`, `unsettled.csv`, `unregistered.csv`) into `path`:
    /// one header, each group's rows in order, each group file's name and line replaced by the audience's
    /// (`audience`, the line from the group's `lines.bin`). Streams: a record at a time.
    ///
    /// - Parameters:
    ///   - fileColumn: the 0-based column of the file's name (the line is the next one); -1: the file has none.
    public static func mergeCSV(
        _ name: String,
        fileColumn: Int,
        groups: [Int64],
        folder: CampaignFolder,
        id: String,
        audience: String,
        into path: String
    ) throws(JobError) {
        var writer: AtomicFileWriter?
        for instant in groups {
            let groupFolder = Self.groupFolder(folder, id, instant)
            let reader: CSVReader
            do throws(InputError) {
                reader = try CSVReader(path: groupFolder + "/" + name)
            } catch {
                continue
            }
            let map = open(groupFolder + "/lines.bin", O_RDONLY | O_CLOEXEC)
            defer { if map >= 0 { close(map) } }
            var first = true
            while true {
                let line: Int?
                do throws(InputError) {
                    line = try reader.next()
                } catch {
                    throw JobError(.output, "\(groupFolder)/\(name): \(error.description)")
                }
                guard line != nil else { break }
                var fields = (0..<reader.fields.count).map { reader.string($0) }
                if first {
                    first = false
                    if writer == nil {
                        writer = try AtomicFileWriter(path: path)
                        var record: [UInt8] = []
                        Self.appendRecord(fields, to: &record)
                        try writer?.write(record)
                    }
                    continue
                }
                if fileColumn >= 0, fields.count > fileColumn + 1, let groupLine = Int(fields[fileColumn + 1]) {
                    fields[fileColumn] = audience
                    fields[fileColumn + 1] = String(Self.originalLine(groupLine, map: map) ?? groupLine)
                }
                var record: [UInt8] = []
                Self.appendRecord(fields, to: &record)
                try writer?.write(record)
            }
        }
        try writer?.commit()
    }

    /// The audience's line of line `line` of a group's file, from its map.
    static func originalLine(_ line: Int, map: Int32) -> Int? {
        guard map >= 0, line >= 1 else { return nil }
        var value: UInt64 = 0
        let count = withUnsafeMutableBytes(of: &value) { pread(map, $0.baseAddress, 8, off_t((line - 1) * 8)) }
        guard count == 8 else { return nil }
        return Int(UInt64(littleEndian: value))
    }
}
