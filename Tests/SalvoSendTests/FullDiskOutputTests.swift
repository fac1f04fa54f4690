import Foundation
import SalvoBinary
import SalvoRows
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Outputs on a full disk: every write is an error with a record, never a file cut short, never a lost mention.
@Suite(
    .tags(.network),
    .runs(.network),
    .enabled(if: SmallFilesystem.unavailable == nil, "mount -t tmpfs is refused here (it needs root or CAP_SYS_ADMIN)")
)
struct FullDiskOutputTests {
    @Test func theAtomicWriterSaysTheDiskIsFullAndLeavesTheOldFileAndNoTemporaryOne() throws {
        let disk = try SmallFilesystem(bytes: 64 << 10)
        defer { disk.unmount() }
        let path = disk.path + "/list.csv"
        try Data("old\n".utf8).write(to: URL(fileURLWithPath: path))
        var failure: JobError?
        do {
            let writer = try AtomicFileWriter(path: path)
            let line = [UInt8](repeating: UInt8(ascii: "a"), count: 1023) + [UInt8(ascii: "\n")]
            do throws(JobError) {
                // 2 MiB into 64 KB: a drain or the sync meets ENOSPC.
                for _ in 0..<2048 { try writer.write(line) }
                try writer.commit()
            } catch {
                failure = error
            }
        }
        #expect(failure?.code == .output)
        #expect(failure?.message.contains("No space left on device") == true, "\(String(describing: failure))")
        #expect(failure?.message.hasPrefix(path + ":") == true, "names the path: \(String(describing: failure))")
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "old\n", "the old file as it was")
        // The writer is gone: so is its temporary file, and the disk has room again.
        #expect(try FileManager.default.contentsOfDirectory(atPath: disk.path) == ["list.csv"])
        let again = try AtomicFileWriter(path: path)
        try again.write("new\n")
        try again.commit()
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "new\n")
    }

    /// The gateway is gone from the start and the unsettled file's disk is full: the report (on another disk) names
    /// the missing unsettled file and how many rows it lacks, standard error says so, the exit status is 3, and
    /// nothing is left on the full disk (no partial file, no spill, no temporary file).
    @Test(arguments: DyingGatewayTests.Interface.allCases)
    func anUnsettledFileThatCannotBeWrittenIsNamedByTheReportAndTheConsole(
        interface: DyingGatewayTests.Interface
    ) async throws {
        guard let salvo = InterruptionTests.builtExecutable else { return }
        let disk = try SmallFilesystem(bytes: 16 << 10)
        defer { disk.unmount() }
        let paths = CertificateFactory.sharedFolder
        let closed = try ClosedPort()
        defer { closed.close() }
        // 3000 rows of 80 bytes: 240 KB for a 16 KB disk.
        let count = 3000
        let (folder, _) = try sendFolder("salvo-full", tokens: count, seed: 41)
        let unsettled = disk.path + "/unsettled.csv"
        try Data("stale,list,of,another-run\n".utf8).write(to: URL(fileURLWithPath: unsettled))
        let arguments =
            [
                "send", "tokens.csv", "--payload", "payload.json", "--cert", paths.client, "--key", paths.clientKey,
                "--ca", paths.ca, "--give-up-seconds", "1", "--report", "report.json", "--unsettled", unsettled,
                "--quiet", "--gateway", "127.0.0.1:\(closed.port)",
            ] + (interface == .h2 ? h2SendArguments : [])
        let (status, errors) = try await TestProcess.run(salvo, arguments, in: folder, output: .standardErrorOnly)
        #expect(status == 3, "\(errors)")
        #expect(errors.contains("the unsettled file \(unsettled) is missing (\(count) rows not listed)"), "\(errors)")
        #expect(errors.contains("No space left on device"), "\(errors)")
        let report = try JSONDecoder().decode(
            JobReport.self,
            from: Data(contentsOf: folder.appendingPathComponent("report.json"))
        )
        #expect(report.notSent == count)
        let failure = report.outputFailures?.first
        #expect(report.outputFailures?.count == 1, "\(String(describing: report.outputFailures))")
        #expect(failure?.output == "unsettled" && failure?.path == unsettled && failure?.rowsMissing == count)
        #expect(failure?.error.contains("No space left on device") == true, "\(String(describing: failure))")
        #expect(report.summary.contains("NOT WRITTEN: the unsettled file"))
        let left = try FileManager.default.contentsOfDirectory(atPath: disk.path)
        #expect(left.isEmpty, "no partial, stale, spill or temporary file: \(left)")
    }

    /// Every row sent and answered, the rejects file's disk full: exit 3 (not 1), the report names the rejects file
    /// and the rows it lacks, and the unsettled file (on another disk) is written.
    @Test func aRejectsFileThatCannotBeWrittenMakesTheExitStatus3() async throws {
        guard let salvo = InterruptionTests.builtExecutable else { return }
        let disk = try SmallFilesystem(bytes: 16 << 10)
        defer { disk.unmount() }
        let simulator = try await Simulator.start(SimulatorConfiguration.testing(CertificateFactory.shared))
        let (folder, tokens, bad, rejects, arguments) = try Self.rejectsSend(
            "salvo-full-rej",
            seed: 42,
            rejectsOn: disk,
            gatewayPort: simulator.gatewayPort
        )
        let outcome: (Int32, String)
        do {
            outcome = try await TestProcess.run(salvo, arguments, in: folder, output: .standardErrorOnly)
        } catch {
            try await simulator.shutdown()
            throw error
        }
        try await simulator.shutdown()
        let (status, errors) = outcome
        #expect(status == 3, "\(errors)")
        #expect(errors.contains("the rejects file \(rejects) is missing (2000 rows not listed)"), "\(errors)")
        let report = try JSONDecoder().decode(
            JobReport.self,
            from: Data(contentsOf: folder.appendingPathComponent("report.json"))
        )
        #expect(report.delivered == tokens.count && report.invalidInput == bad.count)
        #expect(report.outputFailures?.map(\.output) == ["rejects"])
        #expect(report.outputFailures?.first?.rowsMissing == bad.count)
        #expect(try FileManager.default.contentsOfDirectory(atPath: disk.path).isEmpty)
        let unsettled = try String(contentsOf: folder.appendingPathComponent("report.unsettled.csv"), encoding: .utf8)
        #expect(unsettled == "token,file,line,outcome\n", "written: nothing unsettled")
    }

    /// A journaled job whose rejects file could not be written is not recorded finished: once the disk has room, the
    /// same command sends nothing again (the gateway sees no new notification) and writes the rejects file.
    @Test func aJournaledJobWritesTheMissingRejectsFileWhenRunAgain() async throws {
        guard let salvo = InterruptionTests.builtExecutable else { return }
        let disk = try SmallFilesystem(bytes: 16 << 10)
        defer { disk.unmount() }
        let simulator = try await Simulator.start(SimulatorConfiguration.testing(CertificateFactory.shared))
        let (folder, tokens, bad, rejects, arguments) = try Self.rejectsSend(
            "salvo-full-journal",
            seed: 46,
            rejectsOn: disk,
            gatewayPort: simulator.gatewayPort,
            extra: ["--journal", "journal"]
        )
        let first: (Int32, String)
        let second: (Int32, String)
        let accepted: (Int, Int)
        do {
            first = try await TestProcess.run(salvo, arguments, in: folder, output: .standardErrorOnly)
            let afterFirst = simulator.ledger.snapshot().accepted
            // Room on the disk: the same command again.
            let grown = try await TestProcess.run(
                "/bin/mount",
                ["-o", "remount,size=1m", disk.path],
                in: folder,
                output: .standardErrorOnly
            )
            #expect(grown.0 == 0, "remount: \(grown.1)")
            second = try await TestProcess.run(salvo, arguments, in: folder, output: .standardErrorOnly)
            accepted = (afterFirst, simulator.ledger.snapshot().accepted)
        } catch {
            try await simulator.shutdown()
            throw error
        }
        try await simulator.shutdown()
        #expect(first.0 == 3, "\(first.1)")
        #expect(first.1.contains("the rejects file \(rejects) is missing"), "\(first.1)")
        #expect(accepted.0 == tokens.count)
        #expect(second.0 == 1, "refused rows, every output written: \(second.1)")
        #expect(accepted.1 == accepted.0, "nothing sent again")
        let lines = try String(contentsOfFile: rejects, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 1 + bad.count)
        let report = try JSONDecoder().decode(
            JobReport.self,
            from: Data(contentsOf: folder.appendingPathComponent("report.json"))
        )
        #expect(report.outputFailures == nil && report.delivered == tokens.count && report.invalidInput == bad.count)
    }

    /// A send folder of 50 good rows and 2000 bad ones of 100 bytes (200 KB of rejects, for a 16 KB disk), its
    /// rejects file on `disk`: the folder, the good tokens, the bad rows, the rejects file and the send's arguments
    /// (`extra` after `--rejects`).
    static func rejectsSend(
        _ prefix: String,
        seed: UInt64,
        rejectsOn disk: SmallFilesystem,
        gatewayPort: Int,
        extra: [String] = []
    ) throws -> (folder: URL, tokens: [String], bad: [String], rejects: String, arguments: [String]) {
        let paths = CertificateFactory.sharedFolder
        let (folder, tokens) = try sendFolder(prefix, tokens: 50, seed: seed)
        let bad = (0..<2000).map { "not-a-token-\($0)-" + String(repeating: "x", count: 80) }
        try Data(("token\n" + (tokens + bad).joined(separator: "\n") + "\n").utf8)
            .write(to: folder.appendingPathComponent("tokens.csv"))
        let rejects = disk.path + "/rejects.csv"
        let arguments =
            [
                "send", "tokens.csv", "--payload", "payload.json", "--cert", paths.client, "--key", paths.clientKey,
                "--ca", paths.ca, "--report", "report.json", "--rejects", rejects,
            ] + extra + ["--quiet", "--gateway", "127.0.0.1:\(gatewayPort)"]
        return (folder, tokens, bad, rejects, arguments)
    }
}
