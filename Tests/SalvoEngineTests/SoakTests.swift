import Foundation
import SalvoEngine
import SalvoSimulator
import Testing

/// Long runs against the shipped realistic fault plan, off by default: `SALVO_SOAK_TOKENS=1000000 swift test
/// --filter SoakTests` runs one with that many tokens (bounded by the suite's time limit).
@Suite(.serialized, .enabled(if: SoakSize.tokens != nil), .timeLimit(.minutes(30)))
struct SoakTests {
    @Test(arguments: [OnUncertain.resend, .report])
    func realisticPlanLosesNothingBeyondWhatTheReportCallsUncertain(onUncertain: OnUncertain) async throws {
        let count = SoakSize.tokens ?? 0
        let plan = try FaultPlan.load(contentsOf: SoakSize.repository + "/data/faults/realistic.json")
        let harness = try await BulkSendHarness.start(tokens: count, plan: plan, seed: 77)
        let result = try await harness.run(try harness.configuration(connections: 4, onUncertain: onUncertain))
        let verdict = harness.verdict()
        try await harness.stop()

        let report = result.report
        #expect(verdict.unexpected == 0, "\(verdict.summary)")
        #expect(report.rejectedTotal == verdict.invalidNeverDelivered, "every refused token is reported, by row")
        switch onUncertain {
        case .resend:
            #expect(verdict.neverDelivered == 0, "\(verdict.summary)")
            #expect(verdict.deliveredMoreThanOnce <= report.uncertainEvents, "only uncertain rows are duplicated")
        case .report:
            #expect(verdict.deliveredMoreThanOnce == 0, "\(verdict.summary)")
            #expect(verdict.neverDelivered <= report.uncertain, "only uncertain rows may be lost")
        }
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
