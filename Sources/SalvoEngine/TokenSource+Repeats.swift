import Dispatch

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
    /// Leaves `hashes` reordered.
    static func repeats(_ hashes: inout [UInt64]) -> Int {
        guard hashes.count > 1 else { return 0 }
        var starts = [Int](repeating: 0, count: 257)
        for hash in hashes { starts[Int(hash >> 56) + 1] += 1 }
        for bucket in 0..<256 { starts[bucket + 1] += starts[bucket] }
        var next = starts
        let largest = (0..<256).map { starts[$0 + 1] - starts[$0] }.max() ?? 0
        var size = 16
        while size < 2 * largest { size <<= 1 }
        var table = [UInt64](repeating: 0, count: size)
        var repeats = 0
        hashes.withUnsafeMutableBufferPointer { values in
            for bucket in 0..<256 {
                let end = starts[bucket + 1]
                while next[bucket] < end {
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
            table.withUnsafeMutableBufferPointer { slots in
                for bucket in 0..<256 where starts[bucket + 1] - starts[bucket] > 1 {
                    repeats += Self.repeats(
                        in: UnsafeMutableBufferPointer(rebasing: values[starts[bucket]..<starts[bucket + 1]]),
                        slots: slots
                    )
                }
            }
        }
        return repeats
    }

    /// Repeats among `values` (at most half as many as `slots`), counted with `slots` as an open-addressing set:
    /// 0 marks a free slot, so the value 0 is counted apart.
    private static func repeats(
        in values: UnsafeMutableBufferPointer<UInt64>,
        slots: UnsafeMutableBufferPointer<UInt64>
    ) -> Int {
        var size = 16
        while size < 2 * values.count { size <<= 1 }
        let used = UnsafeMutableBufferPointer(rebasing: slots[0..<size])
        used.update(repeating: 0)
        let shift = UInt64(64 - size.trailingZeroBitCount)
        let mask = size - 1
        var repeats = 0
        var zeros = 0
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
        return repeats + max(zeros - 1, 0)
    }
}
