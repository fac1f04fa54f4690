/// Hashes of raw 32-byte device tokens and of payloads, for the simulator's tables and digests.
///
/// Device tokens are random in production but crafted in tests (`00…01`, `00…02`), so the hash
/// mixes all four 64-bit words instead of trusting any one of them. Payload digests only have to
/// tell payloads apart in a verdict, not resist an attacker: a fast 8-bytes-at-a-time mix.
public enum TokenHash {
    /// A 64-bit hash of the 32 bytes at `token`, keyed by `seed`.
    @inline(__always)
    public static func hash(_ token: UnsafeRawPointer, seed: UInt64 = 0) -> UInt64 {
        let a = token.loadUnaligned(fromByteOffset: 0, as: UInt64.self)
        let b = token.loadUnaligned(fromByteOffset: 8, as: UInt64.self)
        let c = token.loadUnaligned(fromByteOffset: 16, as: UInt64.self)
        let d = token.loadUnaligned(fromByteOffset: 24, as: UInt64.self)
        var h = seed ^ 0x2545_F491_4F6C_DD1D
        h = (h ^ a) &* 0x9E37_79B9_7F4A_7C15
        h = (h ^ (h >> 29) ^ b) &* 0xBF58_476D_1CE4_E5B9
        h = (h ^ (h >> 32) ^ c) &* 0x94D0_49BB_1331_11EB
        h = (h ^ (h >> 29) ^ d) &* 0x9E37_79B9_7F4A_7C15
        // A multiply carries a bit only upward, so the last word's high bits (a counter's last hex digits, in a
        // token written out as hex) reach the low bits, which pick a table's slot, only through this finalizer
        // (MurmurHash3's): without it, tokens that differ in their last byte alone shared a slot, and a table of
        // counted tokens probed runs of 256.
        h = (h ^ (h >> 33)) &* 0xFF51_AFD7_ED55_8CCD
        h = (h ^ (h >> 33)) &* 0xC4CE_B9FE_1A85_EC53
        return h ^ (h >> 33)
    }

    /// True when the 32 bytes at `a` equal the 32 bytes at `b`.
    @inline(__always)
    public static func equal(_ a: UnsafeRawPointer, _ b: UnsafeRawPointer) -> Bool {
        (a.loadUnaligned(fromByteOffset: 0, as: UInt64.self) ^ b.loadUnaligned(fromByteOffset: 0, as: UInt64.self))
            | (a.loadUnaligned(fromByteOffset: 8, as: UInt64.self) ^ b.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
            | (a.loadUnaligned(fromByteOffset: 16, as: UInt64.self)
                ^ b.loadUnaligned(fromByteOffset: 16, as: UInt64.self))
            | (a.loadUnaligned(fromByteOffset: 24, as: UInt64.self)
                ^ b.loadUnaligned(fromByteOffset: 24, as: UInt64.self))
            == 0
    }

    /// True for a stable, seeded fraction of all tokens: the same token always gets the same answer
    /// for the same seed, whatever order or connection it arrives on.
    @inline(__always)
    public static func isInFraction(_ token: UnsafeRawPointer, fraction: Double, seed: UInt64) -> Bool {
        guard fraction > 0 else { return false }
        guard fraction < 1 else { return true }
        return Double(hash(token, seed: seed) >> 11) * 0x1p-53 < fraction
    }

    /// A 64-bit digest of a payload (never 0, so 0 can mean "nothing").
    @inline(__always)
    public static func digest(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        var h: UInt64 = 0xCBF2_9CE4_8422_2325 ^ UInt64(bytes.count)
        guard let base = bytes.baseAddress else { return h | 1 }
        var offset = 0
        let count = bytes.count
        while offset + 8 <= count {
            let word = base.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            h = (h ^ word) &* 0x100_0000_01B3
            h ^= h >> 29
            offset += 8
        }
        while offset < count {
            h = (h ^ UInt64(base.load(fromByteOffset: offset, as: UInt8.self))) &* 0x100_0000_01B3
            offset += 1
        }
        h = (h ^ (h >> 32)) &* 0xBF58_476D_1CE4_E5B9
        h ^= h >> 29
        return h == 0 ? 1 : h
    }
}
