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

/// The real `salvo send --journal`, started twice on one job against the simulator: the second run exits 3 at once
/// naming the first, the first finishes, and no token is delivered twice. Then `salvo journal verify` finds the
/// journal intact, and a byte of it damaged.
@Suite(.tags(.network), .runs(.network)) struct JournalExclusiveRunTests {
    @Test func aSecondRunOfARunningJobExitsAtOnceAndNothingIsSentTwice() async throws {
        guard let salvo = InterruptionTests.builtExecutable else { return }
        let paths = CertificateFactory.sharedFolder
        var configuration = SimulatorConfiguration.testing(CertificateFactory.shared)
        configuration.http2 = HTTP2EndpointConfiguration()
        let simulator = try await Simulator.start(configuration)
        let count = 3000
        let (folder, tokens) = try sendFolder("salvo-jx", tokens: count, seed: 43)
        // 400 a second: the first run takes about 7 s, so the second comes while it sends (on a loaded machine too).
        let arguments =
            [
                "send", "tokens.csv", "--payload", "payload.json", "--gateway", "127.0.0.1:\(simulator.http2Port ?? 0)",
                "--cert", paths.client, "--key", paths.clientKey, "--ca", paths.ca, "--connections", "1",
                "--journal", "journal", "--rate", "400", "--quiet",
            ] + h2SendArguments
        let first = try TestProcess(salvo, arguments + ["--report", "first.json"], in: folder)
        let clock = ContinuousClock()
        try await eventually("200 rows accepted", timeout: .seconds(30)) { simulator.ledger.snapshot().accepted >= 200 }
        #expect(first.isRunning, "the first run is still sending")
        let secondStart = clock.now
        let second = try TestProcess(salvo, arguments + ["--report", "second.json"], in: folder)
        let secondStatus = try await second.wait(seconds: 30)
        let secondTook = clock.now - secondStart
        #expect(secondStatus == 3, "\(second.output)")
        #expect(secondTook < .seconds(5), "refused at once: \(secondTook)")
        #expect(
            second.output.contains("is held by another run of the job (host "),
            "names the holder: \(second.output)"
        )
        #expect(second.output.contains("pid \(first.processIdentifier)"), "\(second.output)")
        #expect(first.isRunning, "the refusal did not disturb the first run")
        // A third waits for the journal: it gets it when the first ends, finds the job finished and sends nothing.
        let waiter = try TestProcess(
            salvo,
            arguments + ["--report", "third.json", "--wait-for-journal", "60"],
            in: folder
        )

        // While the first still runs, verify reads the journal without taking it and names the holder.
        let verifyWhileHeld = try TestProcess(salvo, ["journal", "verify", "journal"], in: folder)
        _ = try await verifyWhileHeld.wait(seconds: 30)
        if first.isRunning {
            #expect(
                verifyWhileHeld.output.contains("lock: held by host "),
                "\(verifyWhileHeld.output)"
            )
        }

        let firstStatus = try await first.wait(seconds: 60)
        #expect(firstStatus == 0, "\(first.output)")
        #expect(try await waiter.wait(seconds: 60) == 0, "\(waiter.output)")
        #expect(waiter.output.contains("this job finished before"), "\(waiter.output)")
        var twice = 0
        var never = 0
        for token in tokens {
            let delivered = simulator.ledger.record(for: try DeviceToken(hex: token).bytes)?.count ?? 0
            if delivered > 1 { twice += 1 }
            if delivered == 0 { never += 1 }
        }
        #expect(twice == 0, "no token delivered twice")
        #expect(never == 0, "every token delivered")
        #expect(simulator.ledger.snapshot().accepted == count)
        try await simulator.shutdown()

        // Intact: exit 0. One byte that is not a state: exit 3, its offset named.
        let verify = try TestProcess(salvo, ["journal", "verify", "journal"], in: folder)
        #expect(try await verify.wait(seconds: 30) == 0, "\(verify.output)")
        #expect(verify.output.contains("verdict: intact"), "\(verify.output)")
        #expect(verify.output.contains("lock: not held"), "\(verify.output)")
        #expect(verify.output.contains("0 written (uncertain), \(count) confirmed"), "\(verify.output)")
        let state = folder.appendingPathComponent("journal/rows.state")
        var bytes = [UInt8](try Data(contentsOf: state))
        bytes[64 + 100] = 0x41
        try Data(bytes).write(to: state)
        let damaged = try TestProcess(salvo, ["journal", "verify", "journal"], in: folder)
        #expect(try await damaged.wait(seconds: 30) == 3, "\(damaged.output)")
        #expect(damaged.output.contains("the first at file offset 164"), "\(damaged.output)")
        #expect(damaged.output.contains("--journal-restart"), "\(damaged.output)")
    }
}
