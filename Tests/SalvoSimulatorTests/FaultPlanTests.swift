import Foundation
import Testing

@testable import SalvoSimulator

@Suite struct FaultPlanTests {
    @Test func missingKeysTakeDefaults() throws {
        let json = #"{"name":"x","shutdown":{"everyAccepted":5},"slowReader":{"chunkSize":100}}"#
        let plan = try JSONDecoder().decode(FaultPlan.self, from: Data(json.utf8))
        #expect(plan.name == "x")
        #expect(plan.shutdown == FaultPlan.Shutdown(everyAccepted: 5, probability: 0))
        #expect(plan.slowReader == FaultPlan.SlowReader(chunkSize: 100, delayMilliseconds: 10, probability: 1))
        #expect(plan.reset == FaultPlan.Reset())
        #expect(plan.environment == .any)
    }

    @Test func optionsBuildTheSamePlanAsJSON() throws {
        var plan = FaultPlan()
        try plan.apply(options: [
            "seed=7", "environment=sandbox", "invalid-token=ab", "invalid-fraction=0.25", "shutdown-every=100",
            "reset-probability=0.5", "reset-scope=connection", "max-connects-per-second=3", "error-delay-ms=20",
            "uninstalled=com.example.app:cd", "uninstalled=com.example.app:ef", "online-after-s=60",
        ])
        #expect(plan.seed == 7 && plan.environment == .sandbox && plan.invalidTokens == ["ab"])
        #expect(plan.invalidTokenFraction == 0.25 && plan.shutdown.everyAccepted == 100)
        #expect(plan.reset == FaultPlan.Reset(probability: 0.5, scope: .connection, withinNotifications: 1000))
        #expect(plan.connectionLimits.maxConnectsPerSecond == 3 && plan.errorDelayMilliseconds == 20)
        #expect(plan.uninstalled == [FaultPlan.Uninstalled(topic: "com.example.app", tokens: ["cd", "ef"])])
        #expect(plan.devices.onlineAfterSeconds == 60)
        let roundTrip = try JSONDecoder().decode(FaultPlan.self, from: JSONEncoder().encode(plan))
        #expect(roundTrip == plan)
    }

    @Test func badOptionsSayWhatIsWrong() {
        var plan = FaultPlan()
        #expect(throws: SimulatorError.self) { try plan.apply(options: ["shutdown-probability=2"]) }
        #expect(throws: SimulatorError.self) { try plan.apply(options: ["no-such=1"]) }
        #expect(throws: SimulatorError.self) { try plan.apply(options: ["seed"]) }
    }

    @Test func shippedPlansLoad() throws {
        let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../data/faults").standardized.path
        for name in ["clean", "realistic", "hostile"] {
            let plan = try FaultPlan.load(contentsOf: "\(folder)/\(name).json")
            #expect(plan.name == name)
        }
        #expect(
            try FaultPlan.load(contentsOf: "\(folder)/clean.json")
                == {
                    var p = FaultPlan()
                    p.name = "clean"
                    return p
                }()
        )
    }
}
