import APNSWire

/// What a job did with every row: the totals a person reads and the JSON a program reads.
///
/// Every valid row ends in exactly one of: confirmed, presumed, rejected, expired, uncertain (only with
/// `OnUncertain.report`; with `.resend` an uncertain row is sent again and ends elsewhere). So
/// `confirmed + presumed + rejected + expired + uncertain == validRows` for a finished job.
public struct JobReport: Codable, Hashable, Sendable {
    /// The protocol and format used ("binary command 2", "HTTP/2").
    public var mode: String = ""
    public var gateway: String = ""
    public var connections = 0
    /// HTTP/2 with `--connections auto`: the most connections the job could open (`connections` says how many it
    /// did); nil for a fixed count.
    public var maximumConnections: Int?
    /// HTTP/2: the shortest time from a request to its answer, in milliseconds (the distance to the server).
    public var roundTripMilliseconds: Double?
    /// Why `--connections auto` chose `connections` (the bound or the measurement that decided); nil otherwise.
    public var connectionsReason: String?
    /// The share of the input this job sent, when it sent one (`send --partition K/N`).
    public var partition: Partition?
    /// For a report merged from every partition of a job (`salvo report merge`): how many.
    public var mergedPartitions: Int?
    /// The input files with their sizes, so that reports of one job's partitions can be told from others.
    public var inputFiles: [InputFile]?

    /// Rows read from the input (valid and invalid).
    public var inputRows = 0
    /// Rows refused before sending (bad hex, wrong length, duplicates): see `rejects` of the token source.
    public var invalidInput = 0
    /// Rows that passed input validation.
    public var validRows = 0
    /// Valid rows not sent because the suppression list named their token (`send --suppress`).
    public var suppressed = 0
    /// Rows sent although the suppression list named their token: the device registered again after the list's
    /// timestamp (`send --registered-at`, Apple's rule). Counted in `validRows` too.
    public var reregistered = 0
    /// Valid rows whose token an earlier row of the input already holds, sent again (without `--dedupe`); nil
    /// when there were none.
    public var duplicates: Int?

    /// Accepted for certain: the gateway answered for a later notification on the same connection.
    public var confirmed = 0
    /// Presumed accepted: on a live connection longer than the settle time with no error.
    public var presumed = 0
    /// Refused by the gateway, by status (binary) or reason (HTTP/2).
    public var rejected: [String: Int] = [:]
    /// Not sent, or not sent again, because their expiry had passed.
    public var expired = 0
    /// On a connection that ended with no answer, and not resent (policy `report`).
    public var uncertain = 0

    /// Rows written again after the gateway discarded them (after an error on an earlier row, a shutdown,
    /// a processing error or a reset).
    public var resent = 0
    /// Rows that were on a connection that ended with no answer (resent or not, per the policy).
    public var uncertainEvents = 0
    /// What happens to uncertain rows: "resend" (at least once) or "report" (at most once).
    public var onUncertain = OnUncertain.resend.rawValue
    /// Valid rows with no end because the job stopped first (interrupted, or a fatal error): never written, or
    /// written and unanswered when it stopped. `confirmed + presumed + rejected + expired + uncertain + notSent`
    /// is `validRows`.
    public var notSent = 0
    /// Why the job stopped before every row was settled; nil when it ran to the end.
    public var stopped: String?
    /// Rows left uncertain because, sent alone, each made the gateway drop the connection with no answer (part of
    /// `uncertain`); nil when none did.
    public var droppedConnection: Int?
    public var reconnects = 0
    /// Reconnects by what ended the connection before (binary): an error response's reason (`InvalidToken`: one
    /// per invalid token, `Shutdown`, …) or a `ReconnectCause`. A dirty token list shows here.
    public var reconnectCauses: [String: Int] = [:]
    /// Barriers the gateway never answered: their connections were left after the answer timeout, the rows read
    /// long enough before presumed, the rest uncertain.
    public var unansweredBarriers = 0
    /// Error responses whose identifier named no unsettled notification (late or unknown).
    public var unmatchedErrors = 0
    public var bytesWritten = 0
    /// Notifications written to connections, every resend included.
    public var written = 0

