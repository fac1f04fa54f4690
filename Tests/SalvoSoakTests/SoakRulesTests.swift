import SalvoObservability
import SalvoTestTraits
import Testing

@testable import SalvoSoak

/// A round with these facts (everything else ordinary).
func round(
    _ index: Int,
    memory: Int = 100 << 20,
    descriptors: Int = 10,
    threads: Int = 8,
    problems: [String] = []
) -> SoakRound {
    SoakRound(
        index: index,
        startedAt: Double(index - 1) * 5,
        seconds: 5,
        rows: 1000,
        delivered: 990,
        rejected: 10,
        uncertain: 0,
        uncertainEvents: index % 3,
        resent: 20,
        reconnects: 11,
        connectsPerSecond: 2.2,
        throughput: 200 + Double(index),
        lost: 0,
        duplicated: 0,
        invalidDelivered: 0,
        problems: problems,
        after: ProcessSample(
            residentBytes: memory - (4 << 20),
            peakResidentBytes: memory,
            openDescriptors: descriptors,
            threads: threads,
            cpuSeconds: 1
        ),
        peakResidentBytes: memory
    )
}

@Suite(.tags(.pure), .runs(.pure)) struct SoakRulesTests {
    @Test func steadyRoundsPass() {
        let rounds = (1...9).map { round($0, memory: (100 + $0 % 3) << 20, descriptors: 10 + $0 % 2) }
        #expect(SoakRules.failures(rounds).isEmpty)
    }

    @Test func memoryThatKeepsGrowingFails() {
        let rounds = (1...9).map { round($0, memory: (100 + 10 * $0) << 20) }
        let failures = SoakRules.failures(rounds)
        #expect(failures.count == 1)
        #expect(failures.first?.hasPrefix("memory keeps growing") == true)
        // Within 10 % (and the 8 MiB of slack): no failure.
        let calm = (1...9).map { round($0, memory: (100 + ($0 > 6 ? 9 : 0)) << 20) }
        #expect(SoakRules.failures(calm).isEmpty)
        // Warm-up: a step in the first third, then flat, is no leak.
        let warming = (1...9).map { round($0, memory: ($0 < 3 ? 60 : 120) << 20) }
        #expect(SoakRules.failures(warming).isEmpty)
    }

    @Test func descriptorsOrThreadsThatKeepGrowingLeak() {
        let leaking = (1...6).map { round($0, descriptors: 10 + 2 * $0) }
        #expect(SoakRules.failures(leaking).map { $0.prefix(17) } == ["descriptors leak:"])
        let threads = (1...9).map { round($0, threads: 8 + 2 * $0) }
        #expect(SoakRules.failures(threads).first?.hasPrefix("threads leak") == true)
        // A thread pool that grows by two under load and stays is no leak.
        let pool = (1...9).map { round($0, threads: $0 > 3 ? 10 : 8) }
        #expect(SoakRules.failures(pool).isEmpty)
    }

    @Test func trendsNeedEnoughRoundsButEveryRoundIsJudged() {
        let few = (1...5).map { round($0, memory: (100 * $0) << 20, descriptors: 10 * $0) }
        #expect(SoakRules.failures(few).isEmpty, "five rounds say nothing about a trend")
        let bad = [round(1), round(2, problems: ["3 token(s) lost, 0 reported uncertain"])]
        #expect(SoakRules.failures(bad) == ["round 2: 3 token(s) lost, 0 reported uncertain"])
    }
}

@Suite(.tags(.pure), .runs(.pure)) struct SoakVerdictLineTests {
    static func report(_ rounds: [SoakRound]) -> SoakReport {
        SoakReport(
            interface: "h2",
            plan: "hostile",
            tokensPerRound: 1000,
            connections: 2,
            onUncertain: "resend",
            seconds: 10,
            rounds: rounds,
            failures: SoakRules.failures(rounds),
            rules: SoakRules.descriptions
        )
    }

    @Test func theVerdictSaysWhetherEveryTokenArrivedExactlyOnce() {
        #expect(
            Self.report([round(1), round(2)]).verdictLines == [
                "soak: PASS — h2, plan hostile, 2 round(s), 2000 rows, 22 reconnects, 10 s",
                "  ledger: every valid token delivered exactly once",
            ]
        )
        // Duplicates among rows resent as uncertain pass the rules, and are still told.
        var resent = round(2)
        resent.duplicated = 2
        let lines = Self.report([round(1), resent]).verdictLines
        #expect(lines.first?.hasPrefix("soak: PASS") == true)
        #expect(lines.dropFirst().first == "  ledger: 0 token(s) never delivered, 2 delivered more than once")
        #expect(Self.report([]).verdictLines.count == 1, "no rounds, no claim about the ledger")
    }
}
