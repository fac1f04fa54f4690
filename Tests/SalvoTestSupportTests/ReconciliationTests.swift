import Foundation
import SalvoEngine
import SalvoSimulator
import SalvoTestSupport
import Testing

@Suite struct ReconciliationTests {
    /// A verdict with these counts (decoded: `Verdict` is made by the simulator, and Codable for files).
    private func verdict(lost: Int = 0, duplicated: Int = 0, refused: Int = 0, unexpected: Int = 0) -> Verdict {
        let ledger = try! JSONSerialization.jsonObject(with: JSONEncoder().encode(LedgerSnapshot()))
        let fields: [String: Any] = [
            "expected": 100, "deliveredOnce": 100 - lost - duplicated - refused, "neverDelivered": lost,
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
}
