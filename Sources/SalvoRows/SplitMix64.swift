import APNSWire

/// SplitMix64: a small, fast, seedable generator, for repeatable backoff jitter and sample tokens.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) {
        self.state = seed
    }

    public mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A value in [0, 1).
    public mutating func nextUnit() -> Double {
        Double(self.next() >> 11) * 0x1.0p-53
    }
}

/// Distinct device tokens from a seed, four SplitMix64 words a token, for sample files, demos, benchmarks
/// and tests. SplitMix64 is a bijection of its counter, so the first word alone never repeats within 2⁶⁴
/// tokens.
public struct TokenGenerator: Sendable {
    private var words: SplitMix64

    public init(seed: UInt64) {
        self.words = SplitMix64(seed: seed &* 0x9E37_79B9_7F4A_7C15)
    }

    public mutating func next() -> DeviceToken {
        var words = (self.words.next(), self.words.next(), self.words.next(), self.words.next())
        return withUnsafeBytes(of: &words) { DeviceToken(unsafeBytes: $0) }
    }
}
