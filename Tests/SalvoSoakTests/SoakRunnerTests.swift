import Foundation
import SalvoBinary
import SalvoData
import SalvoObservability
import SalvoRows
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

@testable import SalvoSoak

@Suite(.tags(.network), .runs(.network)) struct SoakRunnerTests {
    /// A gateway that loses a few accepted notifications (no error, no ledger entry): the soak fails and says so.
    @Test(arguments: SoakConfiguration.Interface.devicePush)
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
    @Test(arguments: SoakConfiguration.Interface.devicePush)
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

@Suite(.tags(.network), .runs(.network)) struct HTTP2FaultSoakTests {
    /// The hostile plan with its HTTP/2 faults at these rates.
    static func plan(goAway: Double, reset: Double, shrink: Double, burst: Double) throws -> FaultPlan {
        var plan = try FaultPlan.load(contentsOf: try #require(SalvoData.path("faults/hostile.json")))
        var faults = try #require(plan.http2)
        faults.goAwayRate = goAway
        faults.resetRate = reset
        faults.shrinkRate = shrink
        faults.errorBurstRate = burst
        plan.http2 = faults
        return plan
    }

    static func expectExact(_ report: SoakReport, rows: Int) {
        for round in report.rounds {
            #expect(round.passed, "\(round.problems)")
            #expect(round.reconnects > 0)
            #expect(round.lost == 0 && round.duplicated == 0 && round.invalidDelivered == 0)
            #expect(round.delivered + round.rejected == rows)
        }
    }

    /// The hostile plan's connection faults, GOAWAY and limit drops made frequent enough that every round meets
    /// them: connections end (GOAWAY with streams in flight, resets) and the stream limit drops, and still every row
    /// is settled and every valid token delivered exactly once. (Error bursts are left out here: a row whose every
    /// attempt meets a burst is rightly left unsent, which the next test bounds.)
    @Test func anHTTP2SoakUnderConnectionFaultsRecoversExactly() async throws {
        let plan = try Self.plan(goAway: 0.004, reset: 0.0005, shrink: 0.004, burst: 0)
        let report = try await SoakRunner.run(
            SoakConfiguration(interface: .h2, duration: .seconds(60), maximumRounds: 2, plan: plan, tokens: 3000)
        )
        #expect(report.rounds.count == 2)
        Self.expectExact(report, rows: 3000)
    }

    /// Resets and error bursts several times as frequent as the hostile plan's: each reset makes every stream in
    /// flight uncertain. Those resends are the connection's losses, not the row's attempts (the 429/500/503
    /// answers'), so a row caught in a few resets still goes again; a row whose attempts an error burst used up is
    /// listed as not sent, never rejected and never silently lost: every round agrees with the ledger, nothing
    /// arrives twice, and all but a few rows in a hundred are delivered. How many a burst catches depends on how
    /// many of a row's attempts fit in the burst, which moves with the machine's load (2.2 % in one CI run of a busy
    /// machine, under 2 % in the others): the bound says that retries work, the exact accounting is the claim.
    @Test func frequentResetsAndErrorBurstsLoseNoRowSilently() async throws {
        let plan = try Self.plan(goAway: 0.003, reset: 0.002, shrink: 0.003, burst: 0.005)
        let report = try await SoakRunner.run(
            SoakConfiguration(interface: .h2, duration: .seconds(120), maximumRounds: 3, plan: plan, tokens: 20_000)
        )
        for round in report.rounds {
            #expect(round.passed, "\(round.problems)")
            #expect(round.reconnects > 0)
            #expect(round.duplicated == 0 && round.invalidDelivered == 0)
            #expect(round.lost <= 20_000 / 25, "\(round.lost) rows not delivered")
        }
    }
}

@Suite(.tags(.network), .runs(.network)) struct ExternalSoakTests {
    /// A soak against a simulator that runs apart, judged through its control endpoint: the ledger is reset before
    /// every round, so each round's verdict is its own; a gateway that loses rows fails the soak the same way.
    @Test(arguments: [0.0, 0.01])
    func aRunningSimulatorIsJudgedThroughItsControlEndpoint(lost: Double) async throws {
        let folder = TestScratch.root.appendingPathComponent("salvo-ext-\(UUID().uuidString)")
            .path
        let certificates = try CertificateFactory()
        let paths = try certificates.write(to: folder, topic: "com.example.app")
        _ = try DevelopmentSigningKey.ensure(in: paths.folder)
        var simulatorConfiguration = SimulatorConfiguration(tls: .init(certificates))
        simulatorConfiguration.plan = try FaultPlan.load(
            contentsOf: try #require(SalvoData.path("faults/realistic.json"))
        )
        simulatorConfiguration.plan.lostFraction = lost
        let simulator = try await Simulator.start(simulatorConfiguration)
        let token = ControlToken.random()
        let control = try await SimulatorControlEndpoint.start(simulator: simulator, port: 0, token: token)
        let report: SoakReport
        do {
            report = try await SoakRunner.run(
                SoakConfiguration(
                    interface: .binary,
                    duration: .seconds(60),
                    maximumRounds: 3,
                    tokens: 3000,
                    external: SoakConfiguration.External(
                        host: "127.0.0.1",
                        port: simulator.gatewayPort,
                        control: try #require(URL(string: "http://127.0.0.1:\(control.port)")),
                        controlToken: token,
                        certificates: paths.folder
                    )
                )
            )
        } catch {
            await control.stop()
            try await simulator.shutdown()
            throw error
        }
        await control.stop()
        try await simulator.shutdown()
        #expect(report.rounds.count == 3)
        #expect(report.plan == "realistic")
        if lost == 0 {
            #expect(report.passed, "\(report.failures)")
            #expect(report.rounds.allSatisfy { $0.delivered + $0.rejected == 3000 && $0.lost == 0 })
        } else {
            #expect(!report.passed)
            #expect(report.rounds.allSatisfy { $0.lost > 0 })
        }
    }
}
