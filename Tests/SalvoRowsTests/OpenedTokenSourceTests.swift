import APNSWire
import Foundation
import SalvoTestTraits
import Testing

@testable import SalvoRows

/// A source opened with `open()` validates each row as `nextChunk` takes it (the input is read once), and ends
/// with the summary `validate()` gives for the same input.
@Suite(.tags(.pure), .runs(.pure)) struct OpenedTokenSourceTests {
    /// Good rows, bad rows, repeats, a short row and a suppressed token, over two files.
    private func files() throws -> [String] {
        let first = try temporaryFile(
            """
            token,registered_at
            \(hex(1)),1
            \(hex(2)),1
            zz\(hex(3).dropFirst(2)),1
            \(hex(1)),1
            \(hex(4)),1
            \(hex(5)),1
            \(hex(6)),1

            """
        )
        let second = try temporaryFile(
            """
            token,registered_at
            \(hex(7)),1
            \(hex(2)),1
            \(hex(8).dropLast(2)),1
            \(hex(9)),1

            """
        )
        return [first, second]
    }

    private func suppression() -> SuppressionList {
        var list = SuppressionList()
        list.add(SuppressionList.Entry(token: token(5), timestamp: 2000, reason: "Feedback"))
        return list
    }

    @Test(arguments: [false, true])
    func rowsTakenAndTheFinalSummaryAreValidatesOwn(dedupe: Bool) throws {
        let paths = try self.files()
        let options = TokenSource.Options(dedupe: dedupe, registeredAt: .name("registered_at"))
        let whole = TokenSource(files: paths, options: options, suppression: self.suppression())
        let expected = try whole.validate()
        let expectedRows = try drain(whole)

        let opened = TokenSource(files: paths, options: options, suppression: self.suppression(), firstChunkRows: 2)
        #expect(try opened.open() == nil, "the files are longer than their first chunk: validated as taken")
        #expect(opened.summary == nil)
        let rows = try drain(opened, chunk: 2)
        #expect(rows == expectedRows)
        let summary = try #require(opened.summary, "known once the last row is taken")
        #expect(summary.isFinal)
        #expect(summary.validRows == expected.validRows)
        #expect(summary.rejects == expected.rejects)
        #expect(summary.suppressed == 1)
        #expect(summary.duplicates == expected.duplicates)
        #expect(summary.lineCounts == expected.lineCounts)
        #expect(summary.inputRows == expected.inputRows)
        if dedupe {
            #expect(summary.rejects.map(\.line) == [4, 5, 3, 4])
            #expect(summary.rejects[1].reason == "duplicate of the token on line 2 of \(paths[0])")
            #expect(summary.rejects[2].reason == "duplicate of the token on line 3 of \(paths[0])", "the first file")
        } else {
            #expect(summary.duplicates == 2)
        }
        for row in rows { #expect(try opened.token(at: row.reference) == row.token) }
    }

    @Test func withDedupeARepeatedTokenIsNeverHandedOutTwice() throws {
        // 300 rows over 100 tokens, in chunks smaller than the distance between repeats.
        let text = "token\n" + (0..<300).map { hex(UInt8($0 % 100)) }.joined(separator: "\n") + "\n"
        let source = TokenSource(files: [try temporaryFile(text)], options: .init(dedupe: true), firstChunkRows: 10)
        #expect(try source.open() == nil)
        let rows = try drain(source, chunk: 7)
        #expect(rows.count == 100)
        #expect(Set(rows.map(\.token)).count == 100)
        #expect(rows.map(\.line) == Array(2...101))
        #expect(source.summary?.rejects.count == 200)
    }

    @Test func aFileWhoseFirstChunkHoldsNoTokenIsRefusedAtOnce() throws {
        let good = try temporaryFile("token\n\(hex(1))\n\(hex(2))\n\(hex(3))\n")
        // The wrong column: names where tokens should be.
        let names = try temporaryFile("name,token\n\(hex(1)),ann\n\(hex(2)),bob\n\(hex(3)),cy\n\(hex(4)),dee\n")
        #expect {
            try TokenSource(files: [good, names], firstChunkRows: 2).open()
        } throws: { error in
            let description = (error as? InputError)?.description ?? ""
            return description.hasPrefix("\(names): no valid token in its first 2 row(s) (line 2: ")
                && description.contains("value 'ann'")
        }
        // The same rows further down are only rejected: the file's first chunk holds a token.
        let late = try temporaryFile("token\n\(hex(1))\nann\nbob\n\(hex(2))\n")
        let source = TokenSource(files: [late], firstChunkRows: 2)
        #expect(try source.open() == nil)
        #expect(try drain(source).count == 2)
        #expect(source.summary?.rejects.map(\.line) == [3, 4])
        // A small file of bad rows only is refused too; an empty one is not.
        #expect(throws: InputError.self) { try TokenSource(files: [try temporaryFile("token\nann\n")]).open() }
        #expect(try TokenSource(files: [try temporaryFile("token\n")]).open()?.validRows == 0)
    }

    @Test func aSmallInputIsValidatedWholeWhenOpened() throws {
        let path = try temporaryFile("token\n\(hex(1))\nbad\n\(hex(2))\n")
        let source = TokenSource(files: [path])
        let summary = try #require(try source.open(), "every file ends within its first chunk")
        #expect(summary.validRows == 2)
        #expect(summary.rejects.map(\.line) == [3])
        #expect(try drain(source).map(\.line) == [2, 4])
    }

    @Test func repeatsAreCountedExactly() {
        var generator = SplitMix64(seed: 7)
        var hashes = (0..<200_000).map { _ in generator.next() }
        hashes += hashes.prefix(1234)
        hashes += [hashes[5], hashes[5]]
        hashes.shuffle(using: &generator)
        #expect(TokenSource.repeats(hashes) == 1236)
        var bucketed = RepeatHashes()
        bucketed.reserveCapacity(hashes.count)
        for hash in hashes { bucketed.append(hash) }
        #expect(bucketed.count == hashes.count && bucketed.all.sorted() == hashes.sorted(), "nothing lost")
        #expect(TokenSource.repeats(bucketed) == 1236)
        // Room for a tenth of them: the rest overflow, and are counted all the same.
        var cramped = RepeatHashes()
        cramped.reserveCapacity(hashes.count / 10)
        for hash in hashes { cramped.append(hash) }
        #expect(cramped.count == hashes.count && cramped.all.sorted() == hashes.sorted(), "nothing lost")
        #expect(cramped.sizes.reduce(0, +) == hashes.count)
        #expect(TokenSource.repeats(cramped) == 1236 && TokenSource.repeats(cramped, parts: 3) == 1236)
        #expect(TokenSource.repeats([1, 2, 1, 1]) == 2)
        #expect(TokenSource.repeats([]) == 0)
        // 0 is a value like any other (the set's free slots are 0).
        #expect(TokenSource.repeats([0, 7, 0, 0, 7 << 56, 7]) == 3)
        // Values crowded into a few buckets (the top bits alike).
        var crowded = (0..<70_000).map { UInt64($0 % 4) << 62 | UInt64($0 % 50_000) }
        crowded.shuffle(using: &generator)
        #expect(TokenSource.repeats(crowded) == 20_000)
    }
}
