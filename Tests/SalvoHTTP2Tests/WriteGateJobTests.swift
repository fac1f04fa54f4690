import APNSWire
import NIOConcurrencyHelpers
import SalvoHTTP2
import SalvoRows
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// A bulk job with a write gate (a fleet's campaign partition has one): the rows the gate withholds are never written
/// and are left in the job's outcomes as not sent, with the rest of the job carried out as without a gate.
@Suite(.tags(.network), .runs(.network), .serialized, .timeLimit(.minutes(1)))
struct WriteGateJobTests {
    /// Withholds every row from line `firstClosed` on, and counts the rows it was asked about.
    final class ClosingGate: HTTP2WriteGate {
        let firstClosed: Int
        let asked = NIOLockedValueBox(0)

        init(firstClosed: Int) { self.firstClosed = firstClosed }

        func withheld(_ lines: [Int]) -> Set<Int> {
            self.asked.withLockedValue { $0 += lines.count }
            return Set(lines.filter { $0 >= self.firstClosed })
        }
    }

    @Test func rowsTheGateWithholdsAreNeverWrittenAndAreLeftNotSent() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try TokenFile(count: 300, seed: 71, in: folder)
        let simulator = try await TokenSimulator.start(topic: testTopic, keyID: "GATEKEY123", teamID: "GATETEAM12")
        // Line 1 is the header: the rows on lines 2 to 121 may be written, those on 122 to 301 may not.
        let gate = ClosingGate(firstClosed: 122)
        var configuration = simulator.job
        configuration.gate = gate
        let result: HTTP2JobResult
        do {
            result = try await HTTP2Job.run(configuration: configuration, source: file.source, summary: file.summary)
        } catch {
            try await simulator.simulator.shutdown()
            throw error
        }
        let ledger = simulator.simulator.ledger
        let written = file.tokens.prefix(120)
        let withheld = file.tokens.dropFirst(120)
        let deliveredWritten = written.filter { ledger.record(for: $0.bytes)?.count == 1 }.count
        let deliveredWithheld = withheld.filter { ledger.record(for: $0.bytes) != nil }.count
        try await simulator.simulator.shutdown()
        #expect(deliveredWritten == 120 && deliveredWithheld == 0)
        #expect(result.report.confirmed == 120)
        #expect(result.notSent == 180, "\(result.report.summary)")
        #expect(Set(result.unsettledRows.map(\.token)) == Set(withheld.map(\.hexString)))
        #expect(result.unsettledRows.allSatisfy { $0.outcome == .unsent })
        #expect(gate.asked.withLockedValue { $0 } >= 300, "every row was asked about before its write")
    }
}