    public var seconds = 0.0
    public var notificationsPerSecond = 0.0
    /// Seconds from the start of the run (`BulkSend.prepare`: opening the input, reading the journal, hashing the
    /// files, then connecting) to the first row handed to a connection: how long the run took to start sending.
    public var firstRowSeconds: Double?
    /// For a job kept in a journal (`send --journal`) that earlier runs began: what this run took over. The
    /// counts above cover the whole job, every run.
    public var resumed: JobResume?
    /// Outputs this run could not write whole (a full disk, an I/O error), each with what it lacks; nil when every
    /// output was written.
    public var outputFailures: [OutputFailure]?
    /// What makes this send one job beyond its input files and partition (the options that change what is sent, the
    /// payloads' hashes), for `salvo report merge` to compare; nil in a report of an older build.
    public var job: JobFingerprint?
    /// Why this report was written before the job returned (a second signal, and the job still running a second
    /// later): its counts are the last progress snapshot's, rows in flight are counted not sent, and no unsettled
    /// list was written whole. Nil for a job that returned.
    public var cutShort: String?
    /// The tokens the service reported gone, recorded beyond the files (`send --write-back`): how many were written,
    /// found recorded already, or failed; nil without a write-back.
    public var writeBack: WriteBackReport?

    public init() {}

    /// Rows refused by the gateway, all statuses together.
    public var rejectedTotal: Int { self.rejected.values.reduce(0, +) }
    /// Rows delivered (confirmed or presumed).
    public var delivered: Int { self.confirmed + self.presumed }
    /// Whether every row of the input was valid and delivered: the job's exit status.
    public var isComplete: Bool { self.invalidInput == 0 && self.delivered == self.validRows }

    /// Adds another shard's counts to these.
    public mutating func merge(_ other: JobReport) {
        self.confirmed += other.confirmed
        self.presumed += other.presumed
        for (key, count) in other.rejected { self.rejected[key, default: 0] += count }
        self.expired += other.expired
        self.uncertain += other.uncertain
        self.resent += other.resent
        self.uncertainEvents += other.uncertainEvents
        if let dropped = other.droppedConnection { self.droppedConnection = (self.droppedConnection ?? 0) + dropped }
        self.reconnects += other.reconnects
        for (key, count) in other.reconnectCauses { self.reconnectCauses[key, default: 0] += count }
        self.unansweredBarriers += other.unansweredBarriers
        self.unmatchedErrors += other.unmatchedErrors
        self.bytesWritten += other.bytesWritten
        self.written += other.written
    }

    /// Adds another whole job's report to this one (partitions of one input, or a campaign's groups): its outcomes
    /// (`merge`), its rows' counts that are not outcomes, and what it records of its stops, output failures,
    /// repeats and resumes. The input rows, connections and seconds are the caller's to combine: summed or the
    /// largest, as the jobs ran one after another or side by side.
    public mutating func mergeJob(_ other: JobReport) {
        self.merge(other)
        self.validRows += other.validRows
        self.invalidInput += other.invalidInput
        self.suppressed += other.suppressed
        self.reregistered += other.reregistered
        self.notSent += other.notSent
        if self.stopped == nil { self.stopped = other.stopped }
        if self.cutShort == nil { self.cutShort = other.cutShort }
        if let failures = other.outputFailures { self.outputFailures = (self.outputFailures ?? []) + failures }
        if let duplicates = other.duplicates { self.duplicates = (self.duplicates ?? 0) + duplicates }
        if let resumed = other.resumed {
            // The most runs any took, and what they took over, added up.
            var total = self.resumed ?? JobResume(run: 0, settledBefore: 0, inheritedUncertain: 0)
            total.run = max(total.run, resumed.run)
            total.settledBefore += resumed.settledBefore
            total.inheritedUncertain += resumed.inheritedUncertain
            self.resumed = total
        }
    }

