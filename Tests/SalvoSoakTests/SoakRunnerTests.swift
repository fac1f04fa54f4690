import Foundation
import SalvoData
import SalvoEngine
import SalvoObservability
import SalvoSimulator
import SalvoTestSupport
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

@Suite struct ExternalSoakTests {
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
        let control = try await SimulatorControlEndpoint.start(simulator: simulator, port: 0)
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
