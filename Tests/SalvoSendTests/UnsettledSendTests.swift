import APNSWire
import Foundation
import SalvoBinary
import SalvoRows
import SalvoSend
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// The unsettled file over real TLS: it lists exactly the rows the job did not settle, and sending it again
/// retries exactly those rows.
@Suite(.tags(.network), .runs(.network)) struct UnsettledSendTests {
    @Test func rowsLeftUncertainAreListedAndSendingTheFileAgainRetriesExactlyThem() async throws {
        var generator = TokenGenerator(seed: 31)
        let tokens = (0..<4000).map { _ in generator.next() }
        var plan = FaultPlan()
        plan.reset = .init(probability: 1, scope: .connection, withinNotifications: 1500)
        let setup = try await BinarySimulatorSetup.start("salvo-uns", plan: plan)
        let resetting = setup.simulator
        let here = setup.folder
        let input = try setup.tokenFile(tokens)
        func configuration(port: Int) throws -> BinaryJobConfiguration {
            var job = try setup.job(port: port)
            job.onUncertain = .report
            return job
        }
        let unsettledPath = here + "/report.unsettled.csv"
        let first: SendResult
        do {
            first = try await BulkSend.prepare(
                SendRequest(
                    files: [input],
                    interface: .binary(try configuration(port: resetting.gatewayPort)),
                    outputs: SendOutputs(report: here + "/report.json", unsettled: unsettledPath)
                )
            ).run()
        } catch {
            try await resetting.shutdown()
            throw error
        }
        let resets = resetting.ledger.snapshot().resets
        // Rows the report calls delivered must have reached the gateway.
        let undelivered = tokens.filter { resetting.ledger.record(for: $0.bytes) == nil }
        try await resetting.shutdown()

        #expect(resets > 0, "the plan reset some connections")
        #expect(first.report.uncertain > 0)
        let lines = try String(contentsOfFile: unsettledPath, encoding: .utf8).split(separator: "\n")
        #expect(lines.first == "token,file,line,outcome")
        let listed = lines.dropFirst().map { $0.split(separator: ",", omittingEmptySubsequences: false) }
        #expect(listed.count == first.report.uncertain + first.report.notSent)
        #expect(listed.count == first.unsettledRows.count)
        #expect(listed.allSatisfy { $0.count == 4 && $0[1] == input[...] && $0[3] == "uncertain" })
        // Each listed row is the token on its line, once.
        for row in listed {
            let line = Int(row[2]) ?? 0
            #expect(line >= 2 && line < tokens.count + 2 && tokens[line - 2].hexString == row[0])
        }
        let listedTokens = Set(listed.map { String($0[0]) })
        #expect(listedTokens.count == listed.count)
        // What the gateway never received is exactly among the listed rows.
        #expect(Set(undelivered.map(\.hexString)).isSubset(of: listedTokens))
        #expect(first.report.delivered + listed.count == tokens.count)

        // The file is a token file: sending it again sends exactly its rows.
        let clean = try await Simulator.start(SimulatorConfiguration.testing(setup.certificates))
        let second: SendResult
        do {
            second = try await BulkSend.prepare(
                SendRequest(files: [unsettledPath], interface: .binary(try configuration(port: clean.gatewayPort)))
            ).run()
        } catch {
            try await clean.shutdown()
            throw error
        }
        let resent = tokens.filter { clean.ledger.record(for: $0.bytes) != nil }.map(\.hexString)
        try await clean.shutdown()
        #expect(second.report.validRows == listed.count)
        #expect(second.report.delivered == listed.count)
        #expect(Set(resent) == listedTokens, "the retry sent exactly the unsettled rows")
    }
}
