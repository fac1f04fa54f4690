import APNSWire
import Foundation
import SalvoTestTraits
import Testing

@testable import SalvoRows

@Suite(.tags(.pure), .runs(.pure)) struct PartitionTests {
    @Test func parsesKOverNAndRefusesTheRest() {
        #expect(Partition("2/4") == Partition(index: 2, count: 4))
        #expect(Partition("0/1")?.description == "0/1")
        for text in ["4/4", "-1/4", "1/0", "1", "a/b", "1/2/3", ""] { #expect(Partition(text) == nil, "\(text)") }
    }

    @Test func theHashIsFixedAcrossProcessesAndRuns() throws {
        // A fixed value (computed independently from the definition: SplitMix64's finalizer over the four
        // little-endian words): a token must land in the same partition on every machine and in every release.
        let token = try DeviceToken(hex: "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f")
        #expect(token.stableHash == 0x9D7C_9221_455C_FC32)
        #expect(Partition(index: 2, count: 4)!.contains(token), "0x…32 % 4 == 2")
    }

    @Test func everyTokenIsInExactlyOnePartitionAndTheyAreEven() {
        var generator = TokenGenerator(seed: 5)
        let tokens = (0..<40_000).map { _ in generator.next() }
        for count in [1, 2, 3, 4, 7] {
            let partitions = (0..<count).map { Partition(index: $0, count: count)! }
            var sizes = [Int](repeating: 0, count: count)
            for token in tokens {
                let owners = partitions.filter { $0.contains(token) }
                #expect(owners.count == 1)
                sizes[owners[0].index] += 1
            }
            let expected = Double(tokens.count) / Double(count)
            for size in sizes { #expect(abs(Double(size) - expected) < expected * 0.05, "\(count): \(sizes)") }
        }
    }

    @Test func partitionsOfAFileSendEveryRowOnceAndReportBadRowsOnce() throws {
        var generator = TokenGenerator(seed: 9)
        let tokens = (0..<3_000).map { _ in generator.next() }
        let text =
            "token\n" + tokens.map(\.hexString).joined(separator: "\n") + "\nnot-a-token\n\(tokens[5].hexString)\n"
        let path = try temporaryFile(text, name: "partitioned.csv")
        var sent: [DeviceToken] = []
        var rejects = 0
        for index in 0..<3 {
            let partition = Partition(index: index, count: 3)!
            let source = TokenSource(files: [path], options: .init(dedupe: true, partition: partition))
            let summary = try source.validate()
            #expect(summary.inputRows == 3_002, "every partition reads every row")
            rejects += summary.rejects.count
            let rows = try drain(source, chunk: 500)
            #expect(rows.count == summary.validRows)
            #expect(rows.allSatisfy { partition.contains($0.token) })
            sent += rows.map(\.token)
        }
        #expect(sent.count == 3_000)
        #expect(Set(sent) == Set(tokens))
        #expect(rejects == 2, "the bad row (partition 0) and the repeated token (its own partition), once each")
    }
}
