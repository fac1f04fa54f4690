import Foundation
import SalvoData
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

@testable import SalvoSoak

/// Broadcast rounds over real TLS against the embedded simulator: channels created, one update each, the registry's
/// verdict, the channels deleted. A clean plan and one that refuses broadcasts pass; a service that loses or repeats
/// updates fails the soak with the reason.
@Suite(.tags(.network), .runs(.network), .timeLimit(.minutes(2))) struct BroadcastSoakTests {
    static func soak(_ faults: BroadcastFaults?, rounds: Int = 2, channels: Int = 150) async throws -> SoakReport {
        var plan = FaultPlan()
        plan.broadcast = faults
        return try await SoakRunner.run(
            SoakConfiguration(
                interface: .broadcast,
                duration: .seconds(60),
                maximumRounds: rounds,
                plan: plan,
                tokens: channels
            )
        )
    }

    @Test func aCleanPlanGivesEveryChannelItsUpdateOnceAndDeletesThem() async throws {
        let report = try await Self.soak(nil)
        #expect(report.passed, "\(report.failures)")
        #expect(report.rounds.count == 2 && report.interface == "broadcast" && report.tokensPerRound == 150)
        for round in report.rounds {
            let counts = try #require(round.broadcast)
            #expect(
                counts
                    == .init(
                        channelsCreated: 150,
                        channelsDeleted: 150,
                        updatesAccepted: 150,
                        retriedAnswers: 0,
                        missing: 0,
                        duplicates: 0
                    )
            )
            #expect(round.rows == 150 && round.delivered == 150 && round.rejected == 0 && round.uncertain == 0)
        }
        #expect(
            report.verdictLines.first?.hasPrefix(
                "soak: PASS — broadcast, plan clean, 2 round(s), 300 channels, 300 updates, 0 retried"
            ) == true,
            "\(report.verdictLines)"
        )
        #expect(report.verdictLines.contains("  registry: every channel got its update exactly once"))
    }

    /// Refusals the publisher must wait out and send again: every channel still gets its update exactly once.
    @Test func refusedBroadcastsAreRetriedAndStillArriveOnce() async throws {
        let report = try await Self.soak(BroadcastFaults(tooManyRequestsRate: 0.2, serviceUnavailableRate: 0.05))
        #expect(report.passed, "\(report.failures)")
        for round in report.rounds {
            let counts = try #require(round.broadcast)
            #expect(counts.retriedAnswers > 0 && counts.updatesAccepted == 150 && counts.missing == 0)
            #expect(round.delivered == 150 && round.resent == counts.retriedAnswers)
        }
    }

    @Test func aLostUpdateFailsTheRoundWithTheReason() async throws {
        let report = try await Self.soak(BroadcastFaults(lostFraction: 0.05), rounds: 1)
        #expect(!report.passed)
        let round = try #require(report.rounds.first)
        #expect(round.lost > 0 && round.duplicated == 0 && round.delivered == 150)
        #expect(round.problems.first?.contains("update(s) lost") == true, "\(round.problems)")
        #expect(report.failures.first?.hasPrefix("round 1: \(round.lost) update(s) lost") == true, "\(report.failures)")
        #expect(report.verdictLines.first?.hasPrefix("soak: FAIL") == true)
        // The round's channels are deleted all the same.
        #expect(round.broadcast?.channelsDeleted == 150)
    }

    @Test func aDuplicatedUpdateFailsTheRoundWithTheReason() async throws {
        let report = try await Self.soak(BroadcastFaults(duplicatedFraction: 0.05), rounds: 1)
        #expect(!report.passed)
        let round = try #require(report.rounds.first)
        #expect(round.duplicated > 0 && round.lost == 0)
        // Each repeated update is held twice: as many duplicates as channels with one.
        #expect(round.problems.count == 1, "\(round.problems)")
        let reason = "\(round.duplicated) update(s) duplicated on \(round.duplicated) channel(s) (e.g. "
        #expect(round.problems.first?.hasPrefix(reason) == true, "\(round.problems)")
        #expect(report.verdictLines.contains { $0.contains("update(s) duplicated") })
    }

    /// One short round under every shipped plan passes (the hostile plan's broadcast refusals among them).
    @Test func everyShippedPlanPasses() async throws {
        for name in SalvoData.faultPlans {
            let plan = try FaultPlan.load(contentsOf: try #require(SalvoData.path("faults/\(name).json")))
            let report = try await SoakRunner.run(
                SoakConfiguration(
                    interface: .broadcast,
                    duration: .seconds(60),
                    maximumRounds: 1,
                    plan: plan,
                    tokens: 200
                )
            )
            #expect(report.passed, "\(name): \(report.failures)")
            if name == "hostile" { #expect((report.rounds.first?.broadcast?.retriedAnswers ?? 0) > 0) }
        }
    }
}
