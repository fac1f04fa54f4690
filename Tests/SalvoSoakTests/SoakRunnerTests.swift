import Foundation
import SalvoData
import SalvoEngine
import SalvoSimulator
import Testing

@testable import SalvoSoak

@Suite struct SoakRunnerTests {
    /// A gateway that loses a few accepted notifications (no error, no ledger entry): the soak fails and says so.
    @Test(arguments: SoakConfiguration.Interface.allCases)
    func aLostRowFailsTheSoakWithTheReason(interface: SoakConfiguration.Interface) async throws {
        var plan = FaultPlan()
        plan.lostFraction = 0.01
        let report = try await SoakRunner.run(
            SoakConfiguration(interface: interface, duration: .seconds(60), maximumRounds: 2, plan: plan, tokens: 2000)
        )
        #expect(report.rounds.count == 2)
        #expect(!report.passed)
        #expect(report.rounds.allSatisfy { $0.lost > 0 && !$0.passed })
        #expect(report.failures.first?.contains("token(s) lost") == true)
        #expect(report.verdictLines.first?.hasPrefix("soak: FAIL") == true)
    }

    /// One short round under every shipped plan, over both interfaces, passes.
    @Test(arguments: SoakConfiguration.Interface.allCases)
    func everyShippedPlanPasses(interface: SoakConfiguration.Interface) async throws {
        let names = SalvoData.faultPlans
        #expect(names == ["clean", "demo", "hostile", "realistic"])
        for name in names {
            let plan = try FaultPlan.load(contentsOf: try #require(SalvoData.path("faults/\(name).json")))
            let report = try await SoakRunner.run(
                SoakConfiguration(
                    interface: interface,
                    duration: .seconds(60),
                    maximumRounds: 1,
                    plan: plan,
                    tokens: 1000
                )
            )
            #expect(report.passed, "\(name): \(report.failures)")
            #expect(report.rounds.first?.rows == 1000)
        }
    }
}
