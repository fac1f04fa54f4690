import APNSWire
import Foundation
import SalvoBinary
import SalvoRows
import SalvoSend
import SalvoTestSupport
import Testing

#if canImport(Glibc)
import Glibc
import SalvoTestTraits
#endif

/// A state file is checked whole before any row of it is trusted: cut short, overwritten, another job's or holding a
/// byte that is not a state, it is refused before anything can be sent, says what is wrong and what to do, and is
/// left as it was; `--journal-restart` begins the job again; `JournalVerification` says what can be trusted.
@Suite(.tags(.pure), .runs(.pure)) struct JournalIntegrityTests {
    /// An unfinished job in a fresh journal: a new job prepared (its manifest and state file written) and a few of
    /// its rows marked, then dropped. Returns the input and the journal folder.
    static func unfinishedJob(_ prefix: String) async throws -> (input: String, directory: String) {
        let (folder, input) = try JournalManifestTests.threeTokens(prefix)
        let directory = folder.appendingPathComponent("journal").path
        do {
            let send = try await BulkSend.prepare(
                try JournalManifestTests.journaledRequest(input, directory: directory)
            )
            let rows = try #require(send.journal?.rows)
            rows.mark(file: 0, line: 1, .confirmed)
            rows.mark(file: 0, line: 2, .written)
            rows.sync()
        }
        // The new job's hashes are recorded on a thread of their own: wait for them (bounded), so that the lock
        // and the manifest are the test's again.
        try await eventually("the new job's hashes recorded and its lock released", timeout: .seconds(10)) {
            try JobJournal.loadManifest(directory)?.inputs.contains(where: { !$0.isFingerprinted }) == false
                && JournalLock.holder(directory) == nil
        }
        return (input, directory)
    }

    /// `prepare` of the same job again must refuse it, naming `what`; the state file is left as it was.
    static func expectRefused(_ input: String, _ directory: String, naming what: String) async throws {
        let state = JobJournal.statePath(directory)
        let before = try Data(contentsOf: URL(fileURLWithPath: state))
        let error = await #expect(throws: JobError.self) {
            try await BulkSend.prepare(try JournalManifestTests.journaledRequest(input, directory: directory))
        }
        let message = error?.message ?? ""
        #expect(error?.code == .input, "exit 3, as every refused journal")
        #expect(message.contains("--journal \(directory) is damaged"), "\(message)")
        #expect(message.contains(what), "\(message)")
        #expect(message.contains("Nothing was sent"), "\(message)")
        #expect(message.contains("--journal-restart"), "\(message)")
        #expect(message.contains("rows already delivered may be sent again"), "\(message)")
        #expect(message.contains("salvo journal verify \(directory)"), "\(message)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: state)) == before, "the state file is left as it was")
        #expect(!JournalVerification(directory).isIntact)
    }

    @Test func anIntactJournalResumes() async throws {
        let (input, directory) = try await Self.unfinishedJob("salvo-ji")
        let verification = JournalVerification(directory)
        #expect(verification.isIntact, "\(verification.lines)")
        #expect(verification.check?.stateCounts == [3, 1, 1, 0, 0, 0], "5 lines: \(verification.lines)")
        let send = try await BulkSend.prepare(try JournalManifestTests.journaledRequest(input, directory: directory))
        #expect(send.journal?.manifest.runs == 2)
        #expect(send.journal?.rows?.state(file: 0, line: 1) == .confirmed)
    }

    /// A journal whose manifest recorded its inputs' SHA-256 (as journals did before XXH64) resumes: the run computes
    /// SHA-256 for it. The same file changed in place, same size, is refused by that SHA-256.
    @Test func aJournalThatRecordedSHA256IsComparedBySHA256() async throws {
        let (input, directory) = try await Self.unfinishedJob("salvo-jish")
        var manifest = try #require(try JobJournal.loadManifest(directory))
        manifest.inputs = try InputFingerprints.fingerprint([input], sha256: true).map { input in
            var older = input
            older.xxh64 = nil
            older.xxh64Pieces = nil
            older.modified = manifest.inputs[0].modified
            return older
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try encoder.encode(manifest).write(to: URL(fileURLWithPath: JobJournal.manifestPath(directory)))
        do {
            let send = try await BulkSend.prepare(
                try JournalManifestTests.journaledRequest(input, directory: directory)
            )
            #expect(send.journal?.rows != nil, "resumed")
        }
        try await eventually("the resumed run's lock released", timeout: .seconds(10)) {
            JournalLock.holder(directory) == nil
        }
        let resumed = try #require(try JobJournal.loadManifest(directory))
        #expect(resumed.inputs.map(\.sha256) == manifest.inputs.map(\.sha256))
        #expect(resumed.inputs.map(\.xxh64) == [nil])
        #expect(resumed.inputs.map(\.xxh64Pieces) == [nil])
        // One digit of a token changed: same size, another SHA-256.
        var text = try String(contentsOfFile: input, encoding: .utf8)
        text = text.replacingOccurrences(of: "0303", with: "0304")
        try text.write(toFile: input, atomically: false, encoding: .utf8)
        let error = await #expect(throws: JobError.self) {
            try await BulkSend.prepare(try JournalManifestTests.journaledRequest(input, directory: directory))
        }
        #expect(error?.message.contains("tokens.csv changed since the job") == true, "\(String(describing: error))")
        #expect(error?.message.contains("SHA-256") == true, "\(String(describing: error))")
    }

    @Test(arguments: [0, 10, 64, 65, 68, 70, 4096])
    func aStateFileOfTheWrongSizeIsRefused(size: Int) async throws {
        let (input, directory) = try await Self.unfinishedJob("salvo-ji")
        // The job's file: a 64-byte header and 5 rows (line 0, the header line, three tokens).
        let state = JobJournal.statePath(directory)
        #expect(try Data(contentsOf: URL(fileURLWithPath: state)).count == 69)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: state))
        if size > 69 {
            try handle.seekToEnd()
            try handle.write(contentsOf: Data(count: size - 69))
        } else {
            try handle.truncate(atOffset: UInt64(size))
        }
        try handle.close()
        if size == 0 {
            try await Self.expectRefused(input, directory, naming: "it holds 0 bytes; the job's 5 rows need 69")
        } else {
            try await Self.expectRefused(
                input,
                directory,
                naming: size < 69 ? "it was cut short" : "it has bytes past its end"
            )
        }
    }

    @Test func aMissingStateFileIsRefused() async throws {
        let (input, directory) = try await Self.unfinishedJob("salvo-ji")
        unlink(JobJournal.statePath(directory))
        let error = await #expect(throws: JobError.self) {
            try await BulkSend.prepare(try JournalManifestTests.journaledRequest(input, directory: directory))
        }
        #expect(error?.message.contains("rows.state is missing") == true, "\(String(describing: error))")
        #expect(!JournalVerification(directory).isIntact)
    }

    @Test func randomBytesOfTheRightSizeAreRefused() async throws {
        let (input, directory) = try await Self.unfinishedJob("salvo-ji")
        var generator = SystemRandomNumberGenerator()
        // Random bytes where the header was: no magic.
        try Data((0..<69).map { _ in UInt8.random(in: 0...255, using: &generator) })
            .write(to: URL(fileURLWithPath: JobJournal.statePath(directory)))
        try await Self.expectRefused(input, directory, naming: "its header is not a state file's")
    }

    @Test func aByteThatIsNotAStateIsRefusedWithItsOffset() async throws {
        let (input, directory) = try await Self.unfinishedJob("salvo-ji")
        let url = URL(fileURLWithPath: JobJournal.statePath(directory))
        var bytes = [UInt8](try Data(contentsOf: url))
        bytes[64 + 3] = 0xc7
        bytes[64 + 4] = 6
        try Data(bytes).write(to: url)
        try await Self.expectRefused(
            input,
            directory,
            naming: "2 of its row bytes are not row states (0–5), the first at file offsets 67, 68"
        )
        let verification = JournalVerification(directory)
        #expect(verification.check?.badOffsets == [67, 68])
        #expect(verification.check?.stateCounts == [1, 1, 1, 0, 0, 0])
        #expect(verification.lines.contains { $0.hasPrefix("rows: 1 none") && $0.hasSuffix("2 not a state") })
    }

    @Test func anotherJobsStateFileIsRefused() async throws {
        let (input, directory) = try await Self.unfinishedJob("salvo-ji")
        // The same inputs journaled in another folder: a state file of the right size and a good header, another
        // job's.
        let (_, other) = try await Self.unfinishedJob("salvo-ji")
        let foreign = try Data(contentsOf: URL(fileURLWithPath: JobJournal.statePath(other)))
        try foreign.write(to: URL(fileURLWithPath: JobJournal.statePath(directory)))
        let job = try #require(try JobJournal.loadManifest(directory)?.job)
        try await Self.expectRefused(input, directory, naming: "it belongs to another job")
        let otherJob = try #require(try JobJournal.loadManifest(other)?.job)
        #expect(otherJob != job)
        #expect(
            JournalVerification(directory).problems.contains {
                $0.contains("job \(otherJob); the manifest's is \(job)")
            }
        )
    }

    @Test func aRestartBeginsTheJobAgainOverADamagedJournal() async throws {
        let (input, directory) = try await Self.unfinishedJob("salvo-ji")
        let job = try JobJournal.loadManifest(directory)?.job
        try Data(count: 10).write(to: URL(fileURLWithPath: JobJournal.statePath(directory)))
        var request = try JournalManifestTests.journaledRequest(input, directory: directory)
        request.journal?.restart = true
        let send = try await BulkSend.prepare(request)
        let manifest = try #require(send.journal?.manifest)
        #expect(manifest.runs == 1 && manifest.job != nil && manifest.job != job, "a new job")
        #expect(send.journal?.rows?.states(file: 0).allSatisfy { $0 == .none } == true)
    }

    @Test func aManifestThatCannotBeReadSaysWhatToDo() async throws {
        let (input, directory) = try await Self.unfinishedJob("salvo-ji")
        try Data("{\"version\":".utf8).write(to: URL(fileURLWithPath: JobJournal.manifestPath(directory)))
        let error = await #expect(throws: JobError.self) {
            try await BulkSend.prepare(try JournalManifestTests.journaledRequest(input, directory: directory))
        }
        #expect(error?.message.contains("--journal-restart") == true, "\(String(describing: error))")
        #expect(!JournalVerification(directory).isIntact)
    }

    /// The header's fields where the format says, and a round trip; the job id's text.
    @Test func theHeaderIsWhereTheFormatSays() throws {
        let job = try #require(JournalJobID(hex: "00112233445566778899aabbccddeeff"))
        #expect(job.description == "00112233445566778899aabbccddeeff")
        #expect(JournalJobID(hex: "0011") == nil && JournalJobID(hex: String(repeating: "g", count: 32)) == nil)
        var bytes = [UInt8](repeating: 0xff, count: 64)
        bytes.withUnsafeMutableBytes { RowJournalHeader(job: job, rows: 258).write(to: $0.baseAddress!) }
        #expect(Array(bytes[0..<8]) == Array("SALVOROW".utf8))
        #expect(Array(bytes[8..<16]) == [1, 0, 0, 0, 64, 0, 0, 0])
        #expect(
            Array(bytes[16..<32]) == [
                0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff,
            ]
        )
        #expect(Array(bytes[32..<40]) == [2, 1, 0, 0, 0, 0, 0, 0])
        #expect(bytes[40..<64].allSatisfy { $0 == 0 })
        let read = bytes.withUnsafeBytes { RowJournalHeader($0) }
        #expect(read == RowJournalHeader(job: job, rows: 258))
    }
}