    /// A few lines for a person.
    public var summary: String {
        var lines: [String] = []
        lines.append("\(self.mode) to \(self.gateway) over \(self.connections) connection(s)")
        if let maximumConnections {
            let roundTrip = self.roundTripMilliseconds.map { "\(Self.milliseconds($0)) ms" } ?? "not measured"
            lines.append(
                "connections auto: chose \(self.connections) (at most \(maximumConnections)); round trip \(roundTrip)"
            )
            if let reason = self.connectionsReason { lines.append("           \(reason)") }
        }
        if let partition { lines.append("partition  \(partition) (rows whose token hashes there; bad rows in 0)") }
        if let mergedPartitions { lines.append("partitions \(mergedPartitions), merged") }
        lines.append(
            "input      \(self.inputRows) rows: \(self.validRows) valid, \(self.invalidInput) invalid (each named with its file and line)"
        )
        if self.suppressed > 0 { lines.append("suppressed \(self.suppressed) (on the suppression list, not sent)") }
        if self.reregistered > 0 {
            lines.append("registered \(self.reregistered) again after their suppression: sent")
        }
        if let duplicates, duplicates > 0 {
            lines.append(
                "duplicates \(duplicates) rows repeat an earlier row's token (sent again; --dedupe leaves them out)"
            )
        }
        lines.append("delivered  \(self.delivered) (\(self.confirmed) confirmed, \(self.presumed) presumed)")
        let statuses = self.rejected.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }
        lines.append(
            "rejected   \(self.rejectedTotal)\(statuses.isEmpty ? "" : " (\(statuses.joined(separator: ", ")))")"
        )
        lines.append("expired    \(self.expired)")
        lines.append("uncertain  \(self.uncertain) left, \(self.uncertainEvents) seen (policy: \(self.onUncertain))")
        if let dropped = self.droppedConnection, dropped > 0 {
            lines.append(
                "dropped    \(dropped) rows, each sent alone, made the gateway drop the connection with no answer "
                    + "twice: left uncertain, not sent again (see the unsettled file)"
            )
        }
        let causes = self.reconnectCauses.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }
        lines.append(
            "resent     \(self.resent); reconnects \(self.reconnects)"
                + (causes.isEmpty ? "" : " (after \(causes.joined(separator: ", ")))")
        )
        if let warning = self.dirtyListWarning { lines.append("warning    " + warning) }
        if self.unansweredBarriers > 0 {
            lines.append(
                "barriers   \(self.unansweredBarriers) unanswered: the gateway went silent; rows it read before are "
                    + "presumed, not confirmed"
            )
        }
        let rate = Int(self.notificationsPerSecond.rounded())
        lines.append("time       \(Self.seconds(self.seconds)) s, \(rate) notifications/s")
        if let first = self.firstRowSeconds {
            lines.append("first row  \(Self.seconds(first)) s after the run began (input opened, connected)")
        }
        if let resumed = self.resumed {
            lines.append(
                "resumed    run \(resumed.run) of the job: \(resumed.settledBefore) rows settled by earlier runs, "
                    + "\(resumed.inheritedUncertain) uncertain (written, unsettled when a run ended)"
            )
            if let point = resumed.startedAt {
                let place =
                    point.offset == 0
                    ? "the top of file \(point.file + 1)" : "line \(point.line) of file \(point.file + 1)"
                lines.append(
                    "checkpoint reading began at \(place), after \(point.rows) rows already done with (read again "
                        + "beside the sending, only for this report)"
                )
            }
        }
        if let stopped = self.stopped { lines.append("stopped    \(stopped); \(self.notSent) rows not settled") }
        if let cutShort = self.cutShort { lines.append("cut short  \(cutShort)") }
        if let writeBack = self.writeBack { lines.append("write-back \(writeBack.summary)") }
        for failure in self.outputFailures ?? [] { lines.append("output     NOT WRITTEN: \(failure.summary)") }
        if !self.isComplete {
            lines.append("result     NOT every row delivered")
        } else if self.stopped != nil {
            // An input that failed midway: what was read went, and the rest was never read.
            lines.append("result     every row read was delivered, but the job stopped before the end of its input")
        } else {
            lines.append("result     every row delivered")
        }
        return lines.joined(separator: "\n")
    }

    /// Status names whose error response condemns the token: each closes a connection, so a list full of them makes
    /// the gateway close connections one after another.
    static let tokenClosings: Set<String> = ["InvalidToken", "InvalidTokenSize", "MissingDeviceToken"]

    /// Said when invalid tokens closed connections often (at least 5 times, and once in every 10,000 rows or more):
    /// every one costs a reconnect, and the push service treats rapid reconnects as an attack.
    public var dirtyListWarning: String? {
        let closes = self.reconnectCauses.filter { Self.tokenClosings.contains($0.key) }.values.reduce(0, +)
        let rows = max(self.written, self.validRows, 1)
        let dropped = self.reconnectCauses[ReconnectCause.closedWithoutAnswer, default: 0]
        if let rowsDropping = self.droppedConnection, rowsDropping > 0 {
            // Command 0 has no error response: a row the gateway refuses only ends the connection, and finding it
            // takes several connections.
            return "\(rowsDropping) rows made the gateway close the connection without an answer, "
                + "\(dropped) connections in all (command 0 names no bad row: each is found by sending rows alone). "
                + "Command 2 (--format 2) names the bad row in an error response; leave known bad tokens out with "
                + "--suppress."
        }
        guard closes >= 5, closes * 10_000 >= rows else { return nil }
        return "invalid tokens closed \(closes) connections (one in every \(rows / closes) rows written): the push "
            + "service counts frequent reconnects against the sender. Leave them out next time: pass this run's "
            + "--unregistered file (or the feedback service's list) to --suppress."
    }

    static func milliseconds(_ value: Double) -> String {
        String((value * 10).rounded() / 10)
    }

    static func seconds(_ value: Double) -> String {
        String((value * 1000).rounded() / 1000)
    }
}

