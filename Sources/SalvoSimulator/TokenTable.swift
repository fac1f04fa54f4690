#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The ledger's table: device token → one fixed 64-byte record (`LedgerRecordLayout`), in a flat
/// open-addressing array with linear probing.
///
/// Memory is `64 × capacity` bytes with capacity a power of two kept above 4/3 of the distinct
/// tokens, and never beyond `maximumCapacity` slots: 10 M notifications to 1 M devices fit in
/// 128 MiB, 10 M distinct devices in 1 GiB. A record that finds the table full at its maximum is
/// refused and counted by the caller, so memory stays bounded whatever a sender does.
/// Not thread-safe: `DeliveryLedger` confines it to its lock.
final class TokenTable {
    private(set) var storage: UnsafeMutableRawPointer
    private(set) var capacity: Int
    private(set) var count: Int = 0
    let maximumCapacity: Int

    init(initialCapacity: Int = 1024, maximumCapacity: Int = 1 << 24) {
        precondition(maximumCapacity > 0 && maximumCapacity & (maximumCapacity - 1) == 0, "a power of two")
        var capacity = 16
        while capacity < initialCapacity && capacity < maximumCapacity { capacity <<= 1 }
        self.capacity = capacity
        self.maximumCapacity = maximumCapacity
        self.storage = TokenTable.allocate(capacity)
    }

    deinit {
        free(self.storage)
    }

    /// Forgets every record, keeping the storage.
    func removeAll() {
        memset(self.storage, 0, self.capacity * LedgerRecordLayout.size)
        self.count = 0
    }

    /// Bytes held by the table.
    var memoryBytes: Int { self.capacity * LedgerRecordLayout.size }

    /// Folds `count` accepted notifications (consecutive 64-byte entries in `LedgerRecordLayout`
    /// at `entries`) into their tokens' records, calling `body` with each entry and its token's new
    /// count (0 when the token is new and the table is full at its maximum).
    ///
    /// The table is far larger than the caches, so each entry's first probe is a cache miss. The
    /// batch first touches every entry's home slot in a loop of independent loads, which the CPU
    /// overlaps, and only then probes: the misses are paid together instead of one after another.
    ///
    /// - Parameter losing: entries it answers true for are left out, as by a gateway that loses what it accepted
    ///   (`FaultPlan.lostFraction`, to prove that the checks catch a loss).
    func record(
        batch entries: UnsafeRawPointer,
        count: Int,
        losing: ((UnsafeRawPointer) -> Bool)? = nil,
        _ body: (UnsafeRawPointer, UInt32) -> Void
    ) {
        // Grow first, so that the home slots computed below stay valid for the whole batch.
        while (self.count + count) * 4 > self.capacity * 3 && self.capacity < self.maximumCapacity {
            self.grow()
        }
        withUnsafeTemporaryAllocation(of: Int.self, capacity: count) { homes in
            var touched: UInt32 = 0
            for index in 0..<count {
                let home = self.home(entries + index * LedgerRecordLayout.size)
                homes[index] = home
                touched |= (self.storage + home * LedgerRecordLayout.size).load(
                    fromByteOffset: LedgerRecordLayout.count,
                    as: UInt32.self
                )
            }
            self.touched = touched
            for index in 0..<count {
                let entry = entries + index * LedgerRecordLayout.size
                if let losing, losing(entry) { continue }
                body(entry, self.record(entry, home: homes[index]))
            }
        }
    }

    /// Keeps the touching loads of `record(batch:count:_:)` from being optimised away.
    private var touched: UInt32 = 0

    @inline(__always)
    private func home(_ token: UnsafeRawPointer) -> Int {
        Int(truncatingIfNeeded: TokenHash.hash(token)) & (self.capacity - 1)
    }

