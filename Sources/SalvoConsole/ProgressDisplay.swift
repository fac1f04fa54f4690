import ArgumentParser
import Foundation
import NIOConcurrencyHelpers
import SalvoRows

/// `--progress`: how a running job shows itself.
public enum ProgressOption: String, ExpressibleByArgument, CaseIterable, Sendable {
    /// A line rewritten in place on a terminal (standard error); nothing when it is not one, or with `--quiet`.
    case auto
    /// One JSON object per second on standard error, for scripts and CI logs (terminal or not).
    case json
    case none
}

/// Shows job snapshots (`JobProgress`, twice a second) as `--progress` says. Thread-safe: snapshots arrive on the
/// job's queues; the JSON mode's once-a-second pacing is kept under a lock.
public final class ProgressDisplay: Sendable {
    public enum Mode: Sendable {
        case none
        case line
        case json
    }

    public let mode: Mode
    /// Put before the line (a soak's round, say).
    public let prefix: String
    private let lastJSONSecond = NIOLockedValueBox(-1)

    public init(mode: Mode, prefix: String = "") {
        self.mode = mode
        self.prefix = prefix
    }

    public convenience init(_ option: ProgressOption, quiet: Bool, prefix: String = "") {
        switch option {
        case .json: self.init(mode: .json, prefix: prefix)
        case .none: self.init(mode: .none, prefix: prefix)
        case .auto: self.init(mode: !quiet && isatty(STDERR_FILENO) == 1 ? .line : .none, prefix: prefix)
        }
    }

    /// The callback for `BulkSend.run(progress:)`, nil when nothing is shown.
    public var callback: (@Sendable (JobProgress) -> Void)? {
        switch self.mode {
        case .none: nil
        case .line, .json: { [self] in self.show($0) }
        }
    }

    public func show(_ progress: JobProgress) {
        switch self.mode {
        case .none:
            return
        case .line:
            Self.write("\r\u{1B}[K" + self.prefix + Self.line(progress))
        case .json:
            let second = Int(progress.seconds)
            let due = self.lastJSONSecond.withLockedValue { last in
                guard second > last else { return false }
                last = second
                return true
            }
            if due { Self.write(Self.json(progress) + "\n") }
        }
    }

    /// Clears the line before the summary is printed.
    public func finish() {
        if case .line = self.mode { Self.write("\r\u{1B}[K") }
    }

    /// `settled/valid (pct), rate, ETA, then the counts per outcome`.
    static func line(_ progress: JobProgress) -> String {
        let report = progress.report
        let percent = progress.validRows > 0 ? 100 * progress.settled / progress.validRows : 100
        // With no connection open, the rate so far says nothing of the time left (the gateway may be gone).
        let connecting = progress.connections == 0 && progress.settled < progress.validRows
        let eta =
            connecting ? "no connection" : progress.secondsLeft.map { "ETA \(Int($0.rounded(.up))) s" } ?? "ETA –"
        var parts = [
            "\(progress.settled)/\(progress.validRows) settled (\(percent)%)", "\(Int(progress.rate))/s", eta,
            "delivered \(report.delivered)", "rejected \(report.rejectedTotal)",
        ]
        if report.expired > 0 { parts.append("expired \(report.expired)") }
        if report.uncertain > 0 { parts.append("uncertain \(report.uncertain)") }
        parts.append("resent \(report.resent)")
        parts.append("reconnects \(report.reconnects)")
        parts.append("in flight \(progress.inFlight)")
        return parts.joined(separator: ", ")
    }

    /// One JSON object: the counts so far, the rate and the time left.
    static func json(_ progress: JobProgress) -> String {
        let report = progress.report
        var fields: [(String, String)] = [
            ("seconds", String(format: "%.1f", progress.seconds)),
            ("validRows", "\(progress.validRows)"),
            ("settled", "\(progress.settled)"),
            ("delivered", "\(report.delivered)"),
            ("confirmed", "\(report.confirmed)"),
            ("presumed", "\(report.presumed)"),
            ("rejected", "\(report.rejectedTotal)"),
            ("expired", "\(report.expired)"),
            ("uncertain", "\(report.uncertain)"),
            ("resent", "\(report.resent)"),
            ("reconnects", "\(report.reconnects)"),
            ("written", "\(report.written)"),
            ("inFlight", "\(progress.inFlight)"),
            ("connections", "\(progress.connections)"),
            ("rate", "\(Int(progress.rate))"),
        ]
        if let left = progress.secondsLeft { fields.append(("etaSeconds", "\(Int(left.rounded(.up)))")) }
        return "{" + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
    }

    private static func write(_ text: String) {
        FileHandle.standardError.write(Data(text.utf8))
    }
}
