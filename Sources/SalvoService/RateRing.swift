/// Counts per second over the last `capacity` seconds (an hour by default), in a ring of fixed size: what the
/// console's rate charts are drawn from. A second's slot remembers which second it holds, so a count from an hour
/// ago is never read as now's, and a second nothing happened in reads 0. Times are given (milliseconds since 1970).
public struct RateRing: Sendable {
    public let capacity: Int
    private var seconds: [Int64]
    private var counts: [Int]
    /// The latest second a count was added in.
    public private(set) var latest: Int64?

    public init(capacity: Int = 3600) {
        precondition(capacity > 0)
        self.capacity = capacity
        self.seconds = []
        self.counts = []
    }

    /// Adds `count` to the second `milliseconds` falls in. A count older than the ring's span is dropped.
    public mutating func add(_ count: Int, at milliseconds: Int64) {
        guard count > 0 else { return }
        let second = Self.second(milliseconds)
        if let latest, second <= latest - Int64(self.capacity) { return }
        if self.seconds.isEmpty {
            self.seconds = Array(repeating: -1, count: self.capacity)
            self.counts = Array(repeating: 0, count: self.capacity)
        }
        let slot = Int(second.remainderReportingOverflow(dividingBy: Int64(self.capacity)).partialValue)
        let index = slot < 0 ? slot + self.capacity : slot
        if self.seconds[index] != second {
            self.seconds[index] = second
            self.counts[index] = 0
        }
        self.counts[index] += count
        self.latest = max(self.latest ?? second, second)
    }

    /// The counts of the `span` whole seconds before the one `milliseconds` falls in, oldest first (the second in
    /// progress is left out: it is not over). At most the ring's capacity.
    public func perSecond(last span: Int, before milliseconds: Int64) -> [Int] {
        let span = max(0, min(span, self.capacity))
        let end = Self.second(milliseconds)
        return (0..<span).map { offset in
            let second = end - Int64(span - offset)
            guard !self.seconds.isEmpty else { return 0 }
            let slot = Int(second.remainderReportingOverflow(dividingBy: Int64(self.capacity)).partialValue)
            let index = slot < 0 ? slot + self.capacity : slot
            return self.seconds[index] == second ? self.counts[index] : 0
        }
    }

    /// The average per second over the `span` whole seconds before `milliseconds`.
    public func rate(last span: Int, before milliseconds: Int64) -> Double {
        let counts = self.perSecond(last: span, before: milliseconds)
        return counts.isEmpty ? 0 : Double(counts.reduce(0, +)) / Double(counts.count)
    }

    /// The second (since 1970) a time in milliseconds falls in.
    public static func second(_ milliseconds: Int64) -> Int64 {
        milliseconds >= 0 ? milliseconds / 1000 : (milliseconds - 999) / 1000
    }
}
