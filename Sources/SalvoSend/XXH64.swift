/// XXH64, the 64-bit xxHash (seed 0), over bytes given in pieces: a journal's fingerprint of each input file.
///
/// Written by hand because no package here offers it and it reads every byte of a new job's input while the job
/// sends: SHA-256, the fingerprint before, took about 0.4 s of CPU for a 650 MB file (1.5 GB/s with the processor's SHA
/// instructions), CPU the send and the gateway needed on the same cores; this takes about a fifth of that. What the
/// journal asks of the fingerprint is to tell a changed file from the one a job started with; nothing there needs a
/// cryptographic hash (whoever can change the input can change the journal beside it). Journals whose manifests hold
/// SHA-256 are still compared by SHA-256 (`JournalManifest.Input`).
///
/// The algorithm as its reference specifies it: four lanes of 64 bits over 32-byte stripes, then the tail and the
/// avalanche; checked against the reference's digests in the tests.
struct XXH64: Sendable {
    private static let prime1: UInt64 = 0x9E37_79B1_85EB_CA87
    private static let prime2: UInt64 = 0xC2B2_AE3D_27D4_EB4F
    private static let prime3: UInt64 = 0x1656_67B1_9E37_79F9
    private static let prime4: UInt64 = 0x85EB_CA77_C2B2_AE63
    private static let prime5: UInt64 = 0x27D4_EB2F_1656_67C5

    private var lanes: (UInt64, UInt64, UInt64, UInt64) = (
        XXH64.prime1 &+ XXH64.prime2,
        XXH64.prime2,
        0,
        0 &- XXH64.prime1
    )
    private var total = 0
    /// Bytes of a stripe not yet whole (fewer than 32), carried to the next piece.
    private var pending: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
    private var pendingCount = 0

    init() {}

    @inline(__always)
    private static func round(_ accumulator: UInt64, _ input: UInt64) -> UInt64 {
        Self.rotate(accumulator &+ input &* Self.prime2, 31) &* Self.prime1
    }

    @inline(__always)
    private static func rotate(_ value: UInt64, _ count: UInt64) -> UInt64 {
        (value << count) | (value >> (64 - count))
    }

    @inline(__always)
    private static func merge(_ hash: UInt64, _ lane: UInt64) -> UInt64 {
        (hash ^ Self.round(0, lane)) &* Self.prime1 &+ Self.prime4
    }

    /// Adds `bytes` to what is hashed.
    mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        self.total += bytes.count
        var offset = 0
        if self.pendingCount > 0 {
            let taken = min(32 - self.pendingCount, bytes.count)
            let count = self.pendingCount
            withUnsafeMutableBytes(of: &self.pending) { pending in
                (pending.baseAddress! + count).copyMemory(from: base, byteCount: taken)
            }
            self.pendingCount += taken
            offset = taken
            guard self.pendingCount == 32 else { return }
            let stripe = self.pending
            self.lanes = (
                Self.round(self.lanes.0, UInt64(littleEndian: stripe.0)),
                Self.round(self.lanes.1, UInt64(littleEndian: stripe.1)),
                Self.round(self.lanes.2, UInt64(littleEndian: stripe.2)),
                Self.round(self.lanes.3, UInt64(littleEndian: stripe.3))
            )
            self.pendingCount = 0
        }
        var (first, second, third, fourth) = self.lanes
        while offset &+ 32 <= bytes.count {
            @inline(__always) func word(_ at: Int) -> UInt64 {
                UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset &+ at, as: UInt64.self))
            }
            first = Self.round(first, word(0))
            second = Self.round(second, word(8))
            third = Self.round(third, word(16))
            fourth = Self.round(fourth, word(24))
            offset &+= 32
        }
        self.lanes = (first, second, third, fourth)
        if offset < bytes.count {
            let rest = bytes.count - offset
            withUnsafeMutableBytes(of: &self.pending) { pending in
                pending.baseAddress!.copyMemory(from: base + offset, byteCount: rest)
            }
            self.pendingCount = rest
        }
    }

    /// The digest of every byte added so far.
    func finalize() -> UInt64 {
        var hash: UInt64
        if self.total >= 32 {
            let (first, second, third, fourth) = self.lanes
            hash =
                Self.rotate(first, 1) &+ Self.rotate(second, 7) &+ Self.rotate(third, 12) &+ Self.rotate(fourth, 18)
            hash = Self.merge(hash, first)
            hash = Self.merge(hash, second)
            hash = Self.merge(hash, third)
            hash = Self.merge(hash, fourth)
        } else {
            hash = Self.prime5
        }
        hash &+= UInt64(self.total)
        withUnsafeBytes(of: self.pending) { tail in
            var index = 0
            let count = self.pendingCount
            while index + 8 <= count {
                let lane = UInt64(littleEndian: tail.loadUnaligned(fromByteOffset: index, as: UInt64.self))
                hash ^= Self.round(0, lane)
                hash = Self.rotate(hash, 27) &* Self.prime1 &+ Self.prime4
                index += 8
            }
            if index + 4 <= count {
                let lane = UInt32(littleEndian: tail.loadUnaligned(fromByteOffset: index, as: UInt32.self))
                hash ^= UInt64(lane) &* Self.prime1
                hash = Self.rotate(hash, 23) &* Self.prime2 &+ Self.prime3
                index += 4
            }
            while index < count {
                hash ^= UInt64(tail[index]) &* Self.prime5
                hash = Self.rotate(hash, 11) &* Self.prime1
                index += 1
            }
        }
        hash ^= hash >> 33
        hash &*= Self.prime2
        hash ^= hash >> 29
        hash &*= Self.prime3
        hash ^= hash >> 32
        return hash
    }

    /// The digest as 16 hex digits, as a manifest records it.
    var hexDigest: String { Self.hex(self.finalize()) }

    /// XXH64 of `digests` in order, each as 8 bytes, little-endian: a file's fingerprint from its pieces' digests
    /// (`JournalManifest.Input.xxh64Pieces`), however the pieces were read.
    static func ofPieces(_ digests: some Sequence<UInt64>) -> UInt64 {
        var tree = XXH64()
        for digest in digests {
            withUnsafeBytes(of: digest.littleEndian) { tree.update($0) }
        }
        return tree.finalize()
    }

    /// `digest` as 16 hex digits.
    static func hex(_ digest: UInt64) -> String {
        let hex = String(digest, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// The digest of `bytes`, hex.
    static func hex(_ bytes: UnsafeRawBufferPointer) -> String {
        var hash = XXH64()
        hash.update(bytes)
        return hash.hexDigest
    }
}
