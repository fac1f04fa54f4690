/// When the embedded store's recent claims handed their rows out (the `claims` table's last rows, kept by the writer
/// after each commit): a row's first outcome takes its `sent_at` from here rather than from a look into the table for
/// every answer. Rows older than what is kept are looked up in the table.
struct SQLiteClaimTimes: Sendable {
    private struct Claim: Sendable {
        var from: Int
        var through: Int
        var at: Int64
    }

    /// The claims kept at least, oldest first (a claim a cycle: at a hundred cycles a second, over a minute); the
    /// older half goes once twice as many are kept, not one at each claim (each a move of all the others).
    static let kept = 8192
    private var claims: [Claim] = []

    /// A committed claim: rows `from...through` handed out at `at` (milliseconds since 1970).
    mutating func add(from: Int, through: Int, at: Int64) {
        guard from <= through else { return }
        if self.claims.count >= 2 * Self.kept { self.claims.removeFirst(Self.kept) }
        self.claims.append(Claim(from: from, through: through, at: at))
    }

    /// When the row `seq` was handed out the first time, if a claim kept did.
    func at(_ seq: Int) -> Int64? {
        var low = 0
        var high = self.claims.count
        // The first claim whose end is at or after `seq`.
        while low < high {
            let middle = (low + high) / 2
            if self.claims[middle].through < seq { low = middle + 1 } else { high = middle }
        }
        guard low < self.claims.count, self.claims[low].from <= seq else { return nil }
        return self.claims[low].at
    }
}
