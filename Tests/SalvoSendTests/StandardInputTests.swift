import APNSWire
import Foundation
import SalvoBinary
import SalvoRows
import SalvoSimulator
import SalvoTestSupport
import Testing

@testable import SalvoSend

#if canImport(Glibc)
import Glibc
import SalvoTestTraits
#endif

/// `-` as a token file: the real executable reads the CSV from a pipe (spooled into a file first), against the
/// simulator, and names the input `-` wherever it names it to a person.
@Suite(.tags(.process), .runs(.process), .serialized) struct StandardInputTests {
    enum Wire: String, CaseIterable, Sendable {
        case binary
        case h2
    }

    /// Tokens from `seed`, and the CSV that holds them with two bad rows after the tenth token: `nothex` on line 12
    /// and `abc` on line 13 (line 1 is the header).
    static func csv(count: Int, seed: UInt64) -> (tokens: [String], text: String) {
        var generator = TokenGenerator(seed: seed)
        let tokens = (0..<count).map { _ in generator.next().hexString }
        let rows = ["token"] + tokens.prefix(10) + ["nothex", "abc"] + tokens.dropFirst(10)
        return (tokens, rows.joined(separator: "\n") + "\n")
    }

    /// The arguments that send to `simulator` over `wire` with the shared test certificates.
    static func gatewayArguments(_ wire: Wire, _ simulator: Simulator) -> [String] {
        let paths = CertificateFactory.sharedFolder
        let credentials = ["--cert", paths.client, "--key", paths.clientKey, "--ca", paths.ca]
        switch wire {
        case .binary:
            return credentials + ["--gateway", "127.0.0.1:\(simulator.gatewayPort)", "--settle-milliseconds", "300"]
        case .h2:
            return credentials + ["--gateway", "127.0.0.1:\(simulator.http2Port ?? 0)"] + h2SendArguments
        }
    }

    static func folder() throws -> URL {
        let folder = TestScratch.root.appendingPathComponent("salvo-stdin-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data(#"{"aps":{"alert":"hi"}}"#.utf8).write(to: folder.appendingPathComponent("payload.json"))
        return folder
    }

    @Test(arguments: Wire.allCases)
    func aPipedCSVIsDeliveredOnceAndNamedDash(wire: Wire) async throws {
        guard let salvo = InterruptionTests.builtExecutable else { return }
        var configuration = SimulatorConfiguration.testing(CertificateFactory.shared)
        if wire == .h2 { configuration.http2 = HTTP2EndpointConfiguration() }
        let simulator = try await Simulator.start(configuration)
        let folder = try Self.folder()
        // The spool's folder: empty again once the run is over (the spool is unlinked as soon as it is made).
        let temporary = folder.appendingPathComponent("tmp")
        try FileManager.default.createDirectory(at: temporary, withIntermediateDirectories: true)
        let (tokens, text) = Self.csv(count: 3000, seed: 71)
        let arguments =
            ["send", "-", "--payload", "payload.json", "--connections", "2", "--report", "report.json"]
            + ["--rejects", "rejects.csv", "--quiet"] + Self.gatewayArguments(wire, simulator)
        let run = try TestProcess(
            salvo,
            arguments,
            in: folder,
            environment: ["TMPDIR": temporary.path],
            input: .pipe(Data(text.utf8))
        )
        let status = try await run.wait(seconds: 120)
        let output = run.output
        #expect(status == 1, "two bad rows: exit 1\n\(output)")

        let report = try JSONDecoder().decode(
            JobReport.self,
            from: Data(contentsOf: folder.appendingPathComponent("report.json"))
        )
        #expect(report.delivered == tokens.count, "\(report)")
        #expect(report.invalidInput == 2)
        #expect(report.inputFiles == [InputFile(path: "-", bytes: text.utf8.count)], "\(report.inputFiles ?? [])")
        // The rejects name the input `-`, with the rows' lines in the piped text.
        let rejects = try String(contentsOf: folder.appendingPathComponent("rejects.csv"), encoding: .utf8)
        let rows = rejects.split(separator: "\n").dropFirst().map {
            $0.split(separator: ",").prefix(3).joined(separator: ",")
        }
        #expect(rows == ["-,12,nothex", "-,13,abc"], "\(rejects)")
        #expect(output.contains("-: line 12"), "the console names the input -: \(output)")
        #expect(!output.contains("salvo-stdin-"), "the spool's own name is never shown: \(output)")
        // Every token exactly once, by the simulator's ledger.
        for (index, token) in tokens.enumerated() {
            let count = simulator.ledger.record(for: try DeviceToken(hex: token).bytes)?.count ?? 0
            #expect(count == 1, "token \(index) delivered \(count) times")
        }
        #expect(simulator.ledger.snapshot().accepted == tokens.count)
        #expect(try FileManager.default.contentsOfDirectory(atPath: temporary.path).isEmpty, "no spool left behind")
        try await simulator.shutdown()
    }

    @Test(arguments: Wire.allCases)
    func aJournaledPipeKilledMidRunResumesAgainstItsSpool(wire: Wire) async throws {
        guard let salvo = InterruptionTests.builtExecutable else { return }
        var configuration = SimulatorConfiguration.testing(CertificateFactory.shared)
        // Slow enough that the kill lands mid-flight (as `JournalResumeTests`): about 6 s of reading over the binary
        // interface (at 20 ms a chunk, 2.5 s, a loaded machine's late poll once found every row accepted).
        var pace: [String] = []
        if wire == .binary {
            configuration.plan.slowReader = FaultPlan.SlowReader(chunkSize: 4096, delayMilliseconds: 50)
        } else {
            configuration.http2 = HTTP2EndpointConfiguration()
            pace = ["--rate", "2000"]
        }
        let simulator = try await Simulator.start(configuration)
        let folder = try Self.folder()
        let count = 6000
        let (tokens, text) = Self.csv(count: count, seed: 72)
        let arguments =
            ["send", "-", "--payload", "payload.json", "--connections", "2", "--report", "report.json"]
            + ["--journal", "journal", "--quiet"] + Self.gatewayArguments(wire, simulator) + pace

        let first = try TestProcess(salvo, arguments, in: folder, input: .pipe(Data(text.utf8)))
        try await eventually("a quarter of the rows accepted", timeout: .seconds(30), every: .milliseconds(5)) {
            simulator.ledger.snapshot().accepted >= count / 4
        }
        try await first.kill()
        let acceptedAtKill = simulator.ledger.snapshot().accepted
        #expect(acceptedAtKill > 0 && acceptedAtKill < count, "killed mid-flight: \(acceptedAtKill)")
        #expect(first.reason == .uncaughtSignal, "killed mid-flight")
        // The spool is in the journal, whole.
        let journal = folder.appendingPathComponent("journal").path
        let spool = try Data(contentsOf: URL(fileURLWithPath: StandardInputSpool.journalPath(journal)))
        #expect(spool == Data(text.utf8), "the journal holds the piped CSV")
        // What the journal held as uncertain when the process died: the only rows that may go twice.
        var uncertainLines: Set<Int> = []
        var settledLines: Set<Int> = []
        if let manifest = try JobJournal.loadManifest(journal) {
            #expect(manifest.inputs.map(\.path) == ["-"])
            let rows = try RowJournal(
                statePath: JobJournal.statePath(journal),
                logPath: JobJournal.logPath(journal),
                lineCounts: manifest.lineCounts
            )
            for (line, state) in rows.states(file: 0).enumerated() {
                if state == .written { uncertainLines.insert(line) }
                if state.isSettled { settledLines.insert(line) }
            }
        }

        // The same command again, with other tokens on standard input: they are not read, and the run says so.
        var generator = TokenGenerator(seed: 73)
        let decoys = (0..<50).map { _ in generator.next().hexString }
        let decoyText = (["token"] + decoys).joined(separator: "\n") + "\n"
        let second = try TestProcess(salvo, arguments, in: folder, input: .pipe(Data(decoyText.utf8)))
        let status = try await second.wait(seconds: 120)
        let output = second.output
        #expect(status == 1, "two bad rows: exit 1\n\(output)")
        #expect(output.contains("this run's standard input is not read"), "\(output)")
        let report = try JSONDecoder().decode(
            JobReport.self,
            from: Data(contentsOf: folder.appendingPathComponent("report.json"))
        )
        #expect(report.delivered == count, "\(report)")
        #expect(report.invalidInput == 2)
        #expect(report.resumed?.run == 2)
        #expect(report.inputFiles?.map(\.path) == ["-"])

        // Every token at least once; twice only among the rows the journal held as uncertain (or this run found
        // uncertain); the decoys never.
        func line(ofToken index: Int) -> Int { index < 10 ? index + 2 : index + 4 }
        var twice: [Int] = []
        for (index, token) in tokens.enumerated() {
            let delivered = Int(simulator.ledger.record(for: try DeviceToken(hex: token).bytes)?.count ?? 0)
            #expect(delivered >= 1, "token \(index) never delivered")
            if delivered > 1 { twice.append(line(ofToken: index)) }
        }
        #expect(!twice.contains { settledLines.contains($0) }, "a row settled before the kill was sent again")
        let inherited = twice.filter { uncertainLines.contains($0) }
        #expect(twice.count - inherited.count <= report.uncertainEvents, "twice but not uncertain: \(twice)")
        for decoy in decoys {
            #expect(simulator.ledger.record(for: try DeviceToken(hex: decoy).bytes) == nil, "a decoy was sent")
        }
        // The finished job's manifest records the spool's hash under the name `-`.
        let manifest = try #require(try JobJournal.loadManifest(journal))
        #expect(manifest.inputs.map(\.path) == ["-"])
        #expect(manifest.inputs.first?.xxh64Pieces == InputFingerprints.xxh64Pieces(Array(text.utf8)))

        // A third run: the job is finished, nothing is sent, and standard input need not be a pipe at all.
        let acceptedBefore = simulator.ledger.snapshot().accepted
        let third = try TestProcess(salvo, arguments, in: folder, input: .nothing)
        #expect(try await third.wait(seconds: 60) == 1, "\(third.output)")
        #expect(third.output.contains("finished before"), "\(third.output)")
        #expect(simulator.ledger.snapshot().accepted == acceptedBefore, "a finished job sends nothing")
        try await simulator.shutdown()
    }

    @Test func checkAndPruneReadAPipe() async throws {
        guard let salvo = InterruptionTests.builtExecutable else { return }
        let paths = CertificateFactory.sharedFolder
        let folder = try Self.folder()
        let (tokens, text) = Self.csv(count: 500, seed: 74)

        let check = try TestProcess(
            salvo,
            [
                "check", "-", "--payload", "payload.json", "--gateway", "127.0.0.1:1", "--cert", paths.client,
                "--key", paths.clientKey, "--no-handshake",
            ],
            in: folder,
            input: .pipe(Data(text.utf8))
        )
        #expect(try await check.wait(seconds: 60) == 0, "\(check.output)")
        #expect(check.output.contains("500 valid row(s) of 502"), "\(check.output)")
        #expect(check.output.contains("-:12 nothex"), "the bad row named by `-` and its line: \(check.output)")

        // Two tokens listed as unregistered since 1970 (no registration column): dropped, every other row kept.
        let suppression = [
            "token,timestamp,time,reason", "\(tokens[3]),1,1970-01-01T00:00:01Z,Unregistered",
            "\(tokens[400]),1,1970-01-01T00:00:01Z,Unregistered",
        ]
        try Data((suppression.joined(separator: "\n") + "\n").utf8)
            .write(to: folder.appendingPathComponent("suppress.csv"))
        let prune = try TestProcess(
            salvo,
            ["prune", "-", "--suppress", "suppress.csv", "--output", "kept.csv", "--dropped", "dropped.csv"],
            in: folder,
            input: .pipe(Data(text.utf8))
        )
        #expect(try await prune.wait(seconds: 60) == 0, "\(prune.output)")
        #expect(prune.output.contains("502 rows: 500 kept, 2 dropped"), "\(prune.output)")
        let kept = try String(contentsOf: folder.appendingPathComponent("kept.csv"), encoding: .utf8)
        let keptRows = kept.split(separator: "\n").map(String.init)
        #expect(keptRows.count == 501)
        #expect(!keptRows.contains(tokens[3]) && !keptRows.contains(tokens[400]))
        #expect(keptRows.contains(tokens[0]) && keptRows.contains("nothex"))
    }

    @Test func badUsesOfStandardInputAreRefused() async throws {
        guard let salvo = InterruptionTests.builtExecutable else { return }
        let paths = CertificateFactory.sharedFolder
        let folder = try Self.folder()
        let send = [
            "--payload", "payload.json", "--gateway", "127.0.0.1:1", "--cert", paths.client, "--key", paths.clientKey,
            "--report", "report.json",
        ]

        // Named twice: standard input can be read once (64, before anything is read).
        let twice = try TestProcess(salvo, ["send", "-", "-"] + send, in: folder, input: .pipe(Data("token\n".utf8)))
        #expect(try await twice.wait(seconds: 30) == 64)
        #expect(twice.output.contains("named more than once"), "\(twice.output)")
        let checkTwice = try TestProcess(
            salvo,
            [
                "check", "-", "-", "--payload", "payload.json", "--gateway", "127.0.0.1:1", "--cert", paths.client,
                "--key", paths.clientKey, "--no-handshake",
            ],
            in: folder,
            input: .pipe(Data("token\n".utf8))
        )
        #expect(try await checkTwice.wait(seconds: 30) == 64)

        // An empty pipe: refused (3), nothing sent, nothing spooled into the journal.
        let empty = try TestProcess(
            salvo,
            ["send", "-", "--journal", "journal"] + send,
            in: folder,
            input: .pipe(Data())
        )
        #expect(try await empty.wait(seconds: 30) == 3)
        #expect(empty.output.contains("- (standard input): empty"), "\(empty.output)")
        let journal = folder.appendingPathComponent("journal").path
        #expect(!FileManager.default.fileExists(atPath: StandardInputSpool.journalPath(journal)))
        #expect(!FileManager.default.fileExists(atPath: StandardInputSpool.journalPath(journal) + ".partial"))

        // Two runs over one journal at once: the second is refused while the first still spools (its pipe held open),
        // and reads nothing.
        let held = Pipe()
        let spooling = try TestProcess(
            salvo,
            ["send", "-", "--journal", "journal"] + send,
            in: folder,
            input: .handle(held.fileHandleForReading)
        )
        let partial = StandardInputSpool.journalPath(journal) + ".partial"
        try await eventually("the spool begun", timeout: .seconds(20)) {
            FileManager.default.fileExists(atPath: partial)
        }
        let second = try TestProcess(
            salvo,
            ["send", "-", "--journal", "journal"] + send,
            in: folder,
            input: .pipe(Data("token\n".utf8))
        )
        #expect(try await second.wait(seconds: 30) == 3)
        #expect(second.output.contains("another run is spooling"), "\(second.output)")
        try await spooling.kill()
        try held.fileHandleForWriting.close()
        #expect(!FileManager.default.fileExists(atPath: StandardInputSpool.journalPath(journal)), "no spool cut short")

        // A terminal: refused (64) rather than waiting for typing.
        let terminal = try PseudoTerminal()
        defer { terminal.close() }
        let typed = try TestProcess(
            salvo,
            ["send", "-"] + send,
            in: folder,
            input: .handle(FileHandle(fileDescriptor: terminal.follower, closeOnDealloc: false))
        )
        #expect(try await typed.wait(seconds: 30) == 64)
        #expect(typed.output.contains("which is a terminal"), "\(typed.output)")
    }

    /// A signal while standard input is spooled (its pipe held open: the spool never ends by itself) ends the run
    /// at once with 128 + the signal, saying nothing was sent, rather than by the default action (no status of its
    /// own, no word); the spool cut short is not left as the input.
    @Test(arguments: [SIGINT, SIGTERM]) func aSignalWhileSpoolingEndsTheRunAtOnce(signal: Int32) async throws {
        guard let salvo = InterruptionTests.builtExecutable else { return }
        let paths = CertificateFactory.sharedFolder
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let held = Pipe()
        defer { try? held.fileHandleForWriting.close() }
        try held.fileHandleForWriting.write(contentsOf: Data("token\n".utf8))
        let spooling = try TestProcess(
            salvo,
            [
                "send", "-", "--journal", "journal", "--payload", "payload.json", "--gateway", "127.0.0.1:1", "--cert",
                paths.client, "--key", paths.clientKey, "--report", "report.json",
            ],
            in: folder,
            input: .handle(held.fileHandleForReading)
        )
        let journal = folder.appendingPathComponent("journal").path
        let partial = StandardInputSpool.journalPath(journal) + ".partial"
        let clock = ContinuousClock()
        try await eventually("the spool begun, or the run's end", timeout: .seconds(20)) {
            FileManager.default.fileExists(atPath: partial) || !spooling.isRunning
        }
        #expect(spooling.isRunning, "spools a pipe held open: \(spooling.output)")
        spooling.signal(signal)
        let signalled = clock.now
        let status = try await spooling.wait(seconds: 30)
        #expect(clock.now - signalled < .seconds(5), "ended at once: \(spooling.output)")
        #expect(spooling.reason == .exit, "not by the default action: \(spooling.output)")
        #expect(status == 128 + signal, "\(spooling.output)")
        #expect(spooling.output.contains("nothing was sent"), "\(spooling.output)")
        #expect(!FileManager.default.fileExists(atPath: StandardInputSpool.journalPath(journal)), "no spool cut short")
    }

    /// A write that fails for want of space names the spool: `/dev/full` answers every write with ENOSPC.
    @Test func aFullDiskNamesTheSpool() throws {
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        let text = Array(repeating: UInt8(ascii: "a"), count: 10_000)
        #expect(write(fds[1], text, text.count) == text.count)
        close(fds[1])
        defer { close(fds[0]) }
        let full = open("/dev/full", O_WRONLY)
        try #require(full >= 0)
        defer { close(full) }
        let error = #expect(throws: JobError.self) {
            _ = try StandardInputSpool.copy(from: fds[0], to: full, spool: "/x/stdin.csv.partial")
        }
        #expect(error?.code == .output)
        #expect(error?.message.contains("the spool of standard input /x/stdin.csv.partial") == true)
        #expect(error?.message.contains("No space left on device") == true, "\(String(describing: error))")
    }

    /// The copy goes through one fixed buffer whatever the input's size, and hashes what it copies.
    @Test func theCopyIsWholeAndHashed() throws {
        let folder = try Self.folder()
        let size = StandardInputSpool.bufferBytes * 3 + 12_345
        var generator = SplitMix64(seed: 5)
        let bytes = (0..<size).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        let writeEnd = fds[1]
        // The writer runs beside the copy: the pipe holds far less than the input.
        let writer = Thread {
            bytes.withUnsafeBytes { buffer in
                var offset = 0
                while offset < buffer.count {
                    let count = write(writeEnd, buffer.baseAddress! + offset, buffer.count - offset)
                    guard count > 0 else { break }
                    offset += count
                }
            }
            close(writeEnd)
        }
        writer.start()
        let path = folder.appendingPathComponent("spool").path
        let output = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        try #require(output >= 0)
        let copied = try StandardInputSpool.copy(from: fds[0], to: output, spool: path)
        close(output)
        close(fds[0])
        #expect(copied.bytes == size)
        #expect(copied.sha256 == JobJournal.sha256(bytes))
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Data(bytes))
    }
}

