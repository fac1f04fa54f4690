import SalvoTestTraits
import Testing

@testable import SalvoRows

/// The repeat count split across threads gives the count of one thread, whatever the values' spread.
@Suite(.tags(.pure), .runs(.pure)) struct RepeatCountPartsTests {
    /// A value's repeats counted the plain way.
    private static func reference(_ values: [UInt64]) -> Int {
        values.count - Set(values).count
    }

    @Test(arguments: [1, 2, 3, 8])
    func partsCountAsOneThreadDoes(parts: Int) {
        var generator = SplitMix64(seed: UInt64(parts))
        var spread = (0..<300_000).map { _ in generator.next() }
        spread += spread.prefix(4321)
        // Zeros in both halves, and a value repeated far apart.
        spread += [0, 0, spread[9], spread[9]]
        spread.insert(0, at: 10)
        spread.shuffle(using: &generator)
        // Values crowded into a few buckets: the ranges of buckets are uneven.
        var crowded = (0..<120_000).map { UInt64($0 % 3) << 62 | UInt64($0 % 70_000) }
        crowded.shuffle(using: &generator)
        // All in one bucket: every part but one has nothing to count.
        let oneBucket = (0..<50_000).map { UInt64($0 % 30_000) }
        for values in [spread, crowded, oneBucket, [5, 5], [0, 0, 0], [1, 2, 3]] {
            #expect(TokenSource.repeats(values, parts: parts) == Self.reference(values))
        }
    }
}
