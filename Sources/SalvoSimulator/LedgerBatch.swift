import APNSWire

/// One connection's accepted notifications since its ledger last merged them: fixed-size
/// `LedgerRecordLayout` entries in one preallocated block.
///
/// The gateway appends here per notification (a 64-byte copy, no lock, no allocation) and hands
/// the whole batch to `DeliveryLedger.merge` once per read, so the shared lock is taken per read
/// rather than per notification. Confined to its connection's event loop.
final class LedgerBatch {
    /// Entries held before the batch must be merged.
    let capacity: Int
    private let storage: UnsafeMutableRawPointer
    /// Entries held now.
    private(set) var count: Int = 0

    init(capacity: Int = 1024) {
        self.capacity = capacity
        self.storage = UnsafeMutableRawPointer.allocate(
            byteCount: capacity * LedgerRecordLayout.size,
            alignment: LedgerRecordLayout.size
        )
        self.storage.initializeMemory(as: UInt8.self, repeating: 0, count: capacity * LedgerRecordLayout.size)
    }

    deinit {
        self.storage.deallocate()
    }

    var isFull: Bool { self.count == self.capacity }

    /// Appends one accepted notification. The caller merges first when `isFull`.
    @inline(__always)
    func append(
        token: UnsafeRawBufferPointer,
        identifier: UInt32,
        connection: UInt32,
        expiry: UInt32,
        priority: UInt8,
        command: UInt8,
        digest: UInt64
    ) {
        precondition(self.count < self.capacity && token.count == DeviceToken.byteCount)
        let entry = self.storage + self.count * LedgerRecordLayout.size
        entry.copyMemory(from: token.baseAddress!, byteCount: DeviceToken.byteCount)
        entry.storeBytes(of: 1, toByteOffset: LedgerRecordLayout.count, as: UInt32.self)
        entry.storeBytes(of: identifier, toByteOffset: LedgerRecordLayout.lastIdentifier, as: UInt32.self)
        entry.storeBytes(of: connection, toByteOffset: LedgerRecordLayout.lastConnection, as: UInt32.self)
        entry.storeBytes(of: expiry, toByteOffset: LedgerRecordLayout.expiry, as: UInt32.self)
        entry.storeBytes(of: digest, toByteOffset: LedgerRecordLayout.digest, as: UInt64.self)
        entry.storeBytes(of: priority, toByteOffset: LedgerRecordLayout.priority, as: UInt8.self)
        entry.storeBytes(of: command, toByteOffset: LedgerRecordLayout.command, as: UInt8.self)
        entry.storeBytes(of: connection, toByteOffset: LedgerRecordLayout.firstConnection, as: UInt32.self)
        self.count += 1
    }

    /// Calls `body` once with all entries (consecutive, `LedgerRecordLayout.size` apart) and their
    /// count, then empties the batch.
    func drainAll(_ body: (UnsafeRawPointer, Int) -> Void) {
        body(UnsafeRawPointer(self.storage), self.count)
        self.count = 0
    }
}
