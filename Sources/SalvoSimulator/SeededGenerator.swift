/// A small, fast, seedable random number generator (SplitMix64).
///
/// Fault plans must be repeatable: the same plan and seed give the same faults, run after run. The
/// system generator cannot be seeded, so every random decision in the simulator draws from one of
/// these, seeded from the plan's seed and a stable number (a connection's serial number, a token).
/// A value type; each owner (one connection, confined to its event loop) keeps its own.
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// Creates a generator whose sequence depends only on `seed` and `stream`.
    public init(seed: UInt64, stream: UInt64 = 0) {
        // Mixing the stream in through one SplitMix step keeps nearby streams uncorrelated.
        var mixer = seed ^ (stream &* 0x9E37_79B9_7F4A_7C15)
        self.state = SeededGenerator.mix(&mixer)
    }

    public mutating func next() -> UInt64 {
        SeededGenerator.mix(&self.state)
    }

    /// True with probability `p` (0 → never, 1 → always).
    public mutating func chance(_ p: Double) -> Bool {
        guard p > 0 else { return false }
        guard p < 1 else { return true }
        return Double(self.next() >> 11) * 0x1p-53 < p
    }

    @inline(__always)
    private static func mix(_ state: inout UInt64) -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
