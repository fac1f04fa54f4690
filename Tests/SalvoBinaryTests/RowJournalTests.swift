import APNSWire
import Foundation
import SalvoTestSupport
import SalvoTestTraits
import Testing

@testable import SalvoBinary
@testable import SalvoRows

/// The rows' journal and what the token source does with it: rows handed out are marked written, settled rows are
/// skipped on a resume, and written ones are sent again or left by the policy.
@Suite(.tags(.pure), .runs(.pure)) struct RowJournalTests {
    static func folder() throws -> URL {
        let folder = TestScratch.root.appendingPathComponent("salvo-rj-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }

    static func tokens(_ count: Int, seed: UInt64) -> [String] {
        var generator = TokenGenerator(seed: seed)
        return (0..<count).map { _ in generator.next().hexString }
    }

    @Test func marksSurviveReopeningAndTheLogKeepsReasons() throws {
        let folder = try Self.folder()
        let state = folder.appendingPathComponent("rows.state").path
        let log = folder.appendingPathComponent("rejects.log").path
        do {
            let journal = try RowJournal(statePath: state, logPath: log, lineCounts: [4, 3])
            journal.mark(file: 0, line: 2, .confirmed)
            journal.mark(file: 1, line: 1, .written)
            journal.reject(
                file: 1,
                line: 2,
                status: 8,
                reason: "InvalidToken",
                token: String(repeating: "a", count: 64)
            )
            // Out of range: ignored, not a crash.
            journal.mark(file: 2, line: 0, .confirmed)
            journal.mark(file: 0, line: 9, .confirmed)
        }
        let journal = try RowJournal(statePath: state, logPath: log, lineCounts: [4, 3])
        #expect(journal.states(file: 0) == [.none, .none, .confirmed, .none])
        #expect(journal.states(file: 1) == [.none, .written, .rejected])
        let records = JournalRejectLog(text: try String(contentsOfFile: log, encoding: .utf8))
        #expect(records.record(file: 1, line: 2)?.reason == "InvalidToken")
        #expect(records.record(file: 1, line: 2)?.status == 8)
        #expect(records.record(file: 0, line: 2) == nil)
    }

    /// A journal without a mark is one whose rows a source need not look up; any mark, in a whole word or in the
    /// bytes after the last one, at any state, is found.
    @Test func aMarkAnywhereIsFoundAndABlankJournalHoldsNone() throws {
        let folder = try Self.folder()
        for (index, line) in [0, 7, 8, 40, 99, 102].enumerated() {
            for state in [RowState.written, .rejected, .confirmed] {
                let journal = try RowJournal(
                    statePath: folder.appendingPathComponent("rows-\(index)-\(state.rawValue).state").path,
                    logPath: folder.appendingPathComponent("rejects.log").path,
                    lineCounts: [100, 3]
                )
                #expect(journal.holdsNoMark())
                if line < 100 {
                    journal.mark(file: 0, line: line, state)
                } else {
                    journal.mark(file: 1, line: line - 100, state)
                }
                #expect(!journal.holdsNoMark(), "line \(line), \(state)")
                journal.mark(file: line < 100 ? 0 : 1, line: line < 100 ? line : line - 100, .none)
                #expect(journal.holdsNoMark())
            }
        }
    }

    @Test func aLogLineCutByACrashIsSkipped() {
        let token = String(repeating: "b", count: 64)
        let log = JournalRejectLog(text: "0\t5\t8\tInvalidToken\t\(token)\n0\t6\t8\tInval")
        #expect(log.record(file: 0, line: 5)?.token == token)
        #expect(log.record(file: 0, line: 6) == nil)
    }

    @Test(arguments: [true, false])
    func aResumedSourceSkipsSettledRows(resendWritten: Bool) throws {
        let folder = try Self.folder()
        let tokens = Self.tokens(6, seed: 4)
        let path = folder.appendingPathComponent("t.csv").path
        try Data((["token"] + tokens[0..<3] + ["bad"] + tokens[3...]).joined(separator: "\n").utf8)
            .write(to: URL(fileURLWithPath: path))
        let first = TokenSource(files: [path])
        let summary = try first.validate()
        #expect(summary.lineCounts == [9])
        let state = folder.appendingPathComponent("rows.state").path
        let log = folder.appendingPathComponent("rejects.log").path
        do {
            let journal = try RowJournal(statePath: state, logPath: log, lineCounts: summary.lineCounts)
            first.attach(journal, resendWritten: true)
            let rows = try first.nextChunk(maximumRows: 100) ?? []
            #expect(rows.count == 6)
            #expect(journal.states(file: 0).allSatisfy { $0 == .none }, "handed out is not written")
            for row in rows { journal.mark(file: 0, line: row.line, .written) }
            // Lines 2 confirmed, 3 presumed, 6 (after the bad line 5) rejected, 7 expired; 4 stays written.
            journal.mark(file: 0, line: 2, .confirmed)
            journal.mark(file: 0, line: 3, .presumed)
            journal.reject(file: 0, line: 6, status: 8, reason: "InvalidToken", token: tokens[3])
            journal.mark(file: 0, line: 7, .expired)
            journal.mark(file: 0, line: 8, .none)
        }
        let journal = try RowJournal(statePath: state, logPath: log, lineCounts: [9])
        let second = TokenSource(files: [path])
        second.attach(journal, resendWritten: resendWritten)
        let tally = try second.validate().journaled
        #expect(tally.confirmed == 1 && tally.presumed == 1 && tally.expired == 1)
        #expect(tally.rejectedRows.map(\.line) == [6])
        #expect(tally.uncertainRows.map(\.line) == [4])
        #expect(tally.rowsToSend(validRows: 6, resendUncertain: resendWritten) == (resendWritten ? 2 : 1))
        let rows = try second.nextChunk(maximumRows: 100) ?? []
        #expect(rows.map(\.line) == (resendWritten ? [4, 8] : [8]))
    }

    @Test func theWindowMarksPresumedAndConfirmedRows() throws {
        let folder = try Self.folder()
        let journal = try RowJournal(
            statePath: folder.appendingPathComponent("rows.state").path,
            logPath: folder.appendingPathComponent("rejects.log").path,
            lineCounts: [10]
        )
        var window = SentWindow(capacity: 16)
        window.journal = journal
        let token = try DeviceToken(hex: Self.tokens(1, seed: 5)[0])
        for line in 1...6 { _ = window.record(TokenRow(token: token, line: line)) }
        #expect(journal.states(file: 0)[1...6].allSatisfy { $0 == .written }, "recorded: written")
        window.markWritten(ciphertextStart: 0, ciphertextEnd: 100)
        window.observe(consumedThrough: 100, at: 10)
        #expect(window.presume(readBefore: 20) == 6)
        #expect(journal.states(file: 0)[1...6].allSatisfy { $0 == .presumed })
        for line in 7...9 { _ = window.record(TokenRow(token: token, line: line)) }
        window.markWritten(ciphertextStart: 100, ciphertextEnd: 150)
        // An error for the third of them (identifier 9): lines 7 and 8 confirmed, 9 failed.
        let settlement = window.apply(ErrorResponse(status: .invalidToken, identifier: 9)) { _ in token }
        #expect(settlement.confirmed == 2)
        #expect(journal.states(file: 0)[7...9] == [.confirmed, .confirmed, .written], "the failed one: the machine's")
    }
}
