import SalvoBinary
import SalvoObservability
import SalvoRows

/// One round of a soak: what the sender reported, what the ledger proved, and the process around it.
public struct SoakRound: Codable, Sendable, Equatable {
    public var index: Int
    /// Seconds since the soak started, when the round started and how long it took.
    public var startedAt: Double
    public var seconds: Double
    public var rows: Int
    public var delivered: Int
    public var rejected: Int
    /// Rows the report left uncertain, and rows that were on a connection that ended without an answer.
    public var uncertain: Int
    public var uncertainEvents: Int
    public var resent: Int
    public var reconnects: Int
    /// Connections opened per second (the first of each shard, and every reconnect).
    public var connectsPerSecond: Double
    /// Rows settled per second.
    public var throughput: Double
    /// From the ledger: tokens never delivered, delivered more than once, and refused tokens accepted.
    public var lost: Int
    public var duplicated: Int
    public var invalidDelivered: Int
    /// What disagreed between the report and the ledger (empty when the round passed).
    public var problems: [String]
    /// The process after the round (its simulator shut down).
    public var after: ProcessSample
    /// The most resident memory seen while the round ran.
    public var peakResidentBytes: Int
    /// A broadcast round's channels and updates (nil for the device interfaces). Its `rows` are its channels,
    /// `delivered` the updates the service answered 200, `resent` the 429/500/503 answers (each sent again).
    public var broadcast: BroadcastCounts? = nil

    public var passed: Bool { self.problems.isEmpty }

    /// What the registry saw of a broadcast round.
    public struct BroadcastCounts: Codable, Sendable, Equatable {
        public var channelsCreated: Int
        public var channelsDeleted: Int
        /// Broadcasts the registry recorded (twice for a duplicate).
        public var updatesAccepted: Int
        /// Broadcast requests answered 429, 500 or 503: not taken, sent again.
        public var retriedAnswers: Int
        /// Channels without their update, and updates recorded more than once.
        public var missing: Int
        public var duplicates: Int
    }
}

/// A whole soak: every round with its samples, and the verdict with its reasons.
public struct SoakReport: Codable, Sendable {
    public var interface: String
    public var plan: String
    public var tokensPerRound: Int
    public var connections: Int
    public var onUncertain: String
    public var seconds: Double
    public var rounds: [SoakRound]
    /// Why the soak failed; empty when it passed.
    public var failures: [String]
    /// The rules the rounds were judged by, for people.
    public var rules: [String]

    public var passed: Bool { self.failures.isEmpty && !self.rounds.isEmpty }

    /// The last lines of a soak, for people.
    public var verdictLines: [String] {
        let rows = self.rounds.reduce(0) { $0 + $1.rows }
        let reconnects = self.rounds.reduce(0) { $0 + $1.reconnects }
        let lost = self.rounds.reduce(0) { $0 + $1.lost }
        let duplicated = self.rounds.reduce(0) { $0 + $1.duplicated }
        let thirds = SoakRules.thirds(self.rounds.count)
        func peak(_ range: Range<Int>) -> Int { self.rounds[range].map(\.peakResidentBytes).max() ?? 0 }
        let broadcasts = self.rounds.compactMap(\.broadcast)
        var lines = [
            "soak: \(self.passed ? "PASS" : "FAIL") — \(self.interface), plan \(self.plan), \(self.rounds.count) round(s), "
                + (broadcasts.isEmpty
                    ? "\(rows) rows, \(reconnects) reconnects, "
                    : "\(rows) channels, \(broadcasts.reduce(0) { $0 + $1.updatesAccepted }) updates, "
                        + "\(broadcasts.reduce(0) { $0 + $1.retriedAnswers }) retried, ")
                + "\(Int(self.seconds.rounded())) s"
        ]
        if !broadcasts.isEmpty {
            let missing = broadcasts.reduce(0) { $0 + $1.missing }
            let duplicates = broadcasts.reduce(0) { $0 + $1.duplicates }
            let created = broadcasts.reduce(0) { $0 + $1.channelsCreated }
            let deleted = broadcasts.reduce(0) { $0 + $1.channelsDeleted }
            // A broadcast is sent at most once: a channel whose row was left unsettled (its answer lost to a reset
            // connection) may miss its update, and the rules allow it; the line says so.
            let unsettled = self.rounds.reduce(0) { $0 + $1.uncertain }
            if missing == 0 && duplicates == 0 {
                lines.append("  registry: every channel got its update exactly once")
            } else if duplicates == 0 && self.rounds.allSatisfy(\.passed) {
                lines.append(
                    "  registry: no update twice; \(missing) channel(s) without their update, all among the "
                        + "\(unsettled) row(s) reported unsettled (sent at most once)"
                )
            } else {
                lines.append(
                    "  registry: \(missing) channel(s) without their update (\(unsettled) row(s) reported unsettled), "
                        + "\(duplicates) update(s) duplicated"
                )
            }
            lines.append("  channels: \(created) created, \(deleted) deleted")
        } else if !self.rounds.isEmpty {
            // What the ledger saw over every round: "exactly once" is the claim the faults try to break (duplicates
            // among rows resent as uncertain pass the rules, and are shown here all the same).
            lines.append(
                lost == 0 && duplicated == 0
                    ? "  ledger: every valid token delivered exactly once"
                    : "  ledger: \(lost) token(s) never delivered, \(duplicated) delivered more than once"
            )
        }
        if let thirds {
            lines.append(
                "  peak memory: first third \(peak(thirds.first) >> 20) MiB, middle \(peak(thirds.middle) >> 20) MiB, "
                    + "last \(peak(thirds.last) >> 20) MiB"
            )
        }
        lines += self.failures.map { "  FAIL: \($0)" }
        return lines
    }
}