/// An input file as a report names it.
public struct InputFile: Codable, Hashable, Sendable {
    public var path: String
    public var bytes: Int

    public init(path: String, bytes: Int) {
        self.path = path
        self.bytes = bytes
    }
}

/// What to do with rows whose fate is unknown because their connection ended without an answer.
public enum OnUncertain: String, Codable, Hashable, Sendable, CaseIterable {
    /// Send them again: nothing is lost, a few may arrive twice (at least once).
    case resend
    /// Report them and do not send them again: nothing arrives twice, a few may be lost (at most once).
    case report
}

/// A row the gateway refused, for the rejects file.
public struct RejectedRow: Hashable, Sendable, Codable {
    /// The input file the row came from.
    public var file: String
    public var line: Int
    public var token: String
    /// The status code (binary) or HTTP status (HTTP/2).
    public var status: Int
    /// The reason's name (`BadDeviceToken`; for a binary status, `ErrorStatus.reasonName`).
    public var reason: String

    public init(file: String = "", line: Int, token: String, status: Int, reason: String) {
        self.file = file
        self.line = line
        self.token = token
        self.status = status
        self.reason = reason
    }

    /// The CSV header of the rejects file.
    public static let csvHeader = "file,line,token,status,reason"

    /// One CSV line (fields quoted where needed).
    public var csvLine: String {
        [self.file, String(self.line), self.token, String(self.status), self.reason].map(csvField).joined(
            separator: ","
        )
    }
}

/// A token the service called inactive (HTTP/2 410 Unregistered), or that either interface refused as invalid:
/// written to a `SuppressionList` file for token pruning.
public struct UnregisteredToken: Hashable, Sendable, Codable {
    /// The input file the row came from.
    public var file: String
    /// The line of the token file.
    public var line: Int
    public var token: String
    /// Since when the token has been inactive (milliseconds since 1970), when the service said.
    public var timestamp: Int64?
    /// Why: `Unregistered`, `InvalidToken`, `BadDeviceToken`.
    public var reason: String

    public init(file: String = "", line: Int, token: String, timestamp: Int64?, reason: String = "Unregistered") {
        self.file = file
        self.line = line
        self.token = token
        self.timestamp = timestamp
        self.reason = reason
    }

    /// The token's entry of a suppression list: since the service's timestamp (milliseconds, rounded down to
    /// seconds), or since `now` (UNIX seconds) when the service gave none, as for an invalid-token refusal.
    public func suppressionEntry(now: Int64) -> SuppressionList.Entry? {
        guard let token = try? DeviceToken(hex: self.token) else { return nil }
        let seconds = self.timestamp.map { $0 >= 0 ? $0 / 1000 : ($0 - 999) / 1000 } ?? now
        return SuppressionList.Entry(token: token, timestamp: seconds, reason: self.reason)
    }
}

/// A CSV field, quoted when it holds a comma, a quote or a line break.
public func csvField(_ text: String) -> String {
    // By byte, not by `Character`: a CRLF is one `Character`, equal to neither "\r" nor "\n".
    guard text.utf8.contains(where: { $0 == UInt8(ascii: ",") || $0 == UInt8(ascii: "\"") || $0 == 0x0A || $0 == 0x0D })
    else { return text }
    return "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\""
}

extension String {
    fileprivate func replacingOccurrences(of target: String, with replacement: String) -> String {
        self.split(separator: target, omittingEmptySubsequences: false).joined(separator: replacement)
    }
}

/// What a run of a journaled job took over from the runs before it (`JobReport.resumed`).
public struct JobResume: Codable, Hashable, Sendable {
    /// This run's number: 2 for the first resume.
    public var run: Int
    /// Valid rows earlier runs settled (in the report's confirmed, presumed, rejected and expired): not sent again.
    public var settledBefore: Int
    /// Valid rows an earlier run wrote and did not settle (it was killed, or stopped with them unanswered): sent
    /// again with `--on-uncertain resend`, counted uncertain with `report`.
    public var inheritedUncertain: Int
    /// The journal's checkpoint the run started reading at: the rows before it (valid ones among them), read again
    /// off the sending path for this report; nil when it read from the top.
    public var startedAt: InputCheckpoint?

    public init(run: Int, settledBefore: Int, inheritedUncertain: Int, startedAt: InputCheckpoint? = nil) {
        self.run = run
        self.settledBefore = settledBefore
        self.inheritedUncertain = inheritedUncertain
        self.startedAt = startedAt
    }
}
