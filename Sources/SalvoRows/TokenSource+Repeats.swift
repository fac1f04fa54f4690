import Dispatch
import Foundation

/// The hashes of the valid rows' tokens, for the repeat count, kept in 256 buckets by their top 8 bits as they are
/// appended: the count's partition is done as the rows come (a store into one of 256 regions, each written in order,
/// so the places written stay in the cache), and the count at the end only looks for repeats within each bucket.
/// Before, the hashes were one array partitioned in place at the end of the input: 10 M of them took about 0.2 s of
/// CPU in cache misses, on the job's last stretch.
///
/// The buckets are regions of one allocation, sized by `reserveCapacity` for the most hashes the input can hold
/// (pages never written are never resident); a hash whose bucket is full, or that comes before any room was
/// reserved, goes to `overflow`, bucketed when counted.
struct RepeatHashes: Sendable {
    /// Bucket `b`'s hashes are `storage[b * room ..< b * room + filled[b]]`.
    private var storage: [UInt64] = []
    private var room = 0
    private var filled = [Int](repeating: 0, count: 256)
    private var overflow: [UInt64] = []
    private(set) var count = 0

    var isEmpty: Bool { self.count == 0 }

    /// Room for `total` hashes spread evenly, with a margin (a bucket of 40,000 varies by about 200).
    mutating func reserveCapacity(_ total: Int) {
        let mean = total / 256
        let room = mean + 6 * Int(Double(mean).squareRoot()) + 16
        guard room > self.room else { return }
        let earlier = self.all
        // Not initialized: a hash is written before it is read, and untouched pages stay out of memory.
        self.storage = [UInt64](unsafeUninitializedCapacity: 256 * room) { _, count in count = 256 * room }
        self.room = room
        self.filled = [Int](repeating: 0, count: 256)
        self.overflow = []
        self.count = 0
        for hash in earlier { self.append(hash) }
    }

    mutating func append(_ hash: UInt64) {
        let bucket = Int(truncatingIfNeeded: hash >> 56)
        if self.filled[bucket] < self.room {
            self.storage[bucket * self.room + self.filled[bucket]] = hash
            self.filled[bucket] += 1
        } else {
            self.overflow.append(hash)
        }
        self.count += 1
    }

    /// Appends the hash of each row's token: the hot path, one check of the storage per chunk, not per row.
    mutating func append(tokensOf rows: ArraySlice<TokenRow>) {
        let room = self.room
        var spilled: [UInt64] = []
        self.storage.withUnsafeMutableBufferPointer { storage in
            self.filled.withUnsafeMutableBufferPointer { filled in
                for row in rows {
                    let hash = row.token.stableHash
                    let bucket = Int(truncatingIfNeeded: hash >> 56)
                    let place = filled[bucket]
                    if place < room {
                        storage[bucket &* room &+ place] = hash
                        filled[bucket] = place &+ 1
                    } else {
                        spilled.append(hash)
                    }
                }
            }
        }
        self.overflow.append(contentsOf: spilled)
        self.count += rows.count
    }

    /// Appends `other`'s hashes, bucket by bucket, without gathering them into a third array first.
    mutating func append(contentsOf other: RepeatHashes) {
        for bucket in 0..<256 where other.filled[bucket] > 0 {
            let start = bucket * other.room
            for hash in other.storage[start..<start + other.filled[bucket]] { self.append(hash) }
        }
        for hash in other.overflow { self.append(hash) }
    }

    /// Calls `body` with each bucket's hashes: its region, and those of the overflow that belong to it.
    func forEachBucket(in buckets: Range<Int>, _ body: (Int, [UnsafeBufferPointer<UInt64>]) -> Void) {
        var extra = [[UInt64]](repeating: [], count: 256)
        for hash in self.overflow where buckets.contains(Int(hash >> 56)) { extra[Int(hash >> 56)].append(hash) }
        self.storage.withUnsafeBufferPointer { storage in
            for bucket in buckets {
                let region = UnsafeBufferPointer(
                    rebasing: storage[bucket * self.room..<bucket * self.room + self.filled[bucket]]
                )
                extra[bucket].withUnsafeBufferPointer { body(bucket, [region, $0]) }
            }
        }
    }

    /// The buckets' sizes.
    var sizes: [Int] {
        var sizes = self.filled
        for hash in self.overflow { sizes[Int(hash >> 56)] += 1 }
        return sizes
    }

    /// Every hash, bucket by bucket, then the overflow.
    var all: [UInt64] {
        var all: [UInt64] = []
        all.reserveCapacity(self.count)
        for bucket in 0..<256 where self.filled[bucket] > 0 {
            all.append(contentsOf: self.storage[bucket * self.room..<bucket * self.room + self.filled[bucket]])
        }
        return all + self.overflow
    }
}

extension TokenSource {
    /// Counts repeated hashes off the sender's path: the shard that takes the last chunk does not wait for it.
    final class RepeatCount: @unchecked Sendable {
        private let done = DispatchSemaphore(value: 0)
        // Written once before `done` is signalled, read after waiting on it.
        private var value = 0

        /// Takes `hashes` (leaving them empty), so that counting holds the only copy.
        init(taking hashes: inout RepeatHashes) {
            var taken = RepeatHashes()
            swap(&taken, &hashes)
            let handed = taken
            DispatchQueue.global().async {
                self.value = TokenSource.repeats(handed)
                self.done.signal()
            }
        }

