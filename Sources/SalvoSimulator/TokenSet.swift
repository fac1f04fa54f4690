import APNSWire

/// A set of raw 32-byte device tokens in one flat open-addressing table.
///
/// Used for the fault plan's invalid tokens, offline devices and a verdict's expected tokens:
/// each slot costs 33 bytes (a key and an occupancy byte), at most 3/4 of the slots are used, and
/// there is no object per token (10 M tokens: 16 M slots, 528 MB). Lookups are lock-free reads once built; a `TokenSet` is built first and
/// then only read, so sharing one between event loops is safe.
public struct TokenSet: Sendable {
    private var keys: [UInt8]
    private var used: [Bool]
    private var mask: Int
    /// The number of distinct tokens in the set.
    public private(set) var count: Int

    /// Creates an empty set sized for about `expectedCount` tokens without growing.
    public init(expectedCount: Int = 16) {
        var capacity = 16
        while capacity * 3 < expectedCount * 4 { capacity <<= 1 }
        self.keys = [UInt8](repeating: 0, count: capacity * DeviceToken.byteCount)
        self.used = [Bool](repeating: false, count: capacity)
        self.mask = capacity - 1
        self.count = 0
    }

    /// Adds the 32 bytes in `token`; returns false when it was already present.
    @discardableResult
    public mutating func insert(_ token: UnsafeRawBufferPointer) -> Bool {
        precondition(token.count == DeviceToken.byteCount, "a device token has 32 bytes")
        if (self.count + 1) * 4 > self.used.count * 3 { self.grow() }
        return self.insertWithoutGrowing(token.baseAddress!)
    }

    /// Adds every token of `tokens` (32 bytes each).
    public mutating func insert(_ tokens: [[UInt8]]) {
        for token in tokens { token.withUnsafeBytes { _ = self.insert($0) } }
    }

    /// True when the 32 bytes at `token` are in the set.
    @inline(__always)
    public func contains(_ token: UnsafeRawPointer) -> Bool {
        if self.count == 0 { return false }
        var slot = Int(truncatingIfNeeded: TokenHash.hash(token)) & self.mask
        return self.keys.withUnsafeBytes { keys in
            self.used.withUnsafeBufferPointer { used in
                while used[slot] {
                    if TokenHash.equal(keys.baseAddress! + slot * DeviceToken.byteCount, token) {
                        return true
                    }
                    slot = (slot + 1) & self.mask
                }
                return false
            }
        }
    }

    /// True when `token` (32 bytes) is in the set.
    public func contains(_ token: [UInt8]) -> Bool {
        token.count == DeviceToken.byteCount && token.withUnsafeBytes { self.contains($0.baseAddress!) }
    }

    /// Calls `body` with each member's 32 bytes, in table order.
    public func forEachMember(_ body: (UnsafeRawBufferPointer) throws -> Void) rethrows {
        try self.keys.withUnsafeBytes { keys in
            for slot in 0..<self.used.count where self.used[slot] {
                try body(UnsafeRawBufferPointer(rebasing: keys[(slot * 32)..<(slot * 32 + 32)]))
            }
        }
    }

    private mutating func insertWithoutGrowing(_ token: UnsafeRawPointer) -> Bool {
        var slot = Int(truncatingIfNeeded: TokenHash.hash(token)) & self.mask
        let mask = self.mask
        let inserted: Bool = self.keys.withUnsafeMutableBytes { keys in
            self.used.withUnsafeMutableBufferPointer { used in
                while used[slot] {
                    if TokenHash.equal(keys.baseAddress! + slot * DeviceToken.byteCount, token) {
                        return false
                    }
                    slot = (slot + 1) & mask
                }
                used[slot] = true
                (keys.baseAddress! + slot * DeviceToken.byteCount).copyMemory(
                    from: token,
                    byteCount: DeviceToken.byteCount
                )
                return true
            }
        }
        if inserted { self.count += 1 }
        return inserted
    }

    private mutating func grow() {
        let old = self
        self = TokenSet(expectedCount: self.used.count)
        old.forEachMember { _ = self.insertWithoutGrowing($0.baseAddress!) }
    }
}
