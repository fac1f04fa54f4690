import Dispatch
import Foundation
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// `salvo soak` as a person runs it: the real executable, its exit status, its lines and its files.
@Suite(.tags(.process), .runs(.process)) struct SoakCommandTests {
    private func soak(plan: String) async throws -> (status: Int32, output: String, report: String, chart: String)? {
        guard let salvo = InterruptionTests.builtExecutable else { return nil }
        let folder = TestScratch.root.appendingPathComponent("salvo-soak-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data(plan.utf8).write(to: folder.appendingPathComponent("plan.json"))
        let (status, text) = try await TestProcess.run(
            salvo,
            [
                "soak", "--plan", "plan.json", "--rounds", "2", "--tokens", "1000", "--duration", "60s", "--progress",
                "none", "--report", "soak.json", "--chart", "soak.html",
            ],
            in: folder,
            seconds: 300
        )
        let report = (try? String(contentsOf: folder.appendingPathComponent("soak.json"), encoding: .utf8)) ?? ""
        let chart = (try? String(contentsOf: folder.appendingPathComponent("soak.html"), encoding: .utf8)) ?? ""
        return (status, text, report, chart)
    }

    @Test func aGatewayThatLosesRowsFailsTheSoakWithExitOne() async throws {
        guard let run = try await self.soak(plan: #"{"name": "lossy", "lostFraction": 0.02}"#) else { return }
        #expect(run.status == 1, "\(run.output)")
        #expect(run.output.contains("round 1: 1000 rows"))
        #expect(run.output.contains("soak: FAIL"))
        #expect(run.output.contains("token(s) lost"))
        let report = try JSONSerialization.jsonObject(with: Data(run.report.utf8)) as? [String: Any]
        #expect((report?["rounds"] as? [Any])?.count == 2)
        #expect((report?["failures"] as? [String])?.isEmpty == false)
        #expect(run.chart.contains("data-series=\"throughput\""))
    }

    @Test func aCleanGatewayPasses() async throws {
        guard let run = try await self.soak(plan: #"{"name": "clean"}"#) else { return }
        #expect(run.status == 0, "\(run.output)")
        #expect(run.output.contains("soak: PASS"))
    }
}