/// A pseudo-terminal pair: the follower is a terminal (`isatty`), as a shell's standard input is.
struct PseudoTerminal {
    let leader: Int32
    let follower: Int32

    struct Failure: Error {}

    init() throws {
        // posix_openpt, grantpt and unlockpt by hand (the C library's need _XOPEN_SOURCE): the multiplexer, unlocked
        // with TIOCSPTLCK, and the follower's number from TIOCGPTN (the kernel's values on every Linux target).
        let leader = open("/dev/ptmx", O_RDWR | O_NOCTTY)
        guard leader >= 0 else { throw Failure() }
        var unlock: CInt = 0
        var number: CUnsignedInt = 0
        guard ioctl(leader, 0x4004_5431, &unlock) == 0, ioctl(leader, 0x8004_5430, &number) == 0 else {
            Glibc.close(leader)
            throw Failure()
        }
        let follower = open("/dev/pts/\(number)", O_RDWR | O_NOCTTY)
        guard follower >= 0, isatty(follower) == 1 else {
            Glibc.close(leader)
            throw Failure()
        }
        self.leader = leader
        self.follower = follower
    }

    func close() {
        Glibc.close(self.follower)
        Glibc.close(self.leader)
    }
}

/// Standard input spooled onto a full disk (a small tmpfs): the run stops before sending, exit 3, naming the spool.
@Suite(
    .tags(.process),
    .runs(.process),
    .serialized,
    .enabled(if: SmallFilesystem.unavailable == nil, "needs root to mount a tmpfs")
)
struct StandardInputFullDiskTests {
    @Test(arguments: [true, false])
    func aSpoolOnAFullDiskIsAnErrorNamingIt(journaled: Bool) async throws {
        guard let salvo = InterruptionTests.builtExecutable else { return }
        let paths = CertificateFactory.sharedFolder
        let filesystem = try SmallFilesystem(bytes: 256 << 10)
        defer { filesystem.unmount() }
        let disk = filesystem.path
        let folder = try StandardInputTests.folder()
        let (_, text) = StandardInputTests.csv(count: 10_000, seed: 75)
        var arguments = [
            "send", "-", "--payload", "payload.json", "--gateway", "127.0.0.1:1", "--cert", paths.client, "--key",
            paths.clientKey, "--report", "report.json",
        ]
        var environment: [String: String] = [:]
        if journaled {
            arguments += ["--journal", disk + "/journal"]
        } else {
            environment["TMPDIR"] = disk
        }
        let run = try TestProcess(salvo, arguments, in: folder, environment: environment, input: .pipe(Data(text.utf8)))
        #expect(try await run.wait(seconds: 60) == 3)
        let output = run.output
        #expect(output.contains("No space left on device"), "\(output)")
        if journaled {
            #expect(output.contains("the spool of standard input \(disk)/journal/stdin.csv.partial"), "\(output)")
            #expect(!FileManager.default.fileExists(atPath: disk + "/journal/stdin.csv.partial"), "removed")
            #expect(!FileManager.default.fileExists(atPath: disk + "/journal/stdin.csv"))
        } else {
            #expect(output.contains("the spool of standard input \(disk)/salvo-stdin-"), "\(output)")
            #expect(output.contains("(in \(disk))"), "\(output)")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: disk).filter { $0 != "journal" }.isEmpty)
    }
}
