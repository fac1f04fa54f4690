import Foundation
import SalvoBinary
import SalvoRows
import SalvoSend
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// `report merge` refuses the parts of different jobs, naming what differs: reports carry the job's fingerprint.
@Suite(.tags(.network), .runs(.network)) struct ReportMergeFingerprintTests {
    private func part(_ index: Int, payload: String, priority: String = "10") -> JobReport {
        var report = JobReport()
        report.mode = "binary command 2"
        report.gateway = "127.0.0.1:2195"
        report.partition = Partition(index: index, count: 2)
        report.inputFiles = [InputFile(path: "tokens.csv", bytes: 660)]
        report.inputRows = 10
        report.validRows = 5
        report.confirmed = 5
        report.job = JobFingerprint(settings: ["payload": payload, "--priority": priority, "partitions": "2"])
        return report
    }

    private let one = String(repeating: "1f", count: 32)
    private let other = String(repeating: "e0", count: 32)

    @Test func refusesPartsWithOtherPayloadsOrOptionsNamingEachDifference() {
        let error = #expect(throws: JobError.self) {
            try ReportMerge.merge([self.part(0, payload: self.one), self.part(1, payload: self.other, priority: "5")])
        }
        let message = error?.message ?? ""
        #expect(message.contains("report 2 is not the job of report 1"), "\(message)")
        #expect(message.contains("payload: sha256 e0e0e0e0e0e0… against sha256 1f1f1f1f1f1f…"), "\(message)")
        #expect(message.contains("--priority: 5 against 10"), "\(message)")
    }

    @Test func mergesPartsOfOneJobAndKeepsTheFingerprint() throws {
        let merged = try ReportMerge.merge([self.part(1, payload: self.one), self.part(0, payload: self.one)])
        #expect(merged.mergedPartitions == 2 && merged.delivered == 10)
        #expect(merged.job == self.part(0, payload: self.one).job)
    }

    @Test func refusesPartsWithoutAFingerprintUnlessForced() throws {
        var old = self.part(1, payload: self.one)
        old.job = nil
        let error = #expect(throws: JobError.self) { try ReportMerge.merge([self.part(0, payload: self.one), old]) }
        #expect(error?.message.contains("report 2 carries no job fingerprint") == true, "\(String(describing: error))")
        let merged = try ReportMerge.merge([self.part(0, payload: self.one), old], force: true)
        #expect(merged.delivered == 10)
        // Forced, a fingerprint that differs is still refused.
        #expect(throws: JobError.self) {
            try ReportMerge.merge(
                [self.part(0, payload: self.one), old, self.part(1, payload: self.other)],
                force: true
            )
        }
    }

    @Test func aPartWithAnOutputFailureOrCutShortCarriesItIntoTheMerge() throws {
        var cut = self.part(1, payload: self.one)
        cut.cutShort = "the unsettled list is incomplete"
        cut.outputFailures = [OutputFailure(output: "unsettled", path: "u.csv", error: "full", rowsMissing: 3)]
        let merged = try ReportMerge.merge([self.part(0, payload: self.one), cut])
        #expect(merged.cutShort == cut.cutShort)
        #expect(merged.outputFailures == cut.outputFailures)
        #expect(merged.summary.contains("NOT WRITTEN: the unsettled file u.csv is missing (3 rows not listed)"))
    }

    /// Two partitions of one input sent by the real `salvo` with different payloads: `report merge` exits 3 naming
    /// the payload; the same payload merges.
    @Test func theExecutableRefusesToMergePartitionsSentWithOtherPayloads() async throws {
        guard let salvo = InterruptionTests.builtExecutable else { return }
        let paths = CertificateFactory.sharedFolder
        let simulator = try await Simulator.start(SimulatorConfiguration.testing(CertificateFactory.shared))
        let (folder, _) = try sendFolder("salvo-merge-fp", tokens: 40, seed: 44)
        try Data(#"{"aps":{"alert":"other"}}"#.utf8).write(to: folder.appendingPathComponent("other.json"))
        func send(_ partition: String, _ payload: String, _ report: String) async throws -> Int32 {
            try await TestProcess.run(
                salvo,
                [
                    "send", "tokens.csv", "--payload", payload, "--partition", partition, "--cert", paths.client,
                    "--key", paths.clientKey, "--ca", paths.ca, "--gateway", "127.0.0.1:\(simulator.gatewayPort)",
                    "--report", report, "--quiet",
                ],
                in: folder,
                output: .standardErrorOnly
            ).status
        }
        let statuses: [Int32]
        do {
            statuses = [
                try await send("0/2", "payload.json", "a0.json"), try await send("1/2", "payload.json", "a1.json"),
                try await send("1/2", "other.json", "b1.json"),
            ]
        } catch {
            try await simulator.shutdown()
            throw error
        }
        try await simulator.shutdown()
        #expect(statuses == [0, 0, 0])
        let refused = try await TestProcess.run(
            salvo,
            ["report", "merge", "a0.json", "b1.json", "--output", "merged.json"],
            in: folder,
            output: .standardErrorOnly
        )
        #expect(refused.status == 3, "\(refused.output)")
        #expect(refused.output.contains("report 2 is not the job of report 1"), "\(refused.output)")
        #expect(refused.output.contains("payload: sha256"), "\(refused.output)")
        #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent("merged.json").path))
        let merged = try await TestProcess.run(
            salvo,
            ["report", "merge", "a0.json", "a1.json", "--output", "merged.json"],
            in: folder,
            output: .standardErrorOnly
        )
        #expect(merged.status == 0, "\(merged.output)")
        let report = try JSONDecoder().decode(
            JobReport.self,
            from: Data(contentsOf: folder.appendingPathComponent("merged.json"))
        )
        #expect(report.mergedPartitions == 2 && report.delivered == 40)
    }
}
