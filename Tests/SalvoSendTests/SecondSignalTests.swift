import Foundation
import SalvoBinary
import SalvoIO
import SalvoRows
import SalvoTestSupport
import SalvoTestTraits
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A second SIGINT ends the process within a second or so whatever the job is waiting on, with a report written.
@Suite(.tags(.process), .runs(.process)) struct SecondSignalTests {
    /// A gateway whose TCP accepts (the kernel's backlog) and which never reads or answers a byte: the TLS
    /// handshake waits. Two SIGINTs: the process ends within 3 s of the second (its deadline is 1 s), exit 130, and
    /// the report accounts for every row (settled or not sent) and, when it was cut short, says that the unsettled
    /// list is incomplete.
    @Test func aSecondSIGINTEndsTheProcessWithinASecondAndWritesTheReport() async throws {
        let (listener, port) = try Socket.listen(host: "127.0.0.1", port: 0)
        defer { close(listener) }
        let (folder, _) = try sendFolder("salvo-twice", tokens: 2000, seed: 43)
        try await Self.interruptTwice(folder: folder, gateway: (listener, port), rows: 2000)
    }

    /// A large input and a gateway that never answers: after the signals the job reads the rest of the input to list
    /// it as unsent, longer than a second on a slow machine. The process still ends within 3 s of the second
    /// signal; when the job had not returned, the report is the cut-short record and no partial file is left.
    @Test func aSecondSIGINTDoesNotWaitForTheUnsettledListOfALargeInput() async throws {
        let (listener, port) = try Socket.listen(host: "127.0.0.1", port: 0)
        defer { close(listener) }
        let rows = 1_000_000
        let (folder, _) = try sendFolder("salvo-twice-big", tokens: 1, seed: 45)
        var generator = TokenGenerator(seed: 45)
        var text = "token\n"
        text.reserveCapacity(65 * (rows + 1))
        for _ in 0..<rows { text += generator.next().hexString + "\n" }
        try Data(text.utf8).write(to: folder.appendingPathComponent("tokens.csv"))
        defer { try? FileManager.default.removeItem(at: folder) }
        try await Self.interruptTwice(folder: folder, gateway: (listener, port), rows: rows)
    }

    /// Sends `folder`'s tokens to `gateway` (which never answers), SIGINT twice, and checks the bound and the record.
    static func interruptTwice(folder: URL, gateway: (listener: Int32, port: Int), rows count: Int) async throws {
        let port = gateway.port
        guard let salvo = InterruptionTests.builtExecutable else { return }
        let paths = CertificateFactory.sharedFolder
        let report = folder.appendingPathComponent("report.json")
        let run = try TestProcess(
            salvo,
            [
                "send", "tokens.csv", "--payload", "payload.json", "--gateway", "127.0.0.1:\(port)",
                "--cert", paths.client, "--key", paths.clientKey, "--ca", paths.ca, "--connections", "1",
                "--report", report.path, "--quiet",
            ],
            in: folder,
            output: .standardErrorOnly
        )
        // Until the job has connected (its signal handling is in place before it connects): a fixed wait raced the
        // start of a process on a loaded machine, whose signals then met the default action (status 2, no report).
        try await eventually("the job connects, or its end", timeout: .seconds(30)) {
            var pending = pollfd(fd: gateway.listener, events: Int16(POLLIN), revents: 0)
            return poll(&pending, 1, 0) != 0 || !run.isRunning
        }
        // Connected and waiting on the handshake (the fixed pauses are the behaviour: two signals apart).
        try await Task.sleep(for: .milliseconds(500))
        #expect(run.isRunning, "the job waits on a gateway that never answers")
        run.signal(SIGINT)
        try await Task.sleep(for: .milliseconds(300))
        let clock = ContinuousClock()
        run.signal(SIGINT)
        let second = clock.now
        // Past 10 s of the second SIGINT it is killed, and the wait throws.
        let status = try await run.wait(seconds: 10)
        let took = clock.now - second
        let text = run.standardError
        // Within a second by design; the bound leaves room for a loaded machine.
        #expect(took < .seconds(3), "ended \(took) after the second signal: \(text)")
        #expect(status == 130, "\(text)")
        let decoded = try JSONDecoder().decode(JobReport.self, from: Data(contentsOf: report))
        #expect(decoded.stopped?.contains("SIGINT") == true)
        #expect(decoded.delivered == 0, "the gateway never answered")
        let accounted =
            decoded.delivered + decoded.rejectedTotal + decoded.expired + decoded.uncertain + decoded.notSent
        #expect(accounted == decoded.validRows, "every row in exactly one field: \(decoded)")
        if let cutShort = decoded.cutShort {
            // The job did not return in time: the record says what it lacks.
            #expect(cutShort.contains("the unsettled list is incomplete"))
            #expect(decoded.outputFailures?.contains { $0.output == "unsettled" } == true)
            #expect(text.contains("did not stop within 1.0 s"), "\(text)")
            #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent("report.unsettled.csv").path))
        } else {
            #expect(decoded.validRows == count)
        }
        let left = try FileManager.default.contentsOfDirectory(atPath: folder.path)
        #expect(!left.contains { $0.contains(".salvo-") || $0.contains(".untaken-") }, "no leftovers: \(left)")
    }
}
