extension DeviceToken {
    /// A hash of the token's 32 bytes that is the same on every machine, in every process and every run
    /// (`hashValue` is seeded per process): each 8-byte word, read little-endian, is folded in through
    /// SplitMix64's finalizer. For choosing a token's partition of a job.
    @inlinable
    public var stableHash: UInt64 {
        var hash: UInt64 = 0x5A17_0A57_1E5D_0001
        hash = Self.mix(hash ^ UInt64(littleEndian: self.words.0))
        hash = Self.mix(hash ^ UInt64(littleEndian: self.words.1))
        hash = Self.mix(hash ^ UInt64(littleEndian: self.words.2))
        hash = Self.mix(hash ^ UInt64(littleEndian: self.words.3))
        return hash
    }

    @inlinable
    static func mix(_ value: UInt64) -> UInt64 {
        var z = value &+ 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
