import APNSWire
import Foundation
import SalvoBinary
import SalvoRows
import SalvoSend
import SalvoSimulator
import SalvoTestSupport
import Testing

#if canImport(Glibc)
import Glibc
import SalvoTestTraits
#endif

/// The state file's blocks are allocated before it is mapped: on a full disk the job fails at its start with an
/// error that names the file and "no space left on device", never by SIGBUS at a mark.
@Suite(
    .tags(.network),
    .runs(.network),
    .serialized,
    .enabled(if: SmallFilesystem.unavailable == nil, "needs root to mount a tmpfs")
)
struct JournalFullDiskTests {
    @Test func aStateFileThatDoesNotFitIsAnErrorNotASignal() throws {
        let disk = try SmallFilesystem(bytes: 64 << 10)
        defer { disk.unmount() }
        let mount = disk.path
        try disk.fill(leaving: 8 << 10)
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
        let disk = try SmallFilesystem(bytes: 64 << 10)
        defer { disk.unmount() }
        let mount = disk.path
        try disk.fill(leaving: 8 << 10)
        var configuration = SimulatorConfiguration.testing(CertificateFactory.shared)
        configuration.http2 = HTTP2EndpointConfiguration()
        let simulator = try await Simulator.start(configuration)
        let paths = CertificateFactory.sharedFolder
        let (folder, _) = try sendFolder("salvo-jfd", tokens: 20_000, seed: 41)
        let run = try TestProcess(
            salvo,
            [
                "send", "tokens.csv", "--payload", "payload.json", "--gateway", "127.0.0.1:\(simulator.http2Port ?? 0)",
                "--cert", paths.client, "--key", paths.clientKey, "--ca", paths.ca, "--connections", "1",
                "--journal", mount + "/journal", "--report", "report.json", "--quiet",
            ] + h2SendArguments,
            in: folder
        )
        let status = try await run.wait(seconds: 60)
        let accepted = simulator.ledger.snapshot().accepted
        try await simulator.shutdown()
        #expect(run.reason == .exit, "ended by a signal: \(status)")
        #expect(status == 3, "\(run.output)")
        #expect(run.output.contains("\(mount)/journal/rows.state"), "\(run.output)")
        #expect(run.output.contains("no space left on device"), "\(run.output)")
        #expect(accepted == 0, "nothing is sent without a journal to mark it in")
    }
}
