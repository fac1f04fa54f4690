import Foundation
import SalvoRows

extension BroadcastJob {
    /// What makes two runs the same job: a rerun with another input, template, app or header is refused rather
    /// than matched to the wrong rows.
    func fingerprint() throws -> String {
        let input = try Self.digest(self.options.inputPath)
        let template = try Self.digest(self.options.templateFile)
        return [
            "bundle \(self.options.bundleID)", "input \(input)", "template \(template)",
            "channel-column \(self.options.channelColumn)", "expiration \(self.options.expiration)",
            "priority \(self.options.priority)", "partition \(self.options.partition?.description ?? "all")",
        ].joined(separator: "\n") + "\n"
    }

    /// FNV-1a 64 of a file's bytes, in hex.
    static func digest(_ path: String) throws -> String {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw InputError(file: path, line: nil, message: "cannot read the file: \(error)")
        }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in data {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01b3
        }
        return String(hash, radix: 16) + " (\(data.count) bytes)"
    }

    /// The row journal in `--journal DIR` (`rows.state`, `rejects.log`, and `broadcast-job.txt` naming the job),
    /// nil without one.
    ///
    /// The journal's lock (`JournalLock`, which creates the folder) is taken first and held by the caller for the
    /// whole run: a second run of the job at once is refused, naming the first, so no update goes out twice.
    ///
    /// - Throws: `JobError(.configuration)` when the folder holds another job's journal; `JobError(.input)` when
    ///   another run holds it.
    func openJournal(lineCount: Int) throws -> (rows: RowJournal, lock: JournalLock)? {
        guard let directory = self.options.journalDirectory else { return nil }
        let lock = try JournalLock.acquire(directory, waitOption: nil)
        let manifest = directory + "/broadcast-job.txt"
        let fingerprint = try self.fingerprint()
        if let existing = try? String(contentsOfFile: manifest, encoding: .utf8) {
            guard existing == fingerprint else {
                throw JobError(
                    .configuration,
                    "--journal \(directory) holds another broadcast's journal (its input, template or headers "
                        + "differ): give a new folder to start a new broadcast"
                )
            }
        } else {
            let writer = try AtomicFileWriter(path: manifest)
            try writer.write(fingerprint)
            try writer.commit()
        }
        let rows = try RowJournal(
            statePath: directory + "/rows.state",
            logPath: directory + "/rejects.log",
            lineCounts: [lineCount]
        )
        return (rows, lock)
    }

    /// The report (JSON), the rejects (`line,channel_id,status,reason`) and the unsettled rows
    /// (`line,channel_id,state`), each written whole; a file that cannot be is named in `outputFailures`.
    func writeOutputs(_ result: inout Result) {
        if let path = self.options.rejectsPath {
            let lines = result.rejects.map { [String($0.line), $0.channel, String($0.status), $0.reason] }
            self.writeCSV(path, header: "line,channel_id,status,reason", lines, into: &result)
        }
        if let path = self.options.unsettledPath {
            let lines = result.unsettled.map { [String($0.line), $0.channel, $0.state] }
            self.writeCSV(path, header: "line,channel_id,state", lines, into: &result)
        }
        if let path = self.options.reportPath {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            do {
                let data = try encoder.encode(result.report)
                let writer = try AtomicFileWriter(path: path)
                try writer.write(Array(data))
                try writer.write("\n")
                try writer.commit()
            } catch {
                result.outputFailures.append("\(path): \(error)")
            }
        }
    }

    private func writeCSV(_ path: String, header: String, _ rows: [[String]], into result: inout Result) {
        do {
            let writer = try AtomicFileWriter(path: path)
            try writer.write(header + "\n")
            for row in rows { try writer.write(row.map(csvField).joined(separator: ",") + "\n") }
            try writer.commit()
        } catch {
            result.outputFailures.append("\(error)")
        }
    }
}
