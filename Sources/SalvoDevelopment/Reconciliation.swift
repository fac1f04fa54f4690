import SalvoBinary
import SalvoRows
import SalvoSimulator

/// The sender's report checked against the simulator's verdict: what `salvo demo` prints and what the
/// end-to-end tests expect, decided in one place.
///
/// They agree when nothing arrived that was not expected, every token the plan refuses is a rejected row (or a
/// row the suppression list left out), no token registered again after its feedback time was left out,
/// nothing was lost beyond the rows the report leaves uncertain (policy `report`) or not sent, and nothing was duplicated
/// beyond the rows that were on a connection that ended without an answer and were resent (policy `resend`):
/// the binary protocol cannot know whether those arrived.
public struct Reconciliation: Sendable, CustomStringConvertible {
    public let report: JobReport
    public let verdict: Verdict

    public init(report: JobReport, verdict: Verdict) {
        self.report = report
        self.verdict = verdict
    }

    /// Expected valid tokens the ledger never saw.
    public var lost: Int { self.verdict.neverDelivered }
    /// Tokens the ledger saw more than once.
    public var duplicated: Int { self.verdict.deliveredMoreThanOnce }
    /// How many tokens may be missing: the rows the report calls uncertain and did not resend, and the rows it
    /// counts not sent (listed in the unsettled file: a stopped job's, or rows the service kept answering 429, 500
    /// or 503 until their attempts ran out).
    public var lossAllowed: Int { self.report.uncertain + self.report.notSent }
    /// How many tokens may arrive twice: the uncertain rows that were resent (none with policy `report`).
    public var duplicationAllowed: Int {
        self.report.onUncertain == OnUncertain.report.rawValue ? 0 : self.report.uncertainEvents
    }

    /// Every way the two disagree, one readable line each; empty when they agree.
    public var disagreements: [String] {
        var lines: [String] = []
        if self.verdict.unexpected > 0 {
            lines.append("\(self.verdict.unexpected) token(s) arrived that were never sent")
        }
        if self.verdict.invalidButDelivered > 0 {
            lines.append("\(self.verdict.invalidButDelivered) token(s) the plan refuses were accepted")
        }
        // Suppressed rows were never sent: the simulator counts the invalid ones among them as refused.
        // Rows that never had their answer (uncertain, not sent) may be tokens the plan refuses, too.
        let refused = self.verdict.invalidNeverDelivered
        let unanswered = self.report.uncertain + self.report.notSent
        if refused < self.report.rejectedTotal
            || refused > self.report.rejectedTotal + self.report.suppressed + unanswered
        {
            lines.append(
                "the report rejected \(self.report.rejectedTotal) row(s)"
                    + (self.report.suppressed > 0 ? " and suppressed \(self.report.suppressed)" : "")
                    + ", the simulator refused \(refused) token(s)"
            )
        }
        if self.verdict.wronglyDropped > 0 {
            lines.append(
                "\(self.verdict.wronglyDropped) token(s) registered again after the suppression list's time were "
                    + "left out (apply the list with the registration times: --registered-at)"
            )
        }
        if self.lost > self.lossAllowed {
            lines.append("\(self.lost) token(s) lost, \(self.lossAllowed) reported uncertain")
        }
        if self.duplicated > self.duplicationAllowed {
            lines.append(
                "\(self.duplicated) token(s) delivered more than once, \(self.duplicationAllowed) resent as uncertain"
            )
        }
        return lines
    }

    /// True when the ledger proves the report right (see the type's summary).
    public var agrees: Bool { self.disagreements.isEmpty }

    /// One conclusion for people.
    public var description: String {
        let problems = self.disagreements
        if !problems.isEmpty {
            return "The ledger and the report DISAGREE: " + problems.joined(separator: "; ") + "."
        }
        if self.duplicated == 0 && self.lost == 0 {
            return "The ledger agrees with the report: every valid token delivered exactly once; every refusal "
                + "accounted for."
        }
        var parts: [String] = []
        if self.lost > 0 {
            parts.append(
                "\(self.lost) token(s) never arrived, all among the \(self.lossAllowed) rows reported uncertain"
            )
        } else {
            parts.append("nothing lost")
        }
        if self.duplicated > 0 {
            parts.append(
                "\(self.duplicated) token(s) delivered more than once, all among the \(self.report.uncertainEvents) "
                    + "rows the report called uncertain (on connections that ended without an answer)"
            )
        }
        return "The ledger agrees with the report: " + parts.joined(separator: "; ") + "."
    }
}
