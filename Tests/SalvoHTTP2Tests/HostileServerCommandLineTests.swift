import Foundation
import SalvoRows
import SalvoTestSupport
import Testing

@testable import SalvoHTTP2

#if canImport(Glibc)
import Glibc
import SalvoTestTraits
#endif

/// `salvo send --protocol h2` against servers that let nothing through, as an operator runs it: the job ends by
/// itself with exit 3, writes its report, and lists every row in the unsettled file; a second SIGINT ends a job that
/// waits for SETTINGS within a second.
@Suite(.tags(.process), .runs(.process), .serialized, .timeLimit(.minutes(2)))
struct HostileServerCommandLineTests {
    /// `salvo`, built next to the test bundle (`TestProcess.salvoPath`).
    static var executable: String? { TestProcess.salvoPath }

    struct Exit {
        var status: Int32
        var seconds: Double
        var folder: TemporaryFolder
        var stderr: String
    }

    /// Runs `salvo send` of 200 rows against a hostile server with `--give-up-seconds 2`; `interruptAfter`: two
    /// SIGINTs that long after the start, the time then measured from the second.
    static func send(
        _ behaviour: HostileHTTP2Server.Behaviour,
        engine: HTTP2Engine,
        interruptAfter: Duration? = nil
    ) async throws -> Exit? {
        guard let salvo = Self.executable else {
            Issue.record("salvo is not built next to the tests (\(CommandLine.arguments[0]))")
            return nil
        }
        let identity = CertificateFactory.shared
        let server = try await HostileHTTP2Server(
            behaviour: behaviour,
            certificateChain: [identity.server.certificate],
            privateKey: identity.server.key
        )
        let folder = try TemporaryFolder()
        _ = try TokenFile(count: HostileServerJobTests.rows, seed: 401, in: folder)
        try Data(HostileServerJobTests.payload.bytes).write(to: URL(fileURLWithPath: folder.file("payload.json")))
        let paths = CertificateFactory.sharedFolder
        let clock = ContinuousClock()
        var start = clock.now
        let run = try TestProcess(
            salvo,
            [
                "send", "tokens-401.csv", "--payload", "payload.json", "--cert", paths.client, "--key", paths.clientKey,
                "--ca", paths.ca, "--connections", "1", "--give-up-seconds", "2", "--report", "report.json", "--quiet",
                "--protocol", "h2", "--gateway", "127.0.0.1:\(server.port)", "--server-name", "localhost", "--topic",
                CertificateFactory.sharedTopic, "--push-type", "alert", "--h2-engine", engine.rawValue,
            ],
            in: URL(fileURLWithPath: folder.path),
            output: .standardErrorOnly
        )
        if let interruptAfter {
            // Past its start: connected (bounded), then the time asked for.
            try await eventually("the job connects", timeout: .seconds(20)) {
                server.connectionCount > 0 || !run.isRunning
            }
            // The fixed pauses are the behaviour: a first SIGINT after the time asked for, a second soon after.
            try await Task.sleep(for: interruptAfter)
            run.signal(SIGINT)
            try await Task.sleep(for: .milliseconds(100))
            run.signal(SIGINT)
            start = clock.now
        }
        // Bounded: past 40 s the job is killed, and the test fails.
        do {
            try await run.wait(seconds: 40)
        } catch {
            await server.stop()
            throw error
        }
        let elapsed = clock.now - start
        await server.stop()
        return Exit(
            status: run.status,
            seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18,
            folder: folder,
            stderr: run.standardError
        )
    }

    /// The unsettled file's rows (without its header).
    static func unsettledRows(in folder: TemporaryFolder) -> Int? {
        guard let text = try? String(contentsOfFile: folder.file("report.unsettled.csv"), encoding: .utf8) else {
            return nil
        }
        return text.split(separator: "\n").count - 1
    }

    @Test(arguments: [HostileHTTP2Server.Behaviour.noStreams, .goAwayAfterSettings, .refuseEveryStream])
    func theJobEndsByItselfWithExit3AndListsEveryRow(behaviour: HostileHTTP2Server.Behaviour) async throws {
        for engine in HTTP2Engine.allCases {
            guard let exit = try await Self.send(behaviour, engine: engine) else { return }
            defer { exit.folder.remove() }
            let what = "\(behaviour), \(engine): exit \(exit.status) after \(exit.seconds) s: \(exit.stderr)"
            #expect(exit.status == 3, "\(what)")
            #expect(exit.seconds <= 16, "\(what)")
            #expect(exit.stderr.contains("--give-up-seconds"), "\(what)")
            #expect(FileManager.default.fileExists(atPath: exit.folder.file("report.json")), "\(what)")
            #expect(Self.unsettledRows(in: exit.folder) == HostileServerJobTests.rows, "\(what)")
        }
    }

    @Test func aSecondSIGINTEndsAJobWaitingForSettingsWithinASecond() async throws {
        for engine in HTTP2Engine.allCases {
            guard let exit = try await Self.send(.silentAfterTLS, engine: engine, interruptAfter: .seconds(1)) else {
                return
            }
            defer { exit.folder.remove() }
            let what = "\(engine): exit \(exit.status) \(exit.seconds) s after the second SIGINT: \(exit.stderr)"
            #expect(exit.status == 130, "\(what)")
            // Within a second by design; the bound leaves room for a loaded machine.
            #expect(exit.seconds <= 3, "\(what)")
            let report = try JSONDecoder().decode(
                JobReport.self,
                from: Data(contentsOf: URL(fileURLWithPath: exit.folder.file("report.json")))
            )
            if report.cutShort == nil {
                // The job returned in time: its own record, every row listed.
                #expect(Self.unsettledRows(in: exit.folder) == HostileServerJobTests.rows, "\(what)")
            } else {
                // The last-resort record: it says the unsettled list is missing.
                #expect(report.notSent == HostileServerJobTests.rows, "\(what)")
            }
        }
    }
}
