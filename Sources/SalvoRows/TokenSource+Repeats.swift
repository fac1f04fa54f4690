import Dispatch
import Foundation

extension TokenSource {
    /// Counts repeated hashes off the sender's path: the shard that takes the last chunk does not wait for it.
    final class RepeatCount: @unchecked Sendable {
        private let done = DispatchSemaphore(value: 0)
        // Written once before `done` is signalled, read after waiting on it.
        private var value = 0

        // Handed over to the counting thread, which takes it out: the only reference, sorted in place.
        private var hashes: [UInt64]

        /// Takes `hashes` (leaving it empty), so that counting sorts the one copy in place.
        init(taking hashes: inout [UInt64]) {
            self.hashes = []
            swap(&self.hashes, &hashes)
            DispatchQueue.global().async {
                var hashes: [UInt64] = []
                swap(&hashes, &self.hashes)
                self.value = TokenSource.repeats(&hashes)
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
    static func appendHashes(of rows: ArraySlice<TokenRow>, to hashes: inout [UInt64]) {
        hashes.append(contentsOf: rows.lazy.map { $0.token.stableHash })
    }

    /// How many values repeat an earlier one, in time linear in the count and with one small table besides the
    /// values (at 8 bytes a row, a copy of 10 M hashes would be 80 MB more at the end of the input):
    /// 1. the values are partitioned in place by their top 8 bits (an American flag sort: each value swapped
    ///    straight into its bucket's next free place; 256 places written at once stay in the cache, where 65,536
    ///    would miss it on nearly every swap);
    /// 2. each bucket (a 256th of the values: 40,000 of 10 M) is counted with an open-addressing set sized to
    ///    twice it and reused from bucket to bucket, so its probes hit the cache too.
    ///
    /// The count comes at the end of an opened source's input, after its last row is taken, so a job waits for it:
    /// with more than one processor and many values, the work is split in `parts` (each part of the values
    /// partitioned on a thread of its own, then each range of buckets counted across the parts on its own), which
    /// halves that wait on two cores. Leaves `hashes` reordered.
    ///
    /// - Parameter parts: how many threads share the work; nil chooses (one below about a million values).
    static func repeats(_ hashes: inout [UInt64], parts: Int? = nil) -> Int {
        guard hashes.count > 1 else { return 0 }
        let parts = max(
            1,
            min(parts ?? (hashes.count >= 1 << 20 ? ProcessInfo.processInfo.activeProcessorCount : 1), 8, hashes.count)
        )
        var starts = [[Int]](repeating: [], count: parts)
        var counts = [Int](repeating: 0, count: parts)
        hashes.withUnsafeMutableBufferPointer { values in
            starts.withUnsafeMutableBufferPointer { starts in
                counts.withUnsafeMutableBufferPointer { counts in
                    Self.count(Shared(values: values, starts: starts, counts: counts))
                }
            }
        }
        return counts.reduce(0, +)
    }

    /// The values of a count and its parts' results, shared by its threads: each writes only its own part's.
    private struct Shared: @unchecked Sendable {
        let values: UnsafeMutableBufferPointer<UInt64>
        /// Each part's 257 bucket bounds within `values`, once partitioned.
        let starts: UnsafeMutableBufferPointer<[Int]>
        /// Each part's repeats.
        let counts: UnsafeMutableBufferPointer<Int>
    }

    private static func count(_ shared: Shared) {
        let parts = shared.counts.count
        // Each part's values, partitioned in place.
        let bounds = (0...parts).map { shared.values.count * $0 / parts }
        Self.perform(parts) { part in
            shared.starts[part] = Self.partition(shared.values, from: bounds[part], to: bounds[part + 1])
        }
        // Buckets split in `parts` ranges of about as many values each, counted side by side.
        let starts = Array(shared.starts)
        var total = [Int](repeating: 0, count: 257)
        for bucket in 0..<256 {
            total[bucket + 1] = total[bucket] + starts.reduce(0) { $0 + $1[bucket + 1] - $1[bucket] }
        }
        var first = [0]
        for part in 1..<parts {
            let target = shared.values.count * part / parts
            first.append((first.last!...256).first { total[$0] >= target } ?? 256)
        }
        first.append(256)
        let firstBucket = first
        Self.perform(parts) { part in
            shared.counts[part] = Self.repeats(
                buckets: firstBucket[part]..<firstBucket[part + 1],
                of: shared.values,
                starts: starts
            )
        }
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

    /// Partitions `values[start..<end]` in place by the top 8 bits (an American flag sort); returns the 257
    /// bucket bounds, as indices of `values`.
    private static func partition(_ values: UnsafeMutableBufferPointer<UInt64>, from start: Int, to end: Int) -> [Int] {
        var starts = [Int](repeating: 0, count: 257)
        starts[0] = start
        for hash in values[start..<end] { starts[Int(hash >> 56) + 1] += 1 }
        for bucket in 0..<256 { starts[bucket + 1] += starts[bucket] }
        var next = starts
        for bucket in 0..<256 {
            let bucketEnd = starts[bucket + 1]
            while next[bucket] < bucketEnd {
                let place = next[bucket]
                let home = Int(values[place] >> 56)
                if home == bucket {
                    next[bucket] += 1
                } else {
                    values.swapAt(place, next[home])
                    next[home] += 1
                }
            }
        }
        return starts
    }

    /// Repeats among the values of `buckets`, each bucket's values gathered from every part (`starts`).
    private static func repeats(
        buckets: Range<Int>,
        of values: UnsafeMutableBufferPointer<UInt64>,
        starts: [[Int]]
    ) -> Int {
        let sizes = buckets.map { bucket in starts.reduce(0) { $0 + $1[bucket + 1] - $1[bucket] } }
        let largest = sizes.max() ?? 0
        guard largest > 1 else { return 0 }
        var size = 16
        while size < 2 * largest { size <<= 1 }
        var table = [UInt64](repeating: 0, count: size)
        var repeats = 0
        table.withUnsafeMutableBufferPointer { slots in
            for (bucket, count) in zip(buckets, sizes) where count > 1 {
                repeats += Self.repeats(
                    in: starts.map { UnsafeMutableBufferPointer(rebasing: values[$0[bucket]..<$0[bucket + 1]]) },
                    count: count,
                    slots: slots
                )
            }
        }
        return repeats
    }

    /// Repeats among the values of `pieces` (`count` in all, at most half as many as `slots`), counted with `slots`
    /// as an open-addressing set: 0 marks a free slot, so the value 0 is counted apart.
    private static func repeats(
        in pieces: [UnsafeMutableBufferPointer<UInt64>],
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
