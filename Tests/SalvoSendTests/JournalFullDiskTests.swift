import APNSWire
import Foundation
import SalvoEngine
import SalvoSend
import SalvoSimulator
import SalvoTestSupport
import Testing

#if canImport(Glibc)
import Glibc
import SalvoTestTraits
#endif

/// A small tmpfs mounted for a test (root only), unmounted at its end.
enum SmallTmpfs {
    /// Why a tmpfs cannot be mounted here (not root, no CAP_SYS_ADMIN in this container: EPERM), nil when it can:
    /// found once by mounting and unmounting one. The reason is printed, so a skipped test says why.
    static let unavailable: String? = {
        do {
            let path = try Self.mount(bytes: 64 << 10)
            Self.unmount(path)
            return nil
        } catch {
            let reason = "a tmpfs cannot be mounted here (\(error)): the full-disk tests are skipped"
            FileHandle.standardError.write(Data((reason + "\n").utf8))
            return reason
        }
    }()

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// Mounts a tmpfs of `bytes` on a fresh folder under `TestScratch` and returns the folder.
    static func mount(bytes: Int) throws -> String {
        let path = TestScratch.root.appendingPathComponent("salvo-tmpfs-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        let (status, output) = try Self.run("/bin/mount", ["-t", "tmpfs", "-o", "size=\(bytes)", "tmpfs", path])
        guard status == 0 else { throw Failure(description: "mount exited \(status): \(output)") }
        return path
    }

    static func unmount(_ path: String) {
        _ = try? Self.run("/bin/umount", [path])
    }

    /// Fills the tmpfs at `path` until `free` bytes are left.
    static func fill(_ path: String, leaving free: Int) throws {
        var status = statvfs()
        guard statvfs(path, &status) == 0 else { throw Failure(description: "statvfs \(path) failed") }
        let available = Int(status.f_bavail) * Int(status.f_frsize)
        try Data(count: max(0, available - free)).write(to: URL(fileURLWithPath: path + "/filler"))
    }

    private static func run(_ tool: String, _ arguments: [String]) throws -> (Int32, String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, output)
    }
}

/// The state file's blocks are allocated before it is mapped: on a full disk the job fails at its start with an
/// error that names the file and "no space left on device", never by SIGBUS at a mark.
@Suite(.offThePool, .serialized, .enabled(if: SmallTmpfs.unavailable == nil, "needs root to mount a tmpfs"))
struct JournalFullDiskTests {
    @Test func aStateFileThatDoesNotFitIsAnErrorNotASignal() throws {
        let mount = try SmallTmpfs.mount(bytes: 64 << 10)
        defer { SmallTmpfs.unmount(mount) }
        try SmallTmpfs.fill(mount, leaving: 8 << 10)
        let state = mount + "/rows.state"
        let error = #expect(throws: JobError.self) {
            try RowJournal.create(
                statePath: state,
                logPath: mount + "/rejects.log",
                lineCounts: [100_000],
                job: .random()
            )
        }
        #expect(error?.code == .output)
        #expect(error?.message.contains("cannot allocate \(state)") == true, "\(String(describing: error))")
        #expect(error?.message.contains("no space left on device") == true, "\(String(describing: error))")
        // What fits is made, with its header.
        unlink(mount + "/filler")
        let journal = try RowJournal.create(
            statePath: state,
            logPath: mount + "/rejects.log",
            lineCounts: [1000],
            job: .random()
        )
        journal.mark(file: 0, line: 999, .confirmed)
        #expect(journal.states(file: 0)[999] == .confirmed)
    }

    /// The real `salvo send --journal` on a nearly full volume: exit 3 with the file named, nothing sent.
    @Test func aSendWhoseJournalDoesNotFitExitsWithTheCause() async throws {
        guard let salvo = InterruptionTests.builtExecutable else { return }
        let mount = try SmallTmpfs.mount(bytes: 64 << 10)
        defer { SmallTmpfs.unmount(mount) }
        try SmallTmpfs.fill(mount, leaving: 8 << 10)
        var configuration = SimulatorConfiguration.testing(CertificateFactory.shared)
        configuration.http2 = HTTP2EndpointConfiguration()
        let simulator = try await Simulator.start(configuration)
        let paths = CertificateFactory.sharedFolder
        let (folder, _) = try sendFolder("salvo-jfd", tokens: 20_000, seed: 41)
        let run = try JournalResumeTests.start(
            salvo,
            [
                "send", "tokens.csv", "--payload", "payload.json", "--gateway", "127.0.0.1:\(simulator.http2Port ?? 0)",
                "--cert", paths.client, "--key", paths.clientKey, "--ca", paths.ca, "--connections", "1",
                "--journal", mount + "/journal", "--report", "report.json", "--quiet",
            ] + h2SendArguments,
            in: folder
        )
        let status = try await JournalResumeTests.wait(run.process, seconds: 60)
        let accepted = simulator.ledger.snapshot().accepted
        try await simulator.shutdown()
        #expect(run.process.terminationReason == .exit, "ended by a signal: \(status)")
        #expect(status == 3, "\(run.output())")
        #expect(run.output().contains("\(mount)/journal/rows.state"), "\(run.output())")
        #expect(run.output().contains("no space left on device"), "\(run.output())")
        #expect(accepted == 0, "nothing is sent without a journal to mark it in")
    }
}
