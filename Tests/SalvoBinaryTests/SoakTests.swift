import Foundation
import SalvoBinary
import SalvoRows
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// Long runs against the shipped realistic fault plan, off by default: `SALVO_SOAK_TOKENS=1000000 swift test
/// --filter SoakTests` runs one with that many tokens (bounded by the suite's time limit).
@Suite(
    .tags(.network),
    .runs(.network),
    .serialized,
    .enabled(if: SoakSize.tokens != nil),
    .timeLimit(.minutes(30))
)
struct SoakTests {
    @Test(arguments: [OnUncertain.resend, .report])
    func realisticPlanLosesNothingBeyondWhatTheReportCallsUncertain(onUncertain: OnUncertain) async throws {
        let count = SoakSize.tokens ?? 0
        let plan = try FaultPlan.load(contentsOf: SoakSize.repository + "/data/faults/realistic.json")
        let harness = try await BulkSendHarness.start(tokens: count, plan: plan, seed: 77)
        let result = try await harness.run(try harness.configuration(connections: 4, onUncertain: onUncertain))
        let verdict = harness.verdict()
        let reconciliation = harness.reconcile(result)
        try await harness.stop()

        let report = result.report
        // Nothing unexpected, every refusal a rejected row, losses only among rows reported uncertain (report),
        // duplicates only among rows resent as uncertain (resend).
        #expect(reconciliation.agrees, "\(reconciliation)\n\(verdict.summary)")
        print("soak \(onUncertain) \(count) tokens: \(verdict.summary) | \(report.summary)")
    }
}

enum SoakSize {
    /// Tokens per soak run, from `SALVO_SOAK_TOKENS`; nil (the default) skips the soak suites.
    static let tokens: Int? = ProcessInfo.processInfo.environment["SALVO_SOAK_TOKENS"].flatMap(Int.init)
    /// The package's root folder, for the shipped fault plans.
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path
}
