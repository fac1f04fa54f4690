import APNSWire

/// One of N disjoint shares of a job's rows, chosen by a stable hash of each row's token: a token lands in the
/// same partition whatever the file, the row order or the machine, so N workers that each send partition K of
/// the same files together send every row once, and duplicates of a token meet in one partition (`dedupe`
/// still finds them). Bad input rows, which have no token to hash, belong to partition 0, so a merged report
/// counts each once.
public struct Partition: Hashable, Sendable, Codable, CustomStringConvertible {
    /// 0-based.
    public let index: Int
    public let count: Int

    /// - Returns: nil unless `0 <= index < count` and `count >= 1`.
    public init?(index: Int, count: Int) {
        guard count >= 1, (0..<count).contains(index) else { return nil }
        self.index = index
        self.count = count
    }

    /// `K/N`, as on the command line.
    public init?(_ text: String) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let index = Int(parts[0]), let count = Int(parts[1]) else { return nil }
        self.init(index: index, count: count)
    }

    public var description: String { "\(self.index)/\(self.count)" }

    /// Whether `token` is in this partition (by `DeviceToken.stableHash`).
    @inlinable
    public func contains(_ token: DeviceToken) -> Bool {
        Int(token.stableHash % UInt64(self.count)) == self.index
    }

    /// Whether bad input rows are reported here.
    public var ownsBadRows: Bool { self.index == 0 }
}
