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

    /// How many values repeat an earlier one: bucketed by their top 16 bits (the hashes are uniform) in place
    /// (an American flag sort: each value swapped straight into its bucket's next free place), each bucket then
    /// sorted on its own; linear in the count, where one sort of millions would not be, and no second array (at
    /// 8 bytes a row, a copy of 10 M hashes would be 80 MB more at the end of the input). Leaves `hashes`
    /// reordered.
    static func repeats(_ hashes: inout [UInt64]) -> Int {
        guard hashes.count > 1 else { return 0 }
        let bits = hashes.count < 1 << 16 ? 8 : 16
        let shift = UInt64(64 - bits)
        var starts = [Int](repeating: 0, count: (1 << bits) + 1)
        for hash in hashes { starts[Int(hash >> shift) + 1] += 1 }
        for bucket in 0..<(1 << bits) { starts[bucket + 1] += starts[bucket] }
        var next = starts
        var repeats = 0
        hashes.withUnsafeMutableBufferPointer { values in
            for bucket in 0..<(1 << bits) {
                let end = starts[bucket + 1]
                while next[bucket] < end {
                    let place = next[bucket]
                    let home = Int(values[place] >> shift)
                    if home == bucket {
                        next[bucket] += 1
                    } else {
                        values.swapAt(place, next[home])
                        next[home] += 1
                    }
                }
            }
            for bucket in 0..<(1 << bits) where starts[bucket + 1] - starts[bucket] > 1 {
                var slice = UnsafeMutableBufferPointer(rebasing: values[starts[bucket]..<starts[bucket + 1]])
                slice.sort()
                for index in 1..<slice.count where slice[index] == slice[index - 1] { repeats += 1 }
            }
        }
        return repeats
    }
}
