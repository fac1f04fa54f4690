import Foundation
import SalvoBinary
import SalvoRows
import SalvoSend
import SalvoTestSupport
import SalvoTestTraits
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The real `salvo send` against a journal another run holds: `--wait-for-journal` waits, and the first signal ends
/// the wait (exit 130 or 143, saying so, nothing sent); `--journal-restart` says on standard error, once the run
/// holds the journal and not with `--quiet`, that rows may be sent again.
@Suite(.tags(.process), .runs(.process)) struct JournalWaitSignalTests {
    @Test(arguments: [SIGINT, SIGTERM]) func aSignalEndsTheWaitForTheJournal(signal: Int32) async throws {
        guard let salvo = InterruptionTests.builtExecutable else { return }
        let (folder, _) = try sendFolder("salvo-jwait", tokens: 3, seed: 47)
        let held = try JournalLock.acquire(folder.appendingPathComponent("journal").path)
        defer { withExtendedLifetime(held) {} }
        let paths = CertificateFactory.sharedFolder
        let run = try TestProcess(
            salvo,
            [
                "send", "tokens.csv", "--payload", "payload.json", "--gateway", "127.0.0.1:9", "--cert", paths.client,
                "--key", paths.clientKey, "--journal", "journal", "--wait-for-journal", "600", "--quiet",
            ],
            in: folder,
            output: .apart
        )
        // Waiting: the lock is held for as long as the test lives (the fixed pause is the behaviour: it still waits
        // after it). The signal goes once salvo watches for it and waits on the journal's lock: a loaded machine can
        // take longer than the pause to get it there, and a signal before then ends it otherwise.
        try await Task.sleep(for: .milliseconds(1500))
        let lock = JournalLock.path(folder.appendingPathComponent("journal").path)
        try await eventually(
            "salvo waiting on the journal's lock, watching for signal \(signal)",
            timeout: .seconds(30)
        ) {
            run.catches(signal) && run.holdsOpen(lock)
        }
        #expect(run.isRunning, "waits for the journal: \(run.standardError)")
        run.signal(signal)
        let status = try await run.wait(seconds: 10)
        #expect(status == 128 + signal, "\(run.standardError)")
        #expect(run.standardError.contains("stopped waiting for the run holding it"), "\(run.standardError)")
        #expect(run.standardError.contains("nothing was sent"), "\(run.standardError)")
        #expect(try JobJournal.loadManifest(folder.appendingPathComponent("journal").path) == nil, "nothing begun")
    }

    /// The notice of `--journal-restart` goes to standard error, once the journal is this run's: not with
    /// `--quiet`, and not when another run holds the journal (the run is refused, nothing begun).
    @Test func theRestartNoticeGoesToStandardErrorOnceTheJournalIsHeld() async throws {
        guard let salvo = InterruptionTests.builtExecutable else { return }
        let credentials = CertificateFactory.shared
        let server = try await HTTP2LoopbackServer(
            certificateChain: [credentials.server.certificate],
            privateKey: credentials.server.key,
            clientTrustRoots: credentials.trustRoots
        ) { _ in .ok(apnsID: nil) }
        let (folder, _) = try sendFolder("salvo-jrestart", tokens: 3, seed: 48)
        let paths = CertificateFactory.sharedFolder
        let arguments =
            [
                "send", "tokens.csv", "--payload", "payload.json", "--gateway", "127.0.0.1:\(server.port)",
                "--cert", paths.client, "--key", paths.clientKey, "--ca", paths.ca, "--journal", "journal",
                "--journal-restart",
            ] + h2SendArguments
        let notice = "beginning the job again (--journal-restart)"

        let loud = try TestProcess(salvo, arguments, in: folder, output: .apart)
        #expect(try await loud.wait(seconds: 60) == 0, "\(loud.standardError)")
        #expect(loud.standardError.contains(notice), "\(loud.standardError)")
        #expect(!loud.standardOutput.contains(notice), "\(loud.standardOutput)")

        let quiet = try TestProcess(salvo, arguments + ["--quiet"], in: folder, output: .apart)
        #expect(try await quiet.wait(seconds: 60) == 0, "\(quiet.standardError)")
        #expect(!quiet.standardError.contains(notice) && !quiet.standardOutput.contains(notice))

        let held = try JournalLock.acquire(folder.appendingPathComponent("journal").path)
        let refused = try TestProcess(salvo, arguments, in: folder, output: .apart)
        #expect(try await refused.wait(seconds: 60) == 3, "\(refused.standardError)")
        withExtendedLifetime(held) {}
        #expect(refused.standardError.contains("is held by another run of the job"), "\(refused.standardError)")
        #expect(!refused.standardError.contains(notice) && !refused.standardOutput.contains(notice))
        await server.stop()
    }
}

/// Server-chosen text (a refusal's reason) reaches the terminal escaped in the summary `send` prints: an escape
/// sequence in it cannot retitle or recolour the operator's terminal.
@Suite(.tags(.process), .runs(.process)) struct TerminalEscapeSummaryTests {
    @Test func aReasonTheServerChoseIsEscapedInTheSummary() async throws {
        guard let salvo = InterruptionTests.builtExecutable else { return }
        let credentials = CertificateFactory.shared
        let reason = "Bad\u{1B}]0;owned\u{07}\u{1B}[31mReason"
        let body = try JSONSerialization.data(withJSONObject: ["reason": reason])
        let server = try await HTTP2LoopbackServer(
            certificateChain: [credentials.server.certificate],
            privateKey: credentials.server.key,
            clientTrustRoots: credentials.trustRoots
        ) { _ in .respond(status: 400, headers: [], body: Array(body)) }
        let (folder, _) = try sendFolder("salvo-escape-summary", tokens: 2, seed: 49)
        let paths = CertificateFactory.sharedFolder
        let run = try TestProcess(
            salvo,
            [
                "send", "tokens.csv", "--payload", "payload.json", "--gateway", "127.0.0.1:\(server.port)",
                "--cert", paths.client, "--key", paths.clientKey, "--ca", paths.ca,
            ] + h2SendArguments,
            in: folder,
            output: .apart
        )
        let status = try await run.wait(seconds: 60)
        await server.stop()
        let output = run.standardOutput
        #expect(status == 1, "refused rows: \(run.standardError)")
        #expect(output.contains("Bad\\u{1B}]0;owned\\u{7}\\u{1B}[31mReason"), "the reason, escaped: \(output)")
        #expect(!output.unicodeScalars.contains { $0 == "\u{1B}" || $0 == "\u{07}" }, "no raw escape: \(output)")
        #expect(output.contains("\n"), "line breaks kept")
    }
}
