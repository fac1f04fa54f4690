/// The rules a soak is judged by, as a pure function of its rounds (tested without running one).
///
/// - Every round: nothing lost beyond the rows the report left uncertain or not sent (listed as unsettled), nothing
///   duplicated beyond the rows that were on a connection that ended without an answer, no refused token delivered
///   (`Reconciliation`); for broadcasts, no update held twice (a broadcast is sent at most once) and every channel
///   of the round deleted at its end (`BroadcastSoakTarget`).
/// - Memory (with at least `minimumRoundsForTrends` rounds): the peak resident memory of the last third of the
///   rounds may exceed the middle third's by at most 10 % (and 8 MiB, below which allocator noise dominates). The
///   first third is warm-up: the allocator's arenas, caches and thread pools grow in steps while the first rounds
///   run, then hold (seen: 60 → 104 → 120 MiB over 84 clean rounds of 100,000, then flat); a leak keeps growing
///   from the middle third to the last.
/// - Descriptors and threads (the same number of rounds): counted after each round, once its simulator has shut
///   down; they leak when every count of the last third exceeds every count of the first third by more than a
///   slack (2 descriptors; 4 threads, as Dispatch's worker pool grows under load and keeps a few idle threads).
public enum SoakRules {
    public static let minimumRoundsForTrends = 6
    public static let memoryGrowth = 0.10
    public static let memorySlackBytes = 8 << 20
    public static let descriptorSlack = 2
    public static let threadSlack = 4

    public static var descriptions: [String] {
        [
            "every round: nothing lost beyond rows reported uncertain or not sent, nothing duplicated beyond rows on "
                + "connections that ended without an answer, no refused token delivered (broadcast: every channel's "
                + "update recorded once, none rejected, every channel deleted)",
            "memory (\(minimumRoundsForTrends)+ rounds): the last third's peak resident memory at most 10 % (and "
                + "8 MiB) above the middle third's (the first third is warm-up)",
            "descriptors and threads (\(minimumRoundsForTrends)+ rounds), counted between rounds: the last third's "
                + "lowest count at most \(descriptorSlack) descriptors or \(threadSlack) threads above the first "
                + "third's highest",
        ]
    }

    /// The first, middle and last third of `count` rounds, when there are enough rounds to compare them.
    public static func thirds(_ count: Int) -> (first: Range<Int>, middle: Range<Int>, last: Range<Int>)? {
        guard count >= Self.minimumRoundsForTrends else { return nil }
        let third = count / 3
        return (0..<third, third..<(count - third), (count - third)..<count)
    }

    /// Every failure, one readable line each; empty when the soak passed.
    public static func failures(_ rounds: [SoakRound]) -> [String] {
        var failures: [String] = []
        for round in rounds where !round.passed {
            failures.append("round \(round.index): " + round.problems.joined(separator: "; "))
        }
        guard let thirds = Self.thirds(rounds.count) else { return failures }
        let first = rounds[thirds.first]
        let last = rounds[thirds.last]
        let middlePeak = rounds[thirds.middle].map(\.peakResidentBytes).max() ?? 0
        let lastPeak = last.map(\.peakResidentBytes).max() ?? 0
        let allowed = max(Int(Double(middlePeak) * (1 + Self.memoryGrowth)), middlePeak + Self.memorySlackBytes)
        if lastPeak > allowed {
            failures.append(
                "memory keeps growing: the last third's peak is \(lastPeak >> 20) MiB, the middle third's "
                    + "\(middlePeak >> 20) MiB (allowed: \(allowed >> 20) MiB)"
            )
        }
        for (name, value, slack) in [
            ("descriptors", \SoakRound.after.openDescriptors, Self.descriptorSlack),
            ("threads", \SoakRound.after.threads, Self.threadSlack),
        ] {
            let firstHighest = first.map { $0[keyPath: value] }.max() ?? 0
            let lastLowest = last.map { $0[keyPath: value] }.min() ?? 0
            if lastLowest > firstHighest + slack {
                failures.append(
                    "\(name) leak: at least \(lastLowest) open after each of the last third's rounds, at most "
                        + "\(firstHighest) after the first third's"
                )
            }
        }
        return failures
    }
}