        func wait() -> Int {
            self.done.wait()
            self.done.signal()
            return self.value
        }
    }

    /// Appends the hash of each row's token to `hashes`, for the repeat count of an opened source. Called once per
    /// chunk rather than per row as it is taken: in a loop of its own, one row's eight dependent multiplies overlap
    /// the next row's, where between parsing and validating they were a chain of their own on every row.
    static func appendHashes(of rows: ArraySlice<TokenRow>, to hashes: inout RepeatHashes) {
        hashes.append(tokensOf: rows)
    }

    /// How many values repeat an earlier one.
    ///
    /// - Parameter parts: how many threads share the work; nil chooses (one below about a million values).
    static func repeats(_ values: [UInt64], parts: Int? = nil) -> Int {
        var hashes = RepeatHashes()
        for value in values { hashes.append(value) }
        return Self.repeats(hashes, parts: parts)
    }

    /// How many hashes repeat an earlier one, in time linear in the count: each bucket (a 256th of the hashes: 40,000
    /// of 10 M) is counted with an open-addressing set sized to twice it and reused from bucket to bucket, so its
    /// probes hit the cache.
    ///
    /// The count comes at the end of an opened source's input, after its last row is taken, so a job waits for it:
    /// with more than one processor and many hashes, the buckets are split in `parts` ranges of about as many hashes
    /// each, counted side by side.
    ///
    /// - Parameter parts: how many threads share the work; nil chooses (one below about a million hashes).
    static func repeats(_ hashes: RepeatHashes, parts: Int? = nil) -> Int {
        guard hashes.count > 1 else { return 0 }
        let parts = max(
            1,
            min(parts ?? (hashes.count >= 1 << 20 ? ProcessInfo.processInfo.activeProcessorCount : 1), 8, 256)
        )
        // Bucket ranges of about as many hashes each.
        let sizes = hashes.sizes
        var first = [0]
        var sum = 0
        for bucket in 0..<256 {
            sum += sizes[bucket]
            if first.count < parts && sum >= hashes.count * first.count / parts { first.append(bucket + 1) }
        }
        while first.count < parts + 1 { first.append(256) }
        first[parts] = 256
        let ranges = (0..<parts).map { first[$0]..<max(first[$0], first[$0 + 1]) }
        let counts = Counts(parts)
        Self.perform(parts) { part in
            counts.set(part, Self.repeats(buckets: ranges[part], of: hashes, sizes: sizes))
        }
        return counts.total
    }

    /// Each part's result, written by its own thread, read once all are done.
    private final class Counts: @unchecked Sendable {
        private var values: [Int]
        init(_ parts: Int) { self.values = Array(repeating: 0, count: parts) }
        func set(_ part: Int, _ value: Int) { self.values[part] = value }
        var total: Int { self.values.reduce(0, +) }
    }

    /// Runs `body` for each of `0..<count`: the first on this thread, each other on a thread started for it (not
    /// `concurrentPerform`, which runs them one after another when the pool's threads are taken: at the end of a job
    /// they are, by the shards waiting for this count).
    private static func perform(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
        let done = DispatchSemaphore(value: 0)
        for part in 1..<max(count, 1) {
            Thread {
                body(part)
                done.signal()
            }.start()
        }
        body(0)
        for _ in 1..<max(count, 1) { done.wait() }
    }

    /// Repeats among the hashes of `buckets` (`sizes`: every bucket's size).
    private static func repeats(buckets: Range<Int>, of hashes: RepeatHashes, sizes: [Int]) -> Int {
        let largest = buckets.map { sizes[$0] }.max() ?? 0
        guard largest > 1 else { return 0 }
        var size = 16
        while size < 2 * largest { size <<= 1 }
        var table = [UInt64](repeating: 0, count: size)
        var repeats = 0
        table.withUnsafeMutableBufferPointer { slots in
            hashes.forEachBucket(in: buckets) { bucket, pieces in
                guard sizes[bucket] > 1 else { return }
                repeats += Self.repeats(in: pieces, count: sizes[bucket], slots: slots)
            }
        }
        return repeats
    }

    /// Repeats among the values of `pieces` (`count` in all, at most half as many as `slots`), counted with `slots`
    /// as an open-addressing set: 0 marks a free slot, so the value 0 is counted apart.
    private static func repeats(
        in pieces: [UnsafeBufferPointer<UInt64>],
        count: Int,
        slots: UnsafeMutableBufferPointer<UInt64>
    ) -> Int {
        var size = 16
        while size < 2 * count { size <<= 1 }
        let used = UnsafeMutableBufferPointer(rebasing: slots[0..<size])
        used.update(repeating: 0)
        let shift = UInt64(64 - size.trailingZeroBitCount)
        let mask = size - 1
        var repeats = 0
        var zeros = 0
        for values in pieces {
            for value in values {
                guard value != 0 else {
                    zeros += 1
                    continue
                }
                // Fibonacci hashing: the values share their top bits (the bucket), so their mix's top bits index.
                var index = Int(truncatingIfNeeded: (value &* 0x9E37_79B9_7F4A_7C15) >> shift)
                while true {
                    let slot = used[index]
                    if slot == 0 {
                        used[index] = value
                        break
                    }
                    if slot == value {
                        repeats += 1
                        break
                    }
                    index = (index + 1) & mask
                }
            }
        }
        return repeats + max(zeros - 1, 0)
    }
}
