import APNSWire
import Foundation
import SalvoTestSupport
import SalvoTestTraits
import Testing

@testable import SalvoRows

/// Writes `text` to a fresh temporary file and returns its path.
func temporaryFile(_ text: String, name: String = "tokens.csv") throws -> String {
    let folder = TestScratch.root.appendingPathComponent("salvo-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    let path = folder.appendingPathComponent(name).path
    try Data(text.utf8).write(to: URL(fileURLWithPath: path))
    return path
}

/// A token whose bytes are all `byte`.
func token(_ byte: UInt8) -> DeviceToken {
    try! DeviceToken(bytes: [UInt8](repeating: byte, count: 32))
}

func hex(_ byte: UInt8) -> String { token(byte).hexString }

/// Every row the source hands out, in chunks of `chunk`.
func drain(_ source: TokenSource, chunk: Int = 3) throws -> [TokenRow] {
    var rows: [TokenRow] = []
    while let next = try source.nextChunk(maximumRows: chunk) {
        #expect(next.count <= chunk)
        rows += next
    }
    return rows
}

@Suite(.tags(.pure), .runs(.pure)) struct TokenSourceTests {
    @Test func readsAHeaderedFileAndNamesBadRows() throws {
        let text = """
            name,token,locale
            a,\(hex(1)),en
            b,\(hex(2).uppercased()),fr
            c,zz\(hex(3).dropFirst(2)),de
            d,\(hex(4).dropLast(2)),en

            e,"\(hex(5))",en
            """
        let path = try temporaryFile(text)
        let source = TokenSource(files: [path])
        let summary = try source.validate()
        #expect(summary.validRows == 3)
        #expect(summary.rejects.map(\.line) == [4, 5, 6])
        #expect(summary.rejects[0].reason == "invalid character 'z' at column 1: a token is 64 hex digits (0-9, a-f)")
        #expect(summary.rejects[1].reason == "a token has 64 hex digits; this one has 62")
        #expect(summary.rejects.last?.reason.hasPrefix("a blank line: no token") == true, "a row without a token")
        #expect(summary.rejects.allSatisfy { $0.file == path })
        let rows = try drain(source)
        for row in rows { #expect(try source.token(at: row.reference) == row.token, "quoted and upper case too") }
        #expect(rows.map(\.token) == [token(1), token(2), token(5)])
        #expect(rows.map(\.line) == [2, 3, 7])
    }

    @Test func handlesBOMCRLFQuotesAndLineBreaksInsideQuotes() throws {
        let text = "\u{FEFF}token,note\r\n\(hex(1)),\"a, \"\"quoted\"\"\r\nnote\"\r\n\(hex(2)),plain\r\n"
        let source = TokenSource(files: [try temporaryFile(text)])
        #expect(try source.validate().validRows == 2)
        let rows = try drain(source)
        #expect(rows.map(\.token) == [token(1), token(2)])
        #expect(rows.map(\.line) == [2, 4])
        #expect(rows[0].reference.offset == 3 + "token,note\r\n".utf8.count, "offsets count the BOM")
        // Rows can be read again from where they are.
        for row in rows { #expect(try source.token(at: row.reference) == row.token) }
    }

    @Test func aBareCarriageReturnEndsALineLikeLFAndCRLF() throws {
        // Old Mac line ends, mixed with LF and CRLF, after quoted fields and inside them: every record has a line
        // of its own (the journal finds a row by its file and line), and a CRLF counts once. The line end doubled
        // before the last row is a blank line 7: a row without a token.
        func contents(_ end: String) -> String {
            "token,note\(end)\(hex(1)),plain\(end)\(hex(2)),\"quoted\"\(end)\(hex(3)),\"two\(end)lines\"\r\n"
                + "\(hex(4)),x\n\(end)\(hex(5)),y\(end)"
        }
        for text in [contents("\r"), contents("\n")] {
            let source = TokenSource(files: [try temporaryFile(text)])
            let summary = try source.validate()
            #expect(summary.validRows == 5 && summary.rejects.map(\.line) == [7], "\(summary.rejects)")
            let rows = try drain(source)
            #expect(rows.map(\.token) == (1...5).map { token($0) })
            #expect(rows.map(\.line) == [2, 3, 4, 6, 8], "\(text.debugDescription)")
            #expect(Set(rows.map(\.line)).count == rows.count, "no two rows share a line")
            for row in rows { #expect(try source.token(at: row.reference) == row.token) }
        }
    }

    @Test func columnByNumberWithAndWithoutHeader() throws {
        let headerless = try temporaryFile("\(hex(1))\n\(hex(2))\n")
        let auto = TokenSource(files: [headerless], options: .init(column: .number(1)))
        #expect(try auto.validate().validRows == 2)

        let headered = try temporaryFile("device\n\(hex(1))\n")
        let detected = TokenSource(files: [headered], options: .init(column: .number(1)))
        let summary = try detected.validate()
        #expect(summary.validRows == 1 && summary.rejects.isEmpty, "the header is recognised as one")

        let forced = TokenSource(files: [headered], options: .init(column: .number(1), header: .absent))
        #expect(try forced.validate().rejects.map(\.line) == [1], "a header read as data is a bad row")
    }

    @Test func aPlainListOfTokensNeedsNoHeaderAndHeaderNamesIgnoreCase() throws {
        let plain = TokenSource(files: [try temporaryFile("\(hex(1))\n\(hex(2))\n")])
        let summary = try plain.validate()
        #expect(summary.validRows == 2 && summary.rejects.isEmpty, "the first row is a token: no header")
        #expect(try drain(plain).map(\.line) == [1, 2])

        let shouted = TokenSource(files: [try temporaryFile("Device,TOKEN\nx,\(hex(3))\n")])
        #expect(try shouted.validate().validRows == 1)
        #expect(try drain(shouted).map(\.token) == [token(3)])

        // A first row that is neither a header naming the column nor a token is still refused, with the columns.
        let path = try temporaryFile("device\nnot-a-token\n")
        #expect(throws: InputError.self) { try TokenSource(files: [path]).validate() }
    }

    @Test func repeatedTokensAreCountedWithoutDedupeAndRefusedWithIt() throws {
        let text = "token\n\(hex(1))\n\(hex(2))\n\(hex(1))\n\(hex(1))\n"
        let counted = try TokenSource(files: [try temporaryFile(text)]).validate()
        #expect(counted.validRows == 4, "sent all the same")
        #expect(counted.duplicates == 2)
        let deduped = try TokenSource(files: [try temporaryFile(text)], options: .init(dedupe: true)).validate()
        #expect(deduped.validRows == 2)
        #expect(deduped.duplicates == 0)
        #expect(deduped.rejects.map(\.line) == [4, 5])
    }

    @Test func missingColumnIsAnErrorThatListsTheColumns() throws {
        let path = try temporaryFile("device,locale\n\(hex(1)),en\n")
        #expect {
            try TokenSource(files: [path]).validate()
        } throws: { error in
            (error as? InputError)?.description
                == "\(path): line 1: no column named 'token' in the header (it has: device, locale)"
        }
    }

    @Test func shortRowsAreRejectedNotFatal() throws {
        let path = try temporaryFile("name,token\nonly-a-name\nb,\(hex(2))\n")
        let summary = try TokenSource(files: [path]).validate()
        #expect(summary.validRows == 1)
        #expect(summary.rejects.first?.reason == "the row has 1 column(s); the token is in column 2")
    }

    @Test func dedupeRejectsRepeatsAndNamesTheFirstLine() throws {
        let path = try temporaryFile("token\n\(hex(1))\n\(hex(2))\n\(hex(1).uppercased())\n")
        let plain = TokenSource(files: [path])
        #expect(try plain.validate().validRows == 3)
        let deduped = TokenSource(files: [path], options: .init(dedupe: true))
        let summary = try deduped.validate()
        #expect(summary.validRows == 2)
        #expect(summary.rejects.map(\.reason) == ["duplicate of the token on line 2"])
        #expect(try drain(deduped).map(\.line) == [2, 3])
    }

    @Test func unclosedQuoteIsAnErrorWithItsLine() throws {
        let path = try temporaryFile("token\n\(hex(1))\n\"\(hex(2))\n")
        #expect {
            try TokenSource(files: [path]).validate()
        } throws: { error in
            (error as? InputError)?.line == 3
        }
    }

    /// An opened source whose input fails within a chunk hands out the rows it read before the failure (each is
    /// counted valid, and a job lists what it does not send), then fails, and keeps failing. Before, the rows read
    /// in the failing chunk were dropped: counted valid, sent by no one, listed nowhere.
    @Test func rowsReadBeforeAFailureWithinAChunkAreHandedOutThenTheFailure() throws {
        var text = "token\n"
        for index in 0..<2500 { text += "\(hex(UInt8(index % 251)))\n" }
        text += "\"unclosed\n"
        let source = TokenSource(files: [try temporaryFile(text)], firstChunkRows: 1000)
        #expect(try source.open() == nil, "longer than its first chunk: validated as taken")
        var lines: [Int] = []
        var failure: InputError?
        for _ in 0..<10 {
            do {
                guard let chunk = try source.nextChunk(maximumRows: 1024) else { break }
                lines += chunk.map(\.line)
            } catch {
                failure = error
                break
            }
        }
        #expect(lines == Array(2...2501), "every row before the bad line, once")
        #expect(failure?.line == 2502, "\(String(describing: failure))")
        #expect(throws: InputError.self) { try source.nextChunk(maximumRows: 1024) }
        #expect(source.summarySoFar.validRows == 2500)
    }

    /// A blank line is a row without a token, refused with its line (a NULL token of a one-column export is
    /// written so), whether the source is validated first or as it is taken; a header's blank lines before it are
    /// passed over. Before, blank lines were skipped and such a row vanished from every count.
    @Test func aBlankLineIsARefusedRowWithItsLine() throws {
        let text = "\ntoken\n\(hex(1))\n\n\(hex(2))\r\n\r\n\(hex(3))\n\n"
        let validated = TokenSource(files: [try temporaryFile(text)])
        let summary = try validated.validate()
        #expect(summary.validRows == 3)
        #expect(summary.rejects.map(\.line) == [4, 6, 8])
        #expect(summary.rejects.allSatisfy { $0.reason.hasPrefix("a blank line") })
        #expect(try drain(validated).map(\.line) == [3, 5, 7])

        let opened = TokenSource(files: [try temporaryFile(text)], firstChunkRows: 2)
        #expect(try opened.open() == nil)
        #expect(try drain(opened).map(\.line) == [3, 5, 7])
        #expect(opened.summary?.rejects.map(\.line) == [4, 6, 8])
    }

    @Test func missingFileIsAnErrorThatNamesIt() {
        #expect {
            try TokenSource(files: ["/nonexistent/tokens.csv"]).validate()
        } throws: { error in
            (error as? InputError)?.description.hasPrefix("/nonexistent/tokens.csv: cannot open the file") == true
        }
    }

    @Test func recordsSpanningChunkBoundariesAreRead() throws {
        // 64 KiB of rows, read through a 4 KiB buffer, so many records straddle a refill.
        var text = "token\n"
        for index in 0..<1000 { text += "\(hex(UInt8(index % 251)))\n" }
        let path = try temporaryFile(text)
        let reader = try CSVReader(path: path, chunkSize: 4096)
        var lines: [Int] = []
        while let line = try reader.next() {
            if line > 1 {
                let parsed = try reader.withField(0) { try DeviceToken(hexUTF8: $0) }
                #expect(parsed == token(UInt8((line - 2) % 251)))
            }
            lines.append(line)
        }
        #expect(lines == Array(1...1001))
    }

    @Test func severalFilesAreReadInOrder() throws {
        let first = try temporaryFile("token\n\(hex(1))\n")
        let second = try temporaryFile("token\n\(hex(2))\nbad\n")
        let source = TokenSource(files: [first, second])
        let summary = try source.validate()
        #expect(summary.validRows == 2)
        #expect(summary.rejects.map(\.file) == [second])
        let rows = try drain(source, chunk: 10)
        #expect(rows.map(\.token) == [token(1), token(2)])
        #expect(rows.map(\.reference.file) == [0, 1])
        for row in rows { #expect(try source.token(at: row.reference) == row.token) }
    }

    @Test func rowsAreReadAgainThroughTheDescriptorsOpenedForTheJob() throws {
        let path = try temporaryFile("token\n\(hex(1))\n\(hex(2))\n", name: "kept.csv")
        let source = TokenSource(files: [path])
        try source.validate()
        let rows = try drain(source)
        // The job holds the file open: a rewind after the file was removed (or replaced) still reads the rows
        // the job validated, and never opens the path again.
        try FileManager.default.removeItem(atPath: path)
        for row in rows { #expect(try source.token(at: row.reference) == row.token) }
    }
}

@Suite(.tags(.pure), .runs(.pure)) struct TokenEncodingTests {
    @Test func aBase64ColumnReadsAndReadsAgain() throws {
        let tokens = (1...5).map { token(UInt8($0 * 40)) }
        let path = try temporaryFile(
            "token\n" + tokens.map(\.base64String).joined(separator: "\n") + "\n\(hex(1))\n"
        )
        let source = TokenSource(files: [path], options: TokenSource.Options(encoding: .base64))
        let summary = try source.validate()
        #expect(summary.validRows == 5)
        #expect(summary.rejects.map(\.line) == [7])
        let rows = try drain(source)
        #expect(rows.map(\.token) == tokens)
        #expect(try rows.map { try source.token(at: $0.reference) } == tokens)
    }

    @Test func hexAsApplePrintsIt() throws {
        let spaced =
            "<"
            + stride(from: 0, to: 64, by: 8).map { offset in
                let text = hex(0xAB).uppercased()
                return String(text.dropFirst(offset).prefix(8))
            }.joined(separator: " ") + ">"
        let path = try temporaryFile("token\n\"\(spaced)\"\n")
        let source = TokenSource(files: [path])
        #expect(try source.validate().validRows == 1)
        #expect(try drain(source).map(\.token) == [token(0xAB)])
    }

    /// Apple's rule on the fly: a listed token stays out unless its device registered after the list's time; a
    /// listed row whose registration time cannot be read is refused with its line; unlisted rows are not read.
    @Test func suppressionHonoursTheRegistrationColumn() throws {
        let path = try temporaryFile(
            """
            token,registered_at
            \(hex(1)),1000
            \(hex(2)),3000
            \(hex(3)),2024-01-01T00:00:00Z
            \(hex(4)),soon
            \(hex(5)),whenever
            \(hex(6)),

            """
        )
        var list = SuppressionList()
        for byte: UInt8 in [1, 2, 3, 4, 6] {
            list.add(SuppressionList.Entry(token: token(byte), timestamp: 2000, reason: "Feedback"))
        }
        let source = TokenSource(
            files: [path],
            options: TokenSource.Options(registeredAt: .name("registered_at")),
            suppression: list
        )
        let summary = try source.validate()
        #expect(summary.suppressed == 2, "line 2 registered before the list's time; line 7 gives no time")
        #expect(summary.reregistered == 2, "lines 3 and 4 registered after it")
        #expect(summary.rejects.map(\.line) == [5])
        #expect(summary.rejects.first?.value == "soon")
        #expect(summary.validRows == 3)
        #expect(try drain(source).map(\.line) == [3, 4, 6])

        let unnamed = TokenSource(
            files: [path],
            options: TokenSource.Options(registeredAt: .name("registered")),
            suppression: list
        )
        #expect(throws: InputError.self) { try unnamed.validate() }
    }
}
