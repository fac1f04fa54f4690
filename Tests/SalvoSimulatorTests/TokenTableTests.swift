import SalvoTestTraits
import Testing

@testable import SalvoSimulator

@Suite(.tags(.pure), .runs(.pure)) struct TokenTableTests {
    private func entry(_ token: [UInt8], identifier: UInt32, connection: UInt32, digest: UInt64 = 7) -> LedgerBatch {
        let batch = LedgerBatch(capacity: 1)
        token.withUnsafeBytes {
            batch.append(
                token: $0,
                identifier: identifier,
                connection: connection,
                expiry: 99,
                priority: 5,
                command: 2,
                digest: digest
            )
        }
        return batch
    }

    /// Records the batch's entries and returns the last token's new count.
    private func record(_ batch: LedgerBatch, in table: TokenTable) -> UInt32 {
        var result: UInt32 = 0
        batch.drainAll { entries, count in
            table.record(batch: entries, count: count) { _, newCount in result = newCount }
        }
        return result
    }

    @Test func countsRepeatsAndKeepsFirstAndLast() throws {
        let table = TokenTable(initialCapacity: 16, maximumCapacity: 1 << 10)
        let token = TestTokens.token(1)
        for (identifier, connection) in [(UInt32(11), UInt32(1)), (12, 2), (13, 3)] {
            let result = self.record(self.entry(token, identifier: identifier, connection: connection), in: table)
            #expect(result == identifier - 10)
        }
        let record = try #require(token.withUnsafeBytes { table.lookup($0.baseAddress!) })
        let value = LedgerRecord(record: record)
        #expect(value.count == 3)
        #expect(value.lastIdentifier == 13)
        #expect(value.firstConnection == 1)
        #expect(value.lastConnection == 3)
        #expect(value.expiry == 99 && value.priority == 5 && value.command == 2 && value.payloadDigest == 7)
        #expect(value.token == TestTokens.hex(token))
        #expect(TestTokens.token(2).withUnsafeBytes { table.lookup($0.baseAddress!) } == nil)
    }

    @Test func growsThenStopsAtItsMaximumAndRefuses() {
        let table = TokenTable(initialCapacity: 16, maximumCapacity: 1024)
        var refused = 0
        for n in 0..<1000 {
            let entry = self.entry(TestTokens.token(UInt32(n)), identifier: UInt32(n), connection: 1)
            if self.record(entry, in: table) == 0 { refused += 1 }
        }
        // 3/4 of 1024 slots may be used; the rest is refused, and memory stays 64 bytes × 1024.
        #expect(table.count == 768)
        #expect(refused == 1000 - 768)
        #expect(table.capacity == 1024)
        #expect(table.memoryBytes == 64 * 1024)
        var seen = 0
        table.forEachRecord { _ in seen += 1 }
        #expect(seen == 768)
        // Every recorded token is still found after the table grew six times.
        for n in 0..<768 {
            #expect(TestTokens.token(UInt32(n)).withUnsafeBytes { table.lookup($0.baseAddress!) } != nil)
        }
    }

    @Test func oneBatchWithRepeatsGrowsTheTableFirst() {
        let table = TokenTable(initialCapacity: 16, maximumCapacity: 1 << 12)
        let batch = LedgerBatch(capacity: 600)
        for n in 0..<600 {
            // 300 tokens, each twice in the same batch.
            TestTokens.token(UInt32(n % 300)).withUnsafeBytes {
                batch.append(
                    token: $0,
                    identifier: UInt32(n),
                    connection: 1,
                    expiry: 0,
                    priority: 10,
                    command: 2,
                    digest: 1
                )
            }
        }
        var counts: [UInt32] = []
        batch.drainAll { entries, count in
            table.record(batch: entries, count: count) { _, newCount in counts.append(newCount) }
        }
        #expect(counts == [UInt32](repeating: 1, count: 300) + [UInt32](repeating: 2, count: 300))
        #expect(table.count == 300 && table.capacity == 1024)
        let last = TestTokens.token(299).withUnsafeBytes { table.lookup($0.baseAddress!) }.map(
            LedgerRecord.init(record:)
        )
        #expect(last?.lastIdentifier == 599 && last?.count == 2)
    }

    @Test func tokenSetFindsMembersOnly() {
        var set = TokenSet()
        for n in 0..<500 { TestTokens.token(UInt32(n)).withUnsafeBytes { _ = set.insert($0) } }
        #expect(set.count == 500)
        #expect(TestTokens.token(3).withUnsafeBytes { set.insert($0) } == false)
        for n in 0..<500 { #expect(set.contains(TestTokens.token(UInt32(n)))) }
        for n in 500..<1000 { #expect(!set.contains(TestTokens.token(UInt32(n)))) }
    }

    @Test func fractionIsStablePerTokenAndNearItsTarget() {
        var hits = 0
        for n in 0..<10_000 {
            let token = TestTokens.token(UInt32(n))
            let first = token.withUnsafeBytes { TokenHash.isInFraction($0.baseAddress!, fraction: 0.1, seed: 42) }
            let again = token.withUnsafeBytes { TokenHash.isInFraction($0.baseAddress!, fraction: 0.1, seed: 42) }
            #expect(first == again)
            if first { hits += 1 }
        }
        #expect(hits > 800 && hits < 1200)
    }

    /// Tokens counted in their last bytes, as a load client writes them (a fixed prefix, then a counter in hex):
    /// the slots they pick in a table of 65,536 spread as random ones would (about 1 - 1/e of the slots taken),
    /// instead of each 256 of them sharing one.
    @Test func countedTokensSpreadOverATablesSlots() {
        var slots = Set<Int>()
        var token = [UInt8](repeating: 0, count: 32)
        token[0] = 0x5A
        token[1] = 0x1F
        for n in 0..<65_536 {
            token[30] = UInt8(truncatingIfNeeded: n >> 8)
            token[31] = UInt8(truncatingIfNeeded: n)
            slots.insert(token.withUnsafeBytes { Int(truncatingIfNeeded: TokenHash.hash($0.baseAddress!)) & 0xFFFF })
        }
        #expect(slots.count > 39_000, "\(slots.count) slots of 65,536 taken")
    }

    @Test func seededGeneratorRepeats() {
        var a = SeededGenerator(seed: 9, stream: 3)
        var b = SeededGenerator(seed: 9, stream: 3)
        var c = SeededGenerator(seed: 9, stream: 4)
        let first = (0..<8).map { _ in a.next() }
        #expect(first == (0..<8).map { _ in b.next() })
        #expect(first != (0..<8).map { _ in c.next() })
    }
}
