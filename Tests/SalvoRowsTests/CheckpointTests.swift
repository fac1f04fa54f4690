import APNSWire
import Foundation
import SalvoTestSupport
import SalvoTestTraits
import Testing

@testable import SalvoRows

/// Checkpoints of a journaled, opened token source: a checkpoint passes a segment only when the journal holds every
/// row of it as done, names the start of a record, and a source resumed there hands out exactly the rows a source
/// read from the top would (none before it), with the same summary.
@Suite(.tags(.pure), .runs(.pure)) struct CheckpointTests {
    /// A token file: a header, then `count` rows (line n + 1 holds row n, with the token of byte `base + n`); the
    /// rows of `bad` are not tokens, and `repeats` gives a row the token of another byte (one an earlier row has).
    struct Input {
        let path: String
        let text: String
        /// The byte offset of each line's start (index: line number).
        let lineOffsets: [Int]

        init(
            count: Int,
            base: Int = 0,
            bad: Set<Int> = [],
            repeats: [Int: Int] = [:],
            name: String = "tokens.csv"
        ) throws {
            var text = "token,name\n"
            var offsets = [0, 0]
            for row in 1...count {
                offsets.append(text.utf8.count)
                let byte = UInt8(repeats[row] ?? base + row)
                text += (bad.contains(row) ? "nothex" : hex(byte)) + ",row \(row)\n"
            }
            self.text = text
            self.lineOffsets = offsets
            self.path = try temporaryFile(text, name: name)
        }
    }

    private func journal(lineCounts: [Int]) throws -> RowJournal {
        let folder = TestScratch.root.appendingPathComponent("salvo-cp-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return try RowJournal(
            statePath: folder.appendingPathComponent("rows.state").path,
            logPath: folder.appendingPathComponent("rejects.log").path,
            lineCounts: lineCounts
        )
    }

    /// An opened source over `files` that keeps `journal`, in segments of 4 rows.
    private func opened(
        _ files: [String],
        _ journal: RowJournal,
        resendWritten: Bool = true,
        dedupe: Bool = false,
        suppression: SuppressionList? = nil,
        at checkpoint: InputCheckpoint? = nil
    ) throws -> TokenSource {
        let source = TokenSource(
            files: files,
            options: TokenSource.Options(dedupe: dedupe),
            suppression: suppression,
            firstChunkRows: 2,
            checkpointRows: 4
        )
        source.attach(journal, resendWritten: resendWritten)
        if let checkpoint { #expect(source.resume(at: checkpoint)) }
        #expect(try source.open() == nil, "read as it is sent")
        return source
    }

    @Test func aCheckpointPassesOnlySegmentsWhoseRowsAreAllSettled() throws {
        let input = try Input(count: 20, bad: [4, 11])
        let journal = try self.journal(lineCounts: [30])
        let source = try self.opened([input.path], journal)
        let rows = try drain(source, chunk: 7)
        #expect(rows.count == 18)
        #expect(source.settledCheckpoint() == .start, "nothing settled")
        // Rows settle out of order: every row but the one on line 9 (row 8).
        for row in rows.reversed() where row.line != 9 { journal.mark(file: 0, line: row.line, .confirmed) }
        // Segments of 4 rows read: lines 2-5 (row 4 bad, never sent: it does not hold the checkpoint back), 6-9.
        let first = try #require(source.settledCheckpoint())
        #expect(first.file == 0 && first.line == 6 && first.offset == input.lineOffsets[6])
        #expect(first.rows == 4 && first.validRows == 3 && !first.passesUncertain)
        journal.mark(file: 0, line: 9, .presumed)
        let end = try #require(source.settledCheckpoint())
        #expect(end == InputCheckpoint(file: 1, offset: 0, line: 0, rows: 20, validRows: 18, passesUncertain: false))
    }

    @Test func aRowSettledBeforeAndSuppressedNowDoesNotStandInForAnUnsettledOne() throws {
        let input = try Input(count: 12)
        let journal = try self.journal(lineCounts: [20])
        // An earlier run settled rows 1-3 (lines 2-4) and stopped; the suppression list has since grown by row 2's
        // token (its InvalidToken refusal, say).
        for line in 2...4 { journal.mark(file: 0, line: line, .confirmed) }
        var suppression = SuppressionList()
        suppression.add(SuppressionList.Entry(token: token(2), timestamp: 1_700_000_000, reason: "InvalidToken"))
        let source = try self.opened([input.path], journal, suppression: suppression)
        let rows = try drain(source, chunk: 5)
        #expect(rows.map(\.line) == Array(5...13), "the settled rows are not sent again, the suppressed one never")
        // Lines 2-5 hold three settled rows: rows 1 and 3, and row 2, settled and suppressed. Row 4 is not settled.
        #expect(source.settledCheckpoint() == .start, "row 4, handed out and unsettled, must hold the checkpoint")
        journal.mark(file: 0, line: 5, .confirmed)
        let first = try #require(source.settledCheckpoint())
        #expect(first.line == 6 && first.offset == input.lineOffsets[6] && first.rows == 4 && first.validRows == 3)
        for row in rows where row.line < 10 { journal.mark(file: 0, line: row.line, .confirmed) }
        let checkpoint = try #require(source.settledCheckpoint())
        #expect(checkpoint.line == 10 && checkpoint.rows == 8 && checkpoint.validRows == 7)

        // A run resumed there finds every row before it settled, and counts the suppressed row once.
        let resumed = try self.opened([input.path], journal, suppression: suppression, at: checkpoint)
        #expect(try drain(resumed).map(\.line) == Array(10...13))
        #expect(!resumed.checkpointRefuted)
        let summary = try #require(resumed.summary)
        #expect(summary.validRows == 11 && summary.suppressed == 1 && summary.journaled.confirmed == 7)
    }

    @Test func aSourceResumedAtACheckpointSendsWhatAReadFromTheTopSends() throws {
        // Row 18 repeats row 2's token: a repeat across the checkpoint is still counted.
        let input = try Input(count: 20, bad: [4, 11], repeats: [18: 2])
        let journal = try self.journal(lineCounts: [30])
        let first = try self.opened([input.path], journal)
        let rows = try drain(first, chunk: 5)
        // The first run settled rows up to line 13 in every way a row settles, and wrote one on line 17.
        for row in rows where row.line <= 13 {
            let state: RowState = row.line == 3 ? .presumed : row.line == 8 ? .expired : .confirmed
            journal.mark(file: 0, line: row.line, state)
        }
        journal.reject(file: 0, line: 7, status: 8, reason: "InvalidToken", token: hex(6))
        journal.mark(file: 0, line: 17, .written)
        let checkpoint = try #require(first.settledCheckpoint())
        #expect(checkpoint.line == 14 && checkpoint.offset == input.lineOffsets[14] && checkpoint.rows == 12)

        let resumed = try self.opened([input.path], journal, at: checkpoint)
        let fromTheTop = try self.opened([input.path], journal)
        let sent = try drain(resumed, chunk: 3)
        #expect(resumed.resumedAt == checkpoint)
        #expect(sent.map(\.line) == Array(14...21), "the rows after the checkpoint, the written one again too")
        #expect(sent == (try drain(fromTheTop, chunk: 3)))
        let summary = try #require(resumed.summary)
        let expected = try #require(fromTheTop.summary)
        #expect(summary == expected)
        #expect(summary.validRows == 18 && summary.rejects.map(\.line) == [5, 12] && summary.duplicates == 1)
        #expect(summary.journaled.confirmed == 7 && summary.journaled.presumed == 1 && summary.journaled.expired == 1)
        #expect(summary.journaled.rejectedRows.map(\.line) == [7])
        #expect(summary.journaled.uncertainRows.map(\.line) == [17])
        #expect(summary.lineCounts == [22])
        #expect(!resumed.checkpointRefuted)
    }

    @Test func rowsLeftUncertainAreNotPassedByARunThatSendsThemAgain() throws {
        let input = try Input(count: 12)
        let journal = try self.journal(lineCounts: [20])
        // An earlier run left the row on line 3 written (uncertain); this run reports such rows.
        journal.mark(file: 0, line: 3, .written)
        let reporting = try self.opened([input.path], journal, resendWritten: false)
        let rows = try drain(reporting)
        #expect(rows.count == 11, "the uncertain row is not sent again")
        for row in rows { journal.mark(file: 0, line: row.line, .confirmed) }
        let checkpoint = try #require(reporting.settledCheckpoint())
        #expect(checkpoint.file == 1 && checkpoint.passesUncertain)
        let resending = TokenSource(files: [input.path], firstChunkRows: 2, checkpointRows: 4)
        resending.attach(journal, resendWritten: true)
        #expect(!resending.resume(at: checkpoint), "it must read the uncertain row to send it again")
        let reportingAgain = TokenSource(files: [input.path], firstChunkRows: 2, checkpointRows: 4)
        reportingAgain.attach(journal, resendWritten: false)
        #expect(reportingAgain.resume(at: checkpoint))
        // With --dedupe every token before the checkpoint must count as taken: no checkpoint is kept or used.
        let deduping = TokenSource(files: [input.path], options: .init(dedupe: true), firstChunkRows: 2)
        deduping.attach(journal, resendWritten: true)
        #expect(!deduping.resume(at: checkpoint))
        #expect(try deduping.open() == nil)
        _ = try drain(deduping)
        #expect(deduping.settledCheckpoint() == nil)
    }

    @Test func aCheckpointAtAFileBoundaryStartsTheNextFile() throws {
        let first = try Input(count: 6, name: "a.csv")
        let second = try Input(count: 9, base: 100, repeats: [3: 1], name: "b.csv")
        let journal = try self.journal(lineCounts: [8, 11])
        let source = try self.opened([first.path, second.path], journal)
        let rows = try drain(source, chunk: 4)
        for row in rows where row.reference.file == 0 { journal.mark(file: 0, line: row.line, .confirmed) }
        let checkpoint = try #require(source.settledCheckpoint())
        #expect(
            checkpoint == InputCheckpoint(file: 1, offset: 0, line: 0, rows: 6, validRows: 6, passesUncertain: false)
        )
        let resumed = try self.opened([first.path, second.path], journal, at: checkpoint)
        let sent = try drain(resumed)
        #expect(sent.allSatisfy { $0.reference.file == 1 } && sent.count == 9)
        let summary = try #require(resumed.summary)
        #expect(summary.validRows == 15 && summary.lineCounts == [8, 11] && summary.journaled.confirmed == 6)
        #expect(summary.duplicates == 1, "b.csv row 3 repeats a.csv row 1")
    }

    @Test func aCheckpointThatPassesAnUnsettledRowStopsTheSource() throws {
        let input = try Input(count: 16)
        let journal = try self.journal(lineCounts: [20])
        let first = try self.opened([input.path], journal)
        for row in try drain(first) where row.line < 10 { journal.mark(file: 0, line: row.line, .confirmed) }
        let checkpoint = try #require(first.settledCheckpoint())
        #expect(checkpoint.line == 10)
        // The journal no longer holds a row before the checkpoint as settled: the checkpoint cannot be trusted.
        journal.mark(file: 0, line: 4, .none)
        let resumed = try self.opened([input.path], journal, at: checkpoint)
        #expect(throws: InputError.self) { _ = try drain(resumed) }
        #expect(resumed.checkpointRefuted)
    }

    @Test func aRefutedCheckpointsSummarySoFarCountsTheRowsBeforeItToo() throws {
        // Row 2 (line 3) is bad, row 5's token (line 6) suppressed.
        let input = try Input(count: 16, bad: [2])
        var suppression = SuppressionList()
        suppression.add(SuppressionList.Entry(token: token(5), timestamp: 1_700_000_000, reason: "Unregistered"))
        let journal = try self.journal(lineCounts: [20])
        let first = try self.opened([input.path], journal, suppression: suppression)
        for row in try drain(first) where row.line < 10 { journal.mark(file: 0, line: row.line, .confirmed) }
        let checkpoint = try #require(first.settledCheckpoint())
        #expect(checkpoint.line == 10 && checkpoint.rows == 8 && checkpoint.validRows == 6)
        journal.mark(file: 0, line: 4, .none)

        let resumed = try self.opened([input.path], journal, suppression: suppression, at: checkpoint)
        var handedOut: [TokenRow] = []
        #expect(throws: InputError.self) {
            while let rows = try resumed.nextChunk(maximumRows: 3) { handedOut += rows }
        }
        #expect(resumed.checkpointRefuted)
        #expect(handedOut.allSatisfy { $0.line >= 10 })
        // What a stopped job reports: the rows before the checkpoint and those read after it, each once.
        let summary = resumed.summarySoFar
        #expect(!summary.isFinal)
        #expect(summary.validRows == checkpoint.validRows + handedOut.count, "\(summary.validRows)")
        #expect(summary.rejects.map(\.line) == [3] && summary.suppressed == 1)
        #expect(summary.journaled.confirmed == 5, "lines 2, 5, 7, 8 and 9")
        #expect(resumed.summarySoFar == summary, "merged once")
        #expect(throws: InputError.self, "the job stays stopped") { _ = try resumed.nextChunk(maximumRows: 3) }
    }

    @Test func estimatesCountTheRowsBeforeTheCheckpoint() throws {
        let input = try Input(count: 40)
        let journal = try self.journal(lineCounts: [50])
        let first = try self.opened([input.path], journal)
        for row in try drain(first) where row.line < 30 { journal.mark(file: 0, line: row.line, .confirmed) }
        let checkpoint = try #require(first.settledCheckpoint())
        let resumed = try self.opened([input.path], journal, at: checkpoint)
        // The valid rows before the checkpoint are counted from the start, and the rest estimated.
        #expect(resumed.estimatedValidRows >= checkpoint.validRows, "\(resumed.estimatedValidRows)")
        #expect(resumed.firstRowUptimeNanoseconds == nil)
        _ = try resumed.nextChunk(maximumRows: 3)
        #expect(resumed.estimatedValidRows > checkpoint.validRows, "\(resumed.estimatedValidRows)")
        _ = try drain(resumed)
        #expect(resumed.estimatedValidRows == 40)
        #expect(resumed.firstRowUptimeNanoseconds != nil)
    }
}
