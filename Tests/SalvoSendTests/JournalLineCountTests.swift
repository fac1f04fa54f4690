import Foundation
import SalvoEngine
import Testing

@testable import SalvoSend

/// A new journaled job's state file is sized from the line ends counted while the files are hashed (the rows are
/// validated as they are sent): the count is exact, and bounds every line number a reader gives a row.
@Suite struct JournalLineCountTests {
    @Test func lineEndsAreCountedExactlyAtEveryAlignment() {
        var generator = SplitMix64(seed: 9)
        for length in [0, 1, 7, 8, 9, 63, 64, 65, 1000] {
            let bytes = (0..<length).map { _ -> UInt8 in
                // Line feeds, their neighbours and bytes with the high bit set, which a word-wise test could confuse.
                [0x0a, 0x0b, 0x09, 0x8a, 0x0a, 0xff, 0x00, 0x41][Int(generator.next() % 8)]
            }
            let expected = bytes.filter { $0 == 0x0a }.count
            for start in 0..<min(8, length + 1) {
                let slice = Array(bytes[start...])
                let counted = slice.withUnsafeBytes { JobJournal.lineEnds($0) }
                #expect(counted == slice.filter { $0 == 0x0a }.count, "length \(length), from \(start)")
            }
            #expect(bytes.withUnsafeBytes { JobJournal.lineEnds($0) } == expected)
        }
    }

    @Test func theCountBoundsTheLineNumbersOfEveryRow() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("salvo-lines-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let token = String(repeating: "ab", count: 32)
        // A quoted field with line breaks, CRLF, blank lines, and no line end after the last row.
        let text = "token,note\r\n\(token),\"a\nb\nc\"\r\n\r\n\(token),x\n\n\(token),last"
        let path = folder.appendingPathComponent("tokens.csv").path
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        let counted = try JobJournal.fingerprintAndCountLines([path])
        let source = TokenSource(files: [path])
        let summary = try source.validate()
        #expect(summary.validRows == 3)
        #expect(counted.lineCounts == [text.filter { $0 == "\n" || $0 == "\r\n" }.count + 2])
        #expect(counted.lineCounts[0] >= summary.lineCounts[0])
        #expect(counted.inputs == (try JobJournal.fingerprint([path])))
    }
}
