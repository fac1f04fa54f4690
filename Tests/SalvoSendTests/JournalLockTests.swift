import APNSWire
import Dispatch
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

/// One run per journal: the lock is an open file description's, so two opens in one process exclude each other as
/// two processes would; it is released when its descriptor closes; a second run is refused at once, naming the
/// holder, or waits for it with `--wait-for-journal`.
@Suite(.tags(.process), .runs(.process)) struct JournalLockTests {
    static func folder() throws -> String {
        let path = TestScratch.root.appendingPathComponent("salvo-jl-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path + "/journal"
    }

    /// A lock held until `release()`, from any thread.
    final class Held: @unchecked Sendable {
        private let box = NSLock()
        private var lock: JournalLock?

        init(_ lock: JournalLock) { self.lock = lock }

        func release() {
            self.box.lock()
            self.lock = nil
            self.box.unlock()
        }
    }

    @Test func aSecondOpenIsRefusedNamingTheHolderUntilTheFirstCloses() async throws {
        let directory = try Self.folder()
        var first: JournalLock? = try JournalLock.acquire(directory)
        #expect(first != nil)
        let holder = try #require(JournalLock.holder(directory))
        #expect(holder.contains("pid \(getpid())"), "\(holder)")
        let error = #expect(throws: JobError.self) { try JournalLock.acquire(directory) }
        let message = error?.message ?? ""
        #expect(error?.code == .input)
        #expect(message.contains("--journal \(directory) is held by another run of the job"), "\(message)")
        #expect(message.contains("pid \(getpid())") && message.contains("host ") && message.contains("started 20"))
        #expect(message.contains("--wait-for-journal"), "\(message)")
        // Closing the holder's descriptor is the release: no unlock call, as when its process dies. A child process
        // another suite starts at that moment holds a copy of every descriptor between its fork and its exec (where
        // O_CLOEXEC closes them), and with it the lock: the release is awaited, briefly.
        first = nil
        #expect(
            try await eventually("the lock released", timeout: .seconds(5), every: .milliseconds(1)) {
                JournalLock.holder(directory) == nil
            }
        )
        let again = try JournalLock.acquire(directory)
        #expect(JournalLock.holder(directory) != nil)
        _ = again
    }

    @Test func aSecondPrepareOfOneJournalIsRefusedBeforeItReadsAnything() async throws {
        let (folder, input) = try JournalManifestTests.threeTokens("salvo-jl")
        let directory = folder.appendingPathComponent("journal").path
        let request = try JournalManifestTests.journaledRequest(input, directory: directory)
        let first = try await BulkSend.prepare(request)
        let manifest = try #require(first.journal?.manifest)
        let error = await #expect(throws: JobError.self) { try await BulkSend.prepare(request) }
        #expect(
            error?.message.contains("is held by another run of the job (host ") == true,
            "\(String(describing: error))"
        )
        #expect(error?.message.contains("pid \(getpid())") == true)
        // The refused run changed nothing: the first run's manifest is as it wrote it (one run).
        #expect(try JobJournal.loadManifest(directory)?.runs == manifest.runs)
        #expect(try JobJournal.loadManifest(directory)?.job == manifest.job)
        withExtendedLifetime(first) {}
    }

    @Test func waitingForTheJournalProceedsWhenTheHolderEnds() async throws {
        let directory = try Self.folder()
        let held = Held(try JournalLock.acquire(directory))
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(600)) { held.release() }
        let clock = ContinuousClock()
        let start = clock.now
        // The wait blocks its thread: on `BlockingWork`'s, as a send's prepare waits, never the cooperative pool's.
        let lock = try await BlockingWork.run { () throws(JobError) in
            try JournalLock.acquire(directory, waitSeconds: 20)
        }
        let waited = clock.now - start
        #expect(waited >= .milliseconds(500), "it waited for the holder: \(waited)")
        #expect(waited < .seconds(10), "and went on soon after it ended: \(waited)")
        #expect(JournalLock.holder(directory)?.contains("pid \(getpid())") == true)
        _ = lock
    }

    @Test func aPrepareWithAWaitProceedsWhenTheHolderEnds() async throws {
        let (folder, input) = try JournalManifestTests.threeTokens("salvo-jl")
        let directory = folder.appendingPathComponent("journal").path
        let held = Held(try JournalLock.acquire(directory))
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(500)) { held.release() }
        var request = try JournalManifestTests.journaledRequest(input, directory: directory)
        request.journal?.waitSeconds = 20
        let send = try await BulkSend.prepare(request)
        #expect(send.journal?.manifest.runs == 1, "a new job, begun once the holder let go")
        #expect(JournalLock.holder(directory)?.contains("pid \(getpid())") == true)
    }

    @Test func theJournalFlagsNeedAJournal() async throws {
        let paths = CertificateFactory.sharedFolder
        for flags in [["--journal-restart"], ["--wait-for-journal", "5"]] {
            let result = try await runSalvo(
                [
                    "send", "tokens.csv", "--payload", "payload.json", "--gateway", "127.0.0.1:9", "--cert",
                    paths.client, "--key", paths.clientKey, "--quiet",
                ] + flags,
                files: [
                    "tokens.csv": "token\n" + String(repeating: "ab", count: 32) + "\n",
                    "payload.json": #"{"aps":{"alert":"hi"}}"#,
                ],
                folderPrefix: "salvo-jl",
                readStandardError: true
            )
            guard let result else { return }
            #expect(result.status == 64, "\(result.text)")
            #expect(result.text.contains("need --journal"), "\(result.text)")
        }
    }

    @Test func theWaitIsBounded() async throws {
        let directory = try Self.folder()
        let held = try JournalLock.acquire(directory)
        let clock = ContinuousClock()
        let start = clock.now
        // The half-second wait blocks its thread: on `BlockingWork`'s, never the cooperative pool's.
        let error = await BlockingWork.run { () -> JobError? in
            do throws(JobError) {
                _ = try JournalLock.acquire(directory, waitSeconds: 0.5)
                return nil
            } catch {
                return error
            }
        }
        #expect(error != nil, "acquired a lock another holds")
        let waited = clock.now - start
        #expect(waited >= .milliseconds(450) && waited < .seconds(5), "\(waited)")
        #expect(error?.message.contains("(waited 0.5 s)") == true, "\(String(describing: error))")
        let immediate = clock.now
        #expect(throws: JobError.self) { try JournalLock.acquire(directory) }
        #expect(clock.now - immediate < .seconds(2), "without a wait, refused at once")
        _ = held
    }

    /// A holder that dies with its process never blocks: a child that takes the lock and is killed.
    @Test func aKilledHolderNeverBlocks() async throws {
        let directory = try Self.folder()
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        // flock(1) is not an OFD lock; a shell's exec'd python would be. Python's fcntl.lockf takes a POSIX
        // record lock, which conflicts with OFD locks on the same file: enough to show a dead holder's release.
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") else {
            Issue.record("python3 is needed to hold a lock from another process")
            return
        }
        let holder = try TestProcess(
            "/usr/bin/python3",
            [
                "-c",
                "import fcntl,sys,time; f=open(sys.argv[1],'a'); fcntl.lockf(f, fcntl.LOCK_EX); print('held', flush=True); "
                    + "time.sleep(60)",
                JournalLock.path(directory),
            ]
        )
        #expect(
            try await eventually("the child holds the lock", timeout: .seconds(30)) { holder.output.hasPrefix("held") }
        )
        #expect(throws: JobError.self) { try JournalLock.acquire(directory) }
        try await holder.kill()
        let lock = try JournalLock.acquire(directory)
        _ = lock
    }
}
