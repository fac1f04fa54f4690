import Foundation
import SalvoRows

/// The write-back (`SendRequest.writeBack`): once the job has ended and every row's outcome is final, the tokens the
/// service reported gone (the result's `unregistered` list, earlier runs' included for a journaled job) are recorded
/// where the request says, between the row files and the report, so that the report tells how it went.
///
/// A write-back that fails leaves every file written and is an output failure (the report's `outputFailures`, exit
/// status 3): a journaled job is not recorded finished, and the same command again sends nothing (every row is
/// settled) and tries the write-back again. The times the service gave are kept in the journal folder meanwhile
/// (`pendingName`), since the journal's reject log keeps none.
extension BulkSend {
    /// The file in the journal folder holding a failed write-back's tokens with their times, until one succeeds.
    static let pendingName = "write-back.pending.csv"

    /// Writes every output of the request: the row files, then the write-back (if any), then the report.
    /// The files are written (and synced) on `BlockingWork`'s threads; the write-back awaits its server.
    func writeOutputs(_ result: inout SendResult) async {
        guard let recorder = self.request.writeBack else {
            result = await BlockingWork.run { [self, result] in
                var result = result
                OutputFiles.write(&result, to: self.request.outputs, gate: self.outputGate)
                return result
            }
            return
        }
        var rows = self.request.outputs
        rows.report = nil
        let pending = self.journal.map { $0.directory + "/" + Self.pendingName }
        let (written, tokens) = await BlockingWork.run { [self, result, rows] in
            var result = result
            // The manifest is read on the journal's queue, which may be syncing: off the pool too.
            let runs = self.journal?.manifest.runs ?? 1
            OutputFiles.write(&result, to: rows, gate: self.outputGate)
            var tokens = result.unregistered.map(GoneToken.init)
            if let pending, runs > 1 { Self.addTimes(from: pending, to: &tokens) }
            return (result, tokens)
        }
        result = written
        let report = await recorder.record(tokens)
        result.report.writeBack = report
        result = await BlockingWork.run { [self, result] in
            var result = result
            if let failure = report.outputFailure {
                result.outputFailures.append(failure)
                if let pending { Self.keep(GoneToken.unique(tokens), in: pending) }
            } else if let pending {
                unlink(pending)
            }
            OutputFiles.write(&result, to: SendOutputs(report: self.request.outputs.report), gate: self.outputGate)
            return result
        }
    }

    /// Fills in the times an earlier run's failed write-back kept for tokens that have none here (rebuilt from the
    /// journal's reject log, which keeps no date).
    static func addTimes(from path: String, to tokens: inout [GoneToken]) {
        guard let data = FileManager.default.contents(atPath: path) else { return }
        var times: [String: Int64] = [:]
        for line in String(decoding: data, as: UTF8.self).split(separator: "\n").dropFirst() {
            let fields = line.split(separator: ",", omittingEmptySubsequences: false)
            guard fields.count == 3, let time = Int64(fields[2]) else { continue }
            times[String(fields[0])] = time
        }
        for index in tokens.indices where tokens[index].reportedAt == nil {
            tokens[index].reportedAt = times[tokens[index].token]
        }
    }

    /// Keeps `tokens` (`token,reason,reported_at_ms`) for the next run; best effort: without it, a retry records
    /// the tokens without the service's times.
    static func keep(_ tokens: [GoneToken], in path: String) {
        var text = "token,reason,reported_at_ms\n"
        for token in tokens {
            text += "\(token.token),\(csvField(token.reason)),\(token.reportedAt.map(String.init) ?? "")\n"
        }
        guard let writer = try? AtomicFileWriter(path: path) else { return }
        do {
            try writer.write(text)
            try writer.commit()
        } catch {
            return
        }
    }
}
