import Foundation
import SalvoBinary
import SalvoRows
import SalvoTestSupport
import SalvoTestTraits
import Testing

@testable import SalvoSend

/// A new journaled job's state file is sized from the line ends counted in the read that fingerprints its files (the
/// rows are validated as they are sent): the count is exact, and bounds every line number a reader gives a row.
@Suite(.tags(.pure), .runs(.pure)) struct JournalLineCountTests {
    /// Line ends counted one byte at a time: LF, CRLF once, a bare CR.
    private static func expectedLineEnds(_ bytes: some Collection<UInt8>, afterCarriageReturn: Bool = false) -> Int {
        var count = 0
        var previous: UInt8 = afterCarriageReturn ? 0x0d : 0
        for byte in bytes {
            if byte == 0x0d || (byte == 0x0a && previous != 0x0d) { count += 1 }
            previous = byte
        }
        return count
    }

    @Test func lineEndsAreCountedExactlyAtEveryAlignment() {
        var generator = SplitMix64(seed: 9)
        for length in [0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 1000] {
            let bytes = (0..<length).map { _ -> UInt8 in
                // Line feeds, carriage returns, their neighbours and bytes with the high bit set, which a word-wise
                // test could confuse.
                [0x0a, 0x0b, 0x09, 0x8a, 0x0a, 0xff, 0x00, 0x41, 0x0d, 0x0d, 0x8d, 0x0c][Int(generator.next() % 12)]
            }
            for start in 0..<min(8, length + 1) {
                let slice = Array(bytes[start...])
                let counted = slice.withUnsafeBytes { InputFingerprints.lineEnds($0) }
                #expect(counted == Self.expectedLineEnds(slice), "length \(length), from \(start)")
                let after = slice.withUnsafeBytes { InputFingerprints.lineEnds($0, afterCarriageReturn: true) }
                #expect(after == Self.expectedLineEnds(slice, afterCarriageReturn: true), "length \(length)")
            }
            // Cut anywhere: the pieces' counts, each told whether the one before ended in a CR, add up.
            for cut in Set([0, length / 3, length / 2, length]) {
                let first = bytes[..<cut].withUnsafeBytes { InputFingerprints.lineEnds(UnsafeRawBufferPointer($0)) }
                let second = Array(bytes[cut...]).withUnsafeBytes {
                    InputFingerprints.lineEnds($0, afterCarriageReturn: cut > 0 && bytes[cut - 1] == 0x0d)
                }
                #expect(first + second == Self.expectedLineEnds(bytes), "length \(length), cut at \(cut)")
            }
        }
    }

    /// Pieces with no CR are counted on a path of their own: exact at every length, and after a piece that ended
    /// in a CR.
    @Test func lineFeedsAloneAreCountedExactlyInLongPieces() {
        var generator = SplitMix64(seed: 11)
        for length in [63, 64, 65, 127, 128, 4095, 16_320, 16_384, 70_001] {
            let bytes = (0..<length).map { _ -> UInt8 in
                [0x0a, 0x0b, 0x8a, 0xff, 0x00, 0x41][Int(generator.next() % 6)]
            }
            for start in [0, 1, 3] {
                let slice = Array(bytes[start...])
                #expect(slice.withUnsafeBytes { InputFingerprints.lineEnds($0) } == Self.expectedLineEnds(slice))
                let after = slice.withUnsafeBytes { InputFingerprints.lineEnds($0, afterCarriageReturn: true) }
                #expect(after == Self.expectedLineEnds(slice, afterCarriageReturn: true), "length \(length)")
            }
        }
        // Every byte a line feed.
        let feeds = [UInt8](repeating: 0x0a, count: 64 * 255 * 2 + 5)
        #expect(feeds.withUnsafeBytes { InputFingerprints.lineEnds($0) } == feeds.count)
    }

    /// A large file is counted in 8 MiB pieces on every core: a CRLF across two pieces counts once, a bare CR at a
    /// piece's end once, and the total is the count one byte at a time.
    @Test func piecesCountedTogetherMatchTheWholeAcrossTheirEdges() throws {
        let piece = 8 << 20
        var bytes = [UInt8](repeating: 0x61, count: 2 * piece + 12345)
        for index in stride(from: 99, to: bytes.count, by: 100) { bytes[index] = 0x0a }
        bytes[piece - 1] = 0x0d
        bytes[piece] = 0x0a
        bytes[2 * piece - 1] = 0x0d
        bytes[2 * piece] = 0x61
        let path = TestScratch.root.appendingPathComponent("salvo-pieces-\(UUID().uuidString)")
        try Data(bytes).write(to: path)
        defer { try? FileManager.default.removeItem(at: path) }
        let expected = Self.expectedLineEnds(bytes) + 2
        #expect(try InputFingerprints.scan([path.path]).lineCounts == [expected])
    }

    @Test func carriageReturnLineEndsBoundTheRowsLinesToo() throws {
        let folder = TestScratch.root.appendingPathComponent("salvo-lines-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let token = String(repeating: "cd", count: 32)
        // Old Mac line ends, a CRLF, a bare CR inside a quoted field, a blank line, and a CR last.
        let text = "token,note\r\(token),a\r\(token),\"b\rc\"\r\n\r\(token),d\r"
        let path = folder.appendingPathComponent("tokens.csv").path
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        let counted = try InputFingerprints.scan([path])
        let source = TokenSource(files: [path])
        let summary = try source.validate()
        #expect(summary.validRows == 3)
        #expect(counted.lineCounts == [Self.expectedLineEnds(Array(text.utf8)) + 2])
        #expect(counted.lineCounts[0] >= summary.lineCounts[0])
        #expect(summary.lineCounts == [7], "the last row is on line 6")
        #expect(try InputFingerprints.scan([path], countLines: false).lineCounts.isEmpty)
    }

    @Test func theCountBoundsTheLineNumbersOfEveryRow() throws {
        let folder = TestScratch.root.appendingPathComponent("salvo-lines-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let token = String(repeating: "ab", count: 32)
        // A quoted field with line breaks, CRLF, blank lines, and no line end after the last row.
        let text = "token,note\r\n\(token),\"a\nb\nc\"\r\n\r\n\(token),x\n\n\(token),last"
        let path = folder.appendingPathComponent("tokens.csv").path
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        let counted = try InputFingerprints.scan([path])
        let source = TokenSource(files: [path])
        let summary = try source.validate()
        #expect(summary.validRows == 3)
        #expect(counted.lineCounts == [text.filter { $0 == "\n" || $0 == "\r\n" }.count + 2])
        #expect(counted.lineCounts[0] >= summary.lineCounts[0])
        #expect(counted.inputs == (try InputFingerprints.fingerprint([path])))
    }
}
