import APNSWire
import Foundation
import SalvoBinary
import SalvoIO
import SalvoRows
import SalvoSend
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// The journal's judgement about a new run, without files; and a journal of another version refused by `prepare`.
@Suite(.tags(.network), .runs(.network)) struct JournalManifestTests {
    static let inputs = [
        JournalManifest.Input(path: "a.csv", bytes: 100, sha256: String(repeating: "a", count: 64)),
        JournalManifest.Input(path: "b.csv", bytes: 200, sha256: String(repeating: "b", count: 64)),
    ]
    static let settings = ["protocol": "binary", "--expiry": "+3600", "payload": "p"]

    func decide(
        _ stored: JournalManifest?,
        inputs: [JournalManifest.Input] = Self.inputs,
        settings: [String: String] = Self.settings
    )
        -> JournalManifest.Decision
    {
        JournalManifest.decide(stored: stored, inputs: inputs, settings: settings, directory: "j")
    }

    /// A fresh folder holding `tokens.csv` with a header and three tokens; the folder and the file's path.
    static func threeTokens(_ prefix: String) throws -> (folder: URL, input: String) {
        let folder = TestScratch.root.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let input = folder.appendingPathComponent("tokens.csv").path
        try Data(("token\n" + (1...3).map { String(repeating: "0\($0)", count: 32) + "\n" }.joined()).utf8)
            .write(to: URL(fileURLWithPath: input))
        return (folder, input)
    }

    /// A binary send of `input` to a port where nothing listens, journaled in `directory`.
    static func journaledRequest(_ input: String, directory: String) throws -> SendRequest {
        SendRequest(
            files: [input],
            interface: try unusedBinaryInterface(payload: Payload(json: #"{"aps":{}}"#)),
            journal: SendJournal(directory: directory)
        )
    }

    var stored: JournalManifest { JournalManifest(inputs: Self.inputs, settings: Self.settings, lineCounts: [3, 4]) }

    @Test func anEmptyFolderStartsAJob() {
        #expect(self.decide(nil) == .start)
    }

    @Test func theSameInputsResumeAnUnfinishedJob() {
        #expect(self.decide(self.stored) == .resume)
    }

    @Test func aFinishedJobIsNotSentAgain() {
        var stored = self.stored
        var report = JobReport()
        report.validRows = 5
        stored.finish = JournalManifest.Finish(exitStatus: 1, report: report)
        #expect(self.decide(stored) == .finished(JournalManifest.Finish(exitStatus: 1, report: report)))
    }

    @Test func aChangedFileIsRefusedByName() {
        var inputs = Self.inputs
        inputs[1].bytes = 201
        guard case .refuse(let message) = self.decide(self.stored, inputs: inputs) else {
            Issue.record("a changed file must be refused")
            return
        }
        #expect(message.contains("b.csv changed"))
        var rehashed = Self.inputs
        rehashed[0].sha256 = String(repeating: "c", count: 64)
        guard case .refuse(let other) = self.decide(self.stored, inputs: rehashed) else {
            Issue.record("a file with another hash must be refused")
            return
        }
        #expect(other.contains("a.csv changed"))
    }

    @Test func otherFilesOrSettingsAreRefusedByName() {
        guard case .refuse(let files) = self.decide(self.stored, inputs: [Self.inputs[0]]) else {
            Issue.record("other files must be refused")
            return
        }
        #expect(files.contains("other token files"))
        var settings = Self.settings
        settings["payload"] = "q"
        guard case .refuse(let payload) = self.decide(self.stored, settings: settings) else {
            Issue.record("another payload must be refused")
            return
        }
        #expect(payload.contains("payload"))
    }

    @Test func aChangedAddedOrRemovedPayloadTemplateIsRefusedByName() {
        let templates = [
            JournalManifest.Input(path: "t/default.json", bytes: 30, sha256: String(repeating: "d", count: 64)),
            JournalManifest.Input(path: "t/pt.json", bytes: 31, sha256: String(repeating: "e", count: 64)),
        ]
        var settings = Self.settings
        settings["--payload-dir"] = "t (lang)"
        let stored = JournalManifest(
            inputs: Self.inputs,
            settings: settings,
            lineCounts: [3, 4],
            payloadFiles: templates
        )
        func decide(
            _ files: [JournalManifest.Input],
            _ settings: [String: String] = settings
        ) -> JournalManifest.Decision {
            JournalManifest.decide(
                stored: stored,
                inputs: Self.inputs,
                payloadFiles: files,
                settings: settings,
                directory: "j"
            )
        }
        #expect(decide(templates) == .resume)
        var edited = templates
        edited[1].sha256 = String(repeating: "f", count: 64)
        guard case .refuse(let changed) = decide(edited) else {
            Issue.record("an edited template must be refused")
            return
        }
        #expect(changed.contains("t/pt.json changed since the job"), "\(changed)")
        let added = templates + [JournalManifest.Input(path: "t/fr.json", bytes: 9, sha256: "0")]
        guard case .refuse(let new) = decide(added) else {
            Issue.record("a new template must be refused")
            return
        }
        #expect(new.contains("t/fr.json is a payload template the job"), "\(new)")
        guard case .refuse(let gone) = decide([templates[0]]) else {
            Issue.record("a removed template must be refused")
            return
        }
        #expect(gone.contains("t/pt.json, a payload template of the job"), "\(gone)")
        // Another folder is named as such, not file by file.
        var other = settings
        other["--payload-dir"] = "u (lang)"
        guard case .refuse(let folder) = decide([], other) else {
            Issue.record("another folder must be refused")
            return
        }
        #expect(folder.contains("--payload-dir t (lang), not u (lang)"), "\(folder)")
        // A finished job is refused too when a template changed: its report was another campaign's.
        var finished = stored
        finished.finish = JournalManifest.Finish(exitStatus: 0, report: JobReport())
        guard
            case .refuse = JournalManifest.decide(
                stored: finished,
                inputs: Self.inputs,
                payloadFiles: edited,
                settings: settings,
                directory: "j"
            )
        else {
            Issue.record("a finished job with a changed template must be refused")
            return
        }
    }

    @Test func aJournalOfAnotherVersionIsRefused() {
        // 1: begun by a build that read a bare CR as no line end, so its rows' line numbers are not this build's;
        // 2: its state file has no header.
        for version in [1, 2, 99] {
            var stored = self.stored
            stored.version = version
            guard case .refuse(let message) = self.decide(stored) else {
                Issue.record("version \(version) must be refused")
                continue
            }
            #expect(message.contains("--journal j holds a job begun by another build"), "\(message)")
            #expect(message.contains("journal version \(version), this build's is 3"), "\(message)")
            #expect(message.contains("--journal-restart (rows already delivered may be sent again)"), "\(message)")
            #expect(message.contains("finish the job with the build that started it"), "\(message)")
            #expect(message.contains("start it afresh in another folder"), "\(message)")
            stored.finish = JournalManifest.Finish(exitStatus: 0, report: JobReport())
            guard case .refuse = self.decide(stored) else {
                Issue.record("a finished job of version \(version) must be refused too")
                continue
            }
        }
    }

    /// A job's inputs are fingerprinted with XXH64; a journal made when they were fingerprinted with SHA-256 is still
    /// compared by SHA-256 (the run computes it for that journal), never passed on a fingerprint it did not record.
    @Test func inputsAreComparedByTheFingerprintTheJournalRecorded() {
        let recorded = [
            JournalManifest.Input(path: "a.csv", bytes: 100, sha256: "", xxh64: "00112233445566aa"),
            JournalManifest.Input(path: "b.csv", bytes: 200, sha256: String(repeating: "b", count: 64)),
        ]
        let stored = JournalManifest(inputs: recorded, settings: Self.settings, lineCounts: [3, 4])
        let now = [
            JournalManifest.Input(path: "a.csv", bytes: 100, sha256: "", xxh64: "00112233445566aa"),
            JournalManifest.Input(
                path: "b.csv",
                bytes: 200,
                sha256: String(repeating: "b", count: 64),
                xxh64: "ffffffffffffffff"
            ),
        ]
        #expect(self.decide(stored, inputs: now) == .resume)
        var edited = now
        edited[0].xxh64 = "00112233445566ab"
        guard case .refuse(let message) = self.decide(stored, inputs: edited) else {
            Issue.record("a file with another XXH64 must be refused")
            return
        }
        #expect(message.contains("a.csv changed"), "\(message)")
        #expect(message.contains("XXH64 00112233445566aa; now 100 bytes, XXH64 00112233445566ab"), "\(message)")
        // b.csv's journal recorded SHA-256: its XXH64 now is not what decides, its SHA-256 is.
        var rehashed = now
        rehashed[1].sha256 = String(repeating: "c", count: 64)
        #expect(self.decide(stored, inputs: rehashed) != .resume)
        var withoutSHA = now
        withoutSHA[1].sha256 = ""
        #expect(self.decide(stored, inputs: withoutSHA) != .resume, "no SHA-256 computed: nothing proves it")
    }

    /// A new job's fingerprint is XXH64 of the files' pieces: compared by it, and a journal of an earlier build that
    /// recorded the whole file's XXH64 by that (the run computes it for that journal).
    @Test func piecesFingerprintsDecideForTheJournalsThatRecordedThem() {
        let recorded = [
            JournalManifest.Input(path: "a.csv", bytes: 100, sha256: "", xxh64Pieces: "0123456789abcdef"),
            JournalManifest.Input(path: "b.csv", bytes: 200, sha256: "", xxh64: "00112233445566aa"),
        ]
        let stored = JournalManifest(inputs: recorded, settings: Self.settings, lineCounts: [3, 4])
        let now = [
            JournalManifest.Input(path: "a.csv", bytes: 100, sha256: "", xxh64Pieces: "0123456789abcdef"),
            JournalManifest.Input(
                path: "b.csv",
                bytes: 200,
                sha256: "",
                xxh64: "00112233445566aa",
                xxh64Pieces: "ffffffffffffffff"
            ),
        ]
        #expect(self.decide(stored, inputs: now) == .resume)
        var edited = now
        edited[0].xxh64Pieces = "0123456789abcdee"
        guard case .refuse(let message) = self.decide(stored, inputs: edited) else {
            Issue.record("a file whose pieces hash otherwise must be refused")
            return
        }
        #expect(message.contains("a.csv changed"), "\(message)")
        #expect(
            message.contains(
                "XXH64 of its pieces 0123456789abcdef; now 100 bytes, XXH64 of its pieces 0123456789abcdee"
            ),
            "\(message)"
        )
        // b.csv's journal recorded the whole file's XXH64: that decides, not its pieces'.
        var wholeChanged = now
        wholeChanged[1].xxh64 = "00112233445566ab"
        #expect(self.decide(stored, inputs: wholeChanged) != .resume)
        var wholeMissing = now
        wholeMissing[1].xxh64 = nil
        #expect(self.decide(stored, inputs: wholeMissing) != .resume, "no whole-file XXH64 computed: nothing proves it")
    }

    /// A first run of an earlier build, which sent before its files' hashes were read, left a manifest with their
    /// sizes and modification times if it ended that early. A run after it compares those; where a hash is in, the
    /// hash.
    @Test func aFirstRunThatEndedBeforeItsHashesWereReadIsJudgedBySizeAndTime() {
        let pending = [
            JournalManifest.Input(path: "a.csv", bytes: 100, sha256: "", modified: 1_000),
            JournalManifest.Input(path: "b.csv", bytes: 200, sha256: String(repeating: "b", count: 64), modified: 5),
        ]
        let stored = JournalManifest(inputs: pending, settings: Self.settings, lineCounts: [3, 4])
        var now = Self.inputs
        now[0].modified = 1_000
        now[1].modified = 9  // touched, same bytes: the hash decides
        #expect(self.decide(stored, inputs: now) == .resume)
        var touched = now
        touched[0].modified = 2_000
        guard case .refuse(let message) = self.decide(stored, inputs: touched) else {
            Issue.record("a file modified since a first run with no hash is refused")
            return
        }
        #expect(message.contains("a.csv changed"), "\(message)")
        var grown = now
        grown[0].bytes = 101
        #expect(self.decide(stored, inputs: grown) != .resume)
        var unknown = stored
        unknown.inputs[0].modified = nil
        #expect(self.decide(unknown, inputs: now) != .resume, "no hash and no time: nothing proves it unchanged")
    }

    /// A new job's manifest holds its inputs' fingerprints from its first write (XXH64 of their pieces, read with the
    /// line ends that size the state file; no SHA-256, no whole-file XXH64).
    @Test func aNewJobsManifestHoldsItsFingerprintsFromTheStart() async throws {
        let (folder, input) = try Self.threeTokens("salvo-jmh")
        let directory = folder.appendingPathComponent("journal").path
        let request = try Self.journaledRequest(input, directory: directory)
        let send = try await BulkSend.prepare(request)
        let manifest = try #require(try JobJournal.loadManifest(directory))
        #expect(send.journal != nil)
        let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: input)))
        #expect(manifest.inputs.map(\.xxh64Pieces) == [InputFingerprints.xxh64Pieces(bytes)])
        #expect(manifest.inputs.map(\.xxh64Pieces) == (try InputFingerprints.fingerprint([input])).map(\.xxh64Pieces))
        #expect(manifest.inputs.map(\.bytes) == [bytes.count])
        #expect(manifest.inputs.map(\.xxh64) == [nil])
        #expect(manifest.inputs.map(\.sha256) == [""])
        #expect(manifest.inputs.first?.modified != nil)
    }

    @Test func aJournalBegunByAnEarlierBuildIsRefusedBeforeSendingAndLeftAsItWas() async throws {
        let (folder, input) = try Self.threeTokens("salvo-jmv")
        let directory = folder.appendingPathComponent("journal").path
        var manifest = JournalManifest(
            inputs: try InputFingerprints.fingerprint([input]),
            settings: [:],
            lineCounts: [6]
        )
        manifest.version = 1
        let earlier = try JobJournal.start(directory, manifest: manifest)
        earlier.rows!.mark(file: 0, line: 2, .confirmed)
        earlier.rows!.sync()
        let files = [JobJournal.manifestPath(directory), JobJournal.statePath(directory)]
        let before = try files.map { try Data(contentsOf: URL(fileURLWithPath: $0)) }

        let request = try Self.journaledRequest(input, directory: directory)
        let error = await #expect(throws: JobError.self) { try await BulkSend.prepare(request) }
        #expect(error?.code == .input)
        #expect(
            error?.message.contains("holds a job begun by another build of salvo") == true,
            "\(String(describing: error))"
        )
        #expect(try files.map { try Data(contentsOf: URL(fileURLWithPath: $0)) } == before, "the journal is untouched")
    }
}
