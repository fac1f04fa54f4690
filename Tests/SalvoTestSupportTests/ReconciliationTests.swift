import Foundation
import SalvoBinary
import SalvoRows
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

@Suite(.tags(.pure), .runs(.pure)) struct ReconciliationTests {
    /// A verdict with these counts (decoded: `Verdict` is made by the simulator, and Codable for files).
    private func verdict(
        lost: Int = 0,
        duplicated: Int = 0,
        refused: Int = 0,
        unexpected: Int = 0,
        gone: Int = 0,
        wronglyDropped: Int = 0
    ) -> Verdict {
        let ledger = try! JSONSerialization.jsonObject(with: JSONEncoder().encode(LedgerSnapshot()))
        let fields: [String: Any] = [
            "expected": 100, "deliveredOnce": 100 - lost - duplicated - refused - gone, "neverDelivered": lost,
            "uninstalledNeverDelivered": gone, "wronglyDropped": wronglyDropped, "wronglyDroppedTokens": [String](),
            "deliveredMoreThanOnce": duplicated, "invalidNeverDelivered": refused, "invalidButDelivered": 0,
            "unexpected": unexpected, "listLimit": 0, "neverDeliveredTokens": [String](),
            "deliveredMoreThanOnceTokens": [String](), "invalidNeverDeliveredTokens": [String](),
            "unexpectedTokens": [String](), "displays": [String](), "ledger": ledger,
        ]
        return try! JSONDecoder().decode(Verdict.self, from: JSONSerialization.data(withJSONObject: fields))
    }

    @Test func exactlyOnceAgrees() {
        let reconciliation = Reconciliation(report: JobReport(), verdict: self.verdict())
        #expect(reconciliation.agrees)
        #expect(reconciliation.description.contains("exactly once"))
    }

    @Test func duplicatesOnlyAmongResentUncertainRows() {
        var report = JobReport()
        report.onUncertain = OnUncertain.resend.rawValue
        report.uncertainEvents = 3
        #expect(Reconciliation(report: report, verdict: self.verdict(duplicated: 3)).agrees)
        #expect(!Reconciliation(report: report, verdict: self.verdict(duplicated: 4)).agrees)
        report.onUncertain = OnUncertain.report.rawValue
        #expect(!Reconciliation(report: report, verdict: self.verdict(duplicated: 1)).agrees)
    }

    @Test func lossesOnlyAmongRowsLeftUncertain() {
        var report = JobReport()
        report.onUncertain = OnUncertain.report.rawValue
        report.uncertain = 2
        #expect(Reconciliation(report: report, verdict: self.verdict(lost: 2)).agrees)
        let tooMany = Reconciliation(report: report, verdict: self.verdict(lost: 3))
        #expect(!tooMany.agrees)
        #expect(tooMany.description.contains("DISAGREE"))
    }

    @Test func refusalsMustBeRejectedRowsAndNothingUnexpectedArrives() {
        #expect(!Reconciliation(report: JobReport(), verdict: self.verdict(refused: 1)).agrees)
        #expect(!Reconciliation(report: JobReport(), verdict: self.verdict(unexpected: 1)).agrees)
    }

    /// Suppressed rows are never sent: the simulator sees the invalid ones among them as refused and the
    /// uninstalled ones as correctly left out; a re-registered token left out is lost, and named.
    @Test func suppressedRowsAccountForRefusedAndUninstalledTokens() {
        var report = JobReport()
        report.rejected = ["InvalidToken": 2]
        report.suppressed = 5
        #expect(Reconciliation(report: report, verdict: self.verdict(refused: 4, gone: 3)).agrees)
        #expect(!Reconciliation(report: report, verdict: self.verdict(refused: 8)).agrees)
        #expect(!Reconciliation(report: report, verdict: self.verdict(refused: 1)).agrees)
        let wrong = Reconciliation(report: report, verdict: self.verdict(lost: 1, refused: 2, wronglyDropped: 1))
        #expect(!wrong.agrees)
        #expect(wrong.disagreements.contains { $0.contains("registered again") })
    }
}
