import Foundation
import SalvoRows
import SalvoTestSupport
import SalvoTestTraits
import Testing

@testable import SalvoSend

/// What a journal knows its inputs by (`InputFingerprints`), read apart from the journal: an input named otherwise is
/// read from its spool and keeps its name; the reading beside the job gives what `scan` and `fingerprint` give, the
/// whole-file fingerprints of earlier builds after the line ends; a file that cannot be read fails both waits.
@Suite(.tags(.pure), .runs(.pure)) struct InputFingerprintsTests {
    static func file(_ text: String) throws -> String {
        let folder = TestScratch.root.appendingPathComponent("salvo-fingerprints-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let path = folder.appendingPathComponent("tokens.csv").path
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    static let text = "token\r\naa\nbb\rcc\n"

    @Test func aSpooledInputIsReadFromItsSpoolAndKeepsItsName() throws {
        var spools = InputSpools()
        spools.read("-", from: try Self.file(Self.text))
        let inputs = try InputFingerprints.fingerprint(["-"], spools: spools)
        #expect(inputs.map(\.path) == ["-"])
        #expect(inputs.map(\.bytes) == [Self.text.utf8.count])
        #expect(inputs.map(\.xxh64Pieces) == [InputFingerprints.xxh64Pieces(Array(Self.text.utf8))])
        #expect(throws: JobError.self) { try InputFingerprints.fingerprint(["-"]) }
    }

    @Test func theReadingGivesTheScansLineCountsAndFingerprints() throws {
        let path = try Self.file(Self.text)
        let reading = InputFingerprints.Reading([path], spools: InputSpools())
        let scanned = try InputFingerprints.scan([path])
        // CRLF, LF, CR and LF: four line ends, so lines up to 5 and a bound of 6.
        #expect(scanned.lineCounts == [6])
        #expect(try reading.lineCounts() == scanned.lineCounts)
        #expect(try reading.value() == scanned.inputs)
        #expect(try reading.value() == (try InputFingerprints.fingerprint([path])), "asked again: the same")
    }

    @Test func theWholeFileFingerprintsOfEarlierBuildsComeAfterTheLineEnds() throws {
        let path = try Self.file(Self.text)
        let bytes = Array(Self.text.utf8)
        let reading = InputFingerprints.Reading(
            [path],
            spools: InputSpools(),
            countLines: false,
            sha256: true,
            whole: true
        )
        #expect(try reading.lineCounts().isEmpty)
        let input = try #require(try reading.value().first)
        #expect(input.sha256 == JobJournal.sha256(bytes))
        #expect(input.xxh64 == InputFingerprints.xxh64(bytes))
        #expect(input.xxh64Pieces == InputFingerprints.xxh64Pieces(bytes))
    }

    @Test func aFileThatCannotBeReadFailsBothWaitsNamingIt() {
        let reading = InputFingerprints.Reading(["/nonexistent/tokens.csv"], spools: InputSpools())
        let counted = #expect(throws: JobError.self) { try reading.lineCounts() }
        let fingerprinted = #expect(throws: JobError.self) { try reading.value() }
        #expect(counted?.message.contains("/nonexistent/tokens.csv") == true)
        #expect(fingerprinted?.message == counted?.message)
    }
}