    @inline(__always)
    private func record(_ entry: UnsafeRawPointer, home: Int) -> UInt32 {
        let slot = self.probe(entry, from: home)
        let record = self.storage + slot * LedgerRecordLayout.size
        let count = record.load(fromByteOffset: LedgerRecordLayout.count, as: UInt32.self)
        if count == 0 {
            // Only reached at the maximum capacity: past 3/4 full, probes get long, so refuse.
            if (self.count + 1) * 4 > self.capacity * 3 { return 0 }
            record.copyMemory(from: entry, byteCount: LedgerRecordLayout.size)
            record.storeBytes(of: 1, toByteOffset: LedgerRecordLayout.count, as: UInt32.self)
            let connection = entry.loadUnaligned(fromByteOffset: LedgerRecordLayout.lastConnection, as: UInt32.self)
            record.storeBytes(of: connection, toByteOffset: LedgerRecordLayout.firstConnection, as: UInt32.self)
            self.count += 1
            return 1
        } else {
            let first = record.load(fromByteOffset: LedgerRecordLayout.firstConnection, as: UInt32.self)
            record.copyMemory(from: entry, byteCount: LedgerRecordLayout.size)
            record.storeBytes(of: count &+ 1, toByteOffset: LedgerRecordLayout.count, as: UInt32.self)
            record.storeBytes(of: first, toByteOffset: LedgerRecordLayout.firstConnection, as: UInt32.self)
            return count &+ 1
        }
    }

    /// The record of the 32-byte token at `token`, or nil when it was never accepted.
    func lookup(_ token: UnsafeRawPointer) -> UnsafeRawPointer? {
        let record = self.storage + self.probe(token, from: self.home(token)) * LedgerRecordLayout.size
        let isEmpty = record.load(fromByteOffset: LedgerRecordLayout.count, as: UInt32.self) == 0
        return isEmpty ? nil : UnsafeRawPointer(record)
    }

    /// Calls `body` with every occupied record.
    func forEachRecord(_ body: (UnsafeRawPointer) throws -> Void) rethrows {
        for slot in 0..<self.capacity {
            let record = self.storage + slot * LedgerRecordLayout.size
            if record.load(fromByteOffset: LedgerRecordLayout.count, as: UInt32.self) != 0 {
                try body(UnsafeRawPointer(record))
            }
        }
    }

    /// The slot holding `token`, or the empty slot where it would go, searching from `home`.
    @inline(__always)
    private func probe(_ token: UnsafeRawPointer, from home: Int) -> Int {
        let mask = self.capacity - 1
        var slot = home
        while true {
            let record = self.storage + slot * LedgerRecordLayout.size
            if record.load(fromByteOffset: LedgerRecordLayout.count, as: UInt32.self) == 0
                || TokenHash.equal(record, token)
            {
                return slot
            }
            slot = (slot + 1) & mask
        }
    }

    private func grow() {
        let oldStorage = self.storage
        let oldCapacity = self.capacity
        self.capacity = oldCapacity << 1
        self.storage = TokenTable.allocate(self.capacity)
        for slot in 0..<oldCapacity {
            let record = oldStorage + slot * LedgerRecordLayout.size
            if record.load(fromByteOffset: LedgerRecordLayout.count, as: UInt32.self) != 0 {
                let target = self.storage + self.probe(record, from: self.home(record)) * LedgerRecordLayout.size
                target.copyMemory(from: record, byteCount: LedgerRecordLayout.size)
            }
        }
        free(oldStorage)
    }

    private static func allocate(_ capacity: Int) -> UnsafeMutableRawPointer {
        let bytes = capacity * LedgerRecordLayout.size
        // Probes land on random pages: with 4 KiB pages nearly every probe of a large table also
        // misses the TLB. Huge pages (2 MiB, where the kernel grants them) remove most of those misses.
        let hugePage = 1 << 21
        var pointer: UnsafeMutableRawPointer?
        let alignment = bytes >= hugePage ? hugePage : LedgerRecordLayout.size
        guard posix_memalign(&pointer, alignment, bytes) == 0, let storage = pointer else {
            fatalError("cannot allocate \(bytes) bytes for the ledger's token table")
        }
        #if os(Linux)
        if bytes >= hugePage { _ = madvise(storage, bytes, MADV_HUGEPAGE) }
        #endif
        memset(storage, 0, bytes)
        return storage
    }
}
