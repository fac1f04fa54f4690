import SalvoBinary
import SalvoRows

/// One report for a job sent as N partitions by N workers (`send --partition K/N`): the same format as a send's
/// report, with every count added up.
///
/// Refuses reports that cannot be one job's: a report without a partition, partitions of different counts, a
/// partition missing or given twice, different input files, protocols or gateways, or uncertain-row policies, and
/// reports whose job fingerprints (`JobReport.job`: the payload's hash, the options that change what is sent, the
/// payload template files) differ, naming every difference. A report without a fingerprint (written by an older
/// build) cannot be checked: refused unless `force`.
public enum ReportMerge {
    public static func merge(_ reports: [JobReport], force: Bool = false) throws(JobError) -> JobReport {
        guard let first = reports.first else { throw JobError(.input, "no report to merge") }
        try Self.checkFingerprints(reports, force: force)
        guard let count = first.partition?.count else {
            throw JobError(.input, "report 1 names no partition: merge takes the reports of `send --partition K/N`")
        }
        var seen: [Int: Int] = [:]
        for (number, report) in reports.enumerated() {
            guard let partition = report.partition else {
                throw JobError(.input, "report \(number + 1) names no partition")
            }
            guard partition.count == count else {
                throw JobError(
                    .input,
                    "report \(number + 1) is partition \(partition), report 1 of \(count) partitions"
                )
            }
            if let earlier = seen[partition.index] {
                throw JobError(
                    .input,
                    "partition \(partition) is given twice (reports \(earlier + 1) and \(number + 1))"
                )
            }
            seen[partition.index] = number
            for (name, mine, theirs) in [
                ("input files", Self.describe(report.inputFiles), Self.describe(first.inputFiles)),
                ("protocol", report.mode, first.mode),
                ("gateway", report.gateway, first.gateway),
                ("uncertain-row policy", report.onUncertain, first.onUncertain),
            ] where mine != theirs {
                throw JobError(
                    .input,
                    "report \(number + 1) has other \(name) than report 1 (\(mine) against \(theirs)): not one job"
                )
            }
            guard report.inputRows == first.inputRows else {
                throw JobError(
                    .input,
                    "report \(number + 1) read \(report.inputRows) rows, report 1 \(first.inputRows)"
                )
            }
        }
        let missing = (0..<count).filter { seen[$0] == nil }
        guard missing.isEmpty else {
            throw JobError(
                .input,
                "partition\(missing.count > 1 ? "s" : "") \(missing.map { "\($0)/\(count)" }.joined(separator: ", ")) "
                    + "missing: a merged report needs every partition"
            )
        }

        var merged = JobReport()
        merged.mode = first.mode
        merged.gateway = first.gateway
        merged.onUncertain = first.onUncertain
        merged.inputFiles = first.inputFiles
        merged.inputRows = first.inputRows
        merged.mergedPartitions = count
        merged.job = first.job
        for report in reports {
            merged.mergeJob(report)
            merged.connections += report.connections
            // The workers ran side by side: the job took as long as the slowest.
            merged.seconds = max(merged.seconds, report.seconds)
        }
        merged.notificationsPerSecond = merged.seconds > 0 ? Double(merged.delivered) / merged.seconds : 0
        return merged
    }

    /// Every report's fingerprint against the first one's; reports without one only with `force`.
    private static func checkFingerprints(_ reports: [JobReport], force: Bool) throws(JobError) {
        let unchecked = reports.indices.filter { reports[$0].job == nil }.map { String($0 + 1) }
        if !unchecked.isEmpty && !force {
            throw JobError(
                .input,
                "report\(unchecked.count > 1 ? "s" : "") \(unchecked.joined(separator: ", ")) carr"
                    + "\(unchecked.count > 1 ? "y" : "ies") no job fingerprint (written by an older salvo): whether "
                    + "the parts sent one payload with one set of options cannot be checked; --force merges them anyway"
            )
        }
        guard let reference = reports.firstIndex(where: { $0.job != nil }), let expected = reports[reference].job
        else { return }
        for (number, report) in reports.enumerated() {
            guard let job = report.job else { continue }
            let differences = job.differences(from: expected)
            guard !differences.isEmpty else { continue }
            throw JobError(
                .input,
                "report \(number + 1) is not the job of report \(reference + 1) (report \(number + 1)'s value "
                    + "against report \(reference + 1)'s): \(differences.joined(separator: "; "))"
            )
        }
    }

    private static func describe(_ files: [InputFile]?) -> String {
        (files ?? []).map { "\($0.path) (\($0.bytes) bytes)" }.joined(separator: ", ")
    }

    /// Joins the rejects (or unregistered) CSV files of a job's partitions: one header, the rows of every file in
    /// input order (by file, then line).
    ///
    /// - Throws: `JobError(.input)` when the files' headers differ.
    public static func mergeCSV(
        _ texts: [(name: String, text: String)],
        inputFiles: [String]
    ) throws(JobError)
        -> String
    {
        var header: String?
        var rows: [(file: String, line: Int, text: Substring)] = []
        for (name, text) in texts {
            var lines = text.split(separator: "\n", omittingEmptySubsequences: true)
            guard let head = lines.first else { continue }
            lines.removeFirst()
            if let header, header != String(head) {
                throw JobError(.input, "\(name): header \(head) differs from \(header)")
            }
            header = String(head)
            for line in lines {
                let (file, rest) = Self.firstField(line)
                let number = Int(rest.prefix { $0 != "," }) ?? 0
                rows.append((file, number, line))
            }
        }
        let order = Dictionary(inputFiles.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
        rows.sort { (order[$0.file] ?? Int.max, $0.file, $0.line) < (order[$1.file] ?? Int.max, $1.file, $1.line) }
        guard let header else { return "" }
        return ([header] + rows.map { String($0.text) }).joined(separator: "\n") + "\n"
    }

    /// The first CSV field of `line` (unquoted) and what follows its comma.
    private static func firstField(_ line: Substring) -> (String, Substring) {
        guard line.first == "\"" else {
            let comma = line.firstIndex(of: ",") ?? line.endIndex
            return (String(line[..<comma]), comma < line.endIndex ? line[line.index(after: comma)...] : "")
        }
        var field = ""
        var index = line.index(after: line.startIndex)
        while index < line.endIndex {
            let character = line[index]
            index = line.index(after: index)
            if character == "\"" {
                if index < line.endIndex && line[index] == "\"" {
                    field.append("\"")
                    index = line.index(after: index)
                } else {
                    break
                }
            } else {
                field.append(character)
            }
        }
        if index < line.endIndex && line[index] == "," { index = line.index(after: index) }
        return (field, line[index...])
    }
}
