import Foundation
import SalvoTestTraits
import Testing

@testable import SalvoSimulator

@Suite(.tags(.pure), .runs(.pure)) struct FaultPlanTests {
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

    @Test func latencyAndHTTP2FaultsComeFromOptionsAndJSON() throws {
        var plan = FaultPlan()
        try plan.apply(options: [
            "latency-ms=25", "jitter-ms=5", "h2-429-rate=0.1", "h2-retry-after-s=2", "h2-500-rate=0.01",
            "h2-503-rate=0.02", "h2-goaway-after=100", "h2-shrink-after=10", "h2-shrink-to=4", "h2-restore-after=30",
            "h2-answer-delay-ms=3", "h2-token-start-one=false", "h2-drop-to-one=true",
        ])
        #expect(plan.latencyMilliseconds == 25 && plan.jitterMilliseconds == 5)
        let http2 = try #require(plan.http2)
        #expect(http2.tooManyRequestsRate == 0.1 && http2.retryAfterSeconds == 2)
        #expect(http2.internalServerErrorRate == 0.01 && http2.serviceUnavailableRate == 0.02)
        #expect(http2.goAwayAfterStreams == 100 && http2.shrinkAfterStreams == 10 && http2.shrinkTo == 4)
        #expect(http2.restoreAfterStreams == 30)
        #expect(http2.responseDelayMilliseconds == 3)
        #expect(!http2.tokenConnectionsStartWithOneStream && http2.dropToOneAfterRejection)
        #expect(try JSONDecoder().decode(FaultPlan.self, from: JSONEncoder().encode(plan)) == plan)
        let json = #"{"latencyMilliseconds":50,"http2":{"dropToOneAfterRejection":true}}"#
        let decoded = try JSONDecoder().decode(FaultPlan.self, from: Data(json.utf8))
        #expect(decoded.latencyMilliseconds == 50 && decoded.jitterMilliseconds == 0)
        #expect(decoded.http2?.dropToOneAfterRejection == true)
        #expect(decoded.http2?.tokenConnectionsStartWithOneStream == true)
        #expect(throws: SimulatorError.self) { try plan.apply(options: ["h2-drop-to-one=maybe"]) }
    }

    @Test func tokensOfAnotherAppDecodeAndOldPlansStillLoad() throws {
        let hex = TestTokens.hex(TestTokens.token(1))
        let json = #"{"name":"f","foreignTokens":["\#(hex)"],"foreignTokenFraction":0.5}"#
        let plan = try JSONDecoder().decode(FaultPlan.self, from: Data(json.utf8))
        #expect(plan.foreignTokens == [hex] && plan.foreignTokenFraction == 0.5)
        #expect(try JSONDecoder().decode(FaultPlan.self, from: JSONEncoder().encode(plan)) == plan)
        let old = try JSONDecoder().decode(FaultPlan.self, from: Data(#"{"name":"old","invalidTokens":["ab"]}"#.utf8))
        #expect(old.foreignTokens.isEmpty && old.foreignTokenFraction == 0 && old.invalidTokens == ["ab"])
        var options = FaultPlan()
        options.name = "f"
        try options.apply(options: ["foreign-token=\(hex)", "foreign-fraction=0.5"])
        #expect(options == plan)

        var listed = FaultPlan()
        listed.foreignTokens = [hex]
        let compiled = try CompiledFaultPlan(listed)
        #expect(TestTokens.token(1).withUnsafeBytes { compiled.isForeignToTopic($0.baseAddress!) })
        #expect(!TestTokens.token(2).withUnsafeBytes { compiled.isForeignToTopic($0.baseAddress!) })
        #expect(!TestTokens.token(1).withUnsafeBytes { compiled.isInvalid($0.baseAddress!) })
        listed.foreignTokens = ["not hex"]
        #expect(throws: SimulatorError.self) { try CompiledFaultPlan(listed) }
        listed.foreignTokens = []
        listed.foreignTokenFraction = 1.5
        #expect(throws: SimulatorError.self) { try CompiledFaultPlan(listed) }
    }

    @Test func theForeignAndInvalidFractionsPickIndependentTokens() throws {
        var plan = FaultPlan()
        plan.invalidTokenFraction = 0.5
        plan.foreignTokenFraction = 0.5
        let compiled = try CompiledFaultPlan(plan)
        var (invalid, foreign, both) = (0, 0, 0)
        for index in 1...2000 {
            TestTokens.token(UInt32(index)).withUnsafeBytes { token in
                let isInvalid = compiled.isInvalid(token.baseAddress!)
                let isForeign = compiled.isForeignToTopic(token.baseAddress!)
                invalid += isInvalid ? 1 : 0
                foreign += isForeign ? 1 : 0
                both += isInvalid && isForeign ? 1 : 0
            }
        }
        #expect((800...1200).contains(invalid) && (800...1200).contains(foreign))
        // The same key would make both sets equal; independent keys overlap in about a quarter.
        #expect((350...650).contains(both), "\(both) of 2000 in both")
    }

    @Test func badOptionsSayWhatIsWrong() {
        var plan = FaultPlan()
        #expect(throws: SimulatorError.self) { try plan.apply(options: ["shutdown-probability=2"]) }
        #expect(throws: SimulatorError.self) { try plan.apply(options: ["no-such=1"]) }
        #expect(throws: SimulatorError.self) { try plan.apply(options: ["seed"]) }
    }

    @Test(arguments: [
        (#"{"name":"x","resetProbability":0.5}"#, "unknown key 'resetProbability'"),
        (#"{"reset":{"probability":0.5,"scpoe":"connection"}}"#, "unknown key 'reset.scpoe'"),
        (#"{"http2":{"goAwayAfter":3}}"#, "unknown key 'http2.goAwayAfter'"),
        (#"{"reset":{"probability":1.5}}"#, "reset.probability is a probability between 0 and 1, not 1.5"),
        (#"{"invalidTokenFraction":-0.1}"#, "invalidTokenFraction is a probability between 0 and 1, not -0.1"),
        (#"{"errorDelayMilliseconds":-5}"#, "errorDelayMilliseconds must be 0 or more, not -5"),
        (#"{"shutdown":{"everyAccepted":-1}}"#, "shutdown.everyAccepted must be 0 or more, not -1"),
        (#"{"http2":{"shrinkTo":0}}"#, "http2.shrinkTo must be 1 or more, not 0"),
    ])
    func plansWithUnknownKeysOrBadValuesAreRefusedNamingTheKey(json: String, message: String) {
        let error = #expect(throws: SimulatorError.self) { try FaultPlan.decode(Data(json.utf8)) }
        #expect(error?.reason.contains(message) == true, "\(error?.reason ?? "")")
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
