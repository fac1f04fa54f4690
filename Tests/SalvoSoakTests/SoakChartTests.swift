import Dispatch
import Foundation
import SalvoTestSupport
import SalvoTestTraits
import Testing

@testable import SalvoSoak

/// Debian's headless Chromium, when installed (CI installs it).
private let chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].first {
    FileManager.default.isExecutableFile(atPath: $0)
}

@Suite(.tags(.process), .runs(.process)) struct SoakChartTests {
    private func report() -> SoakReport {
        SoakReport(
            interface: "binary",
            plan: "hostile <test>",
            tokensPerRound: 1000,
            connections: 2,
            onUncertain: "resend",
            seconds: 40,
            rounds: (1...8).map { round($0, memory: (90 + $0) << 20) },
            failures: [],
            rules: SoakRules.descriptions
        )
    }

    @Test func thePageIsSelfContainedAndNamesEverySeries() {
        let html = SoakChart.html(self.report())
        for series in ["throughput", "peak-memory", "memory-after", "rejected", "uncertain", "lost-or-duplicated"] {
            #expect(html.contains("data-series=\"\(series)\""))
        }
        #expect(!html.contains("http://") || !html.contains("src=\"http"), "nothing from the network")
        #expect(!html.contains("<script src"))
        #expect(html.contains("hostile &lt;test&gt;"), "text is escaped")
        #expect(html.components(separatedBy: "<circle").count - 1 == 8 * 7, "a dot per round and series")
    }

    /// The page in a real browser: its script measures every series after layout and writes the lengths into the
    /// page, which `--dump-dom` shows.
    @Test(.enabled(if: chromium != nil || ProcessInfo.processInfo.environment["CI"] != nil))
    func aHeadlessBrowserDrawsEverySeries() async throws {
        let browser = try #require(chromium, "CI installs Debian's chromium")
        let html = SoakChart.html(self.report())
        let dom = try await Self.render(html, with: browser)
        let drawn = try #require(
            dom.range(of: "<pre id=\"drawn\">").map { dom[$0.upperBound...].prefix { $0 != "<" } },
            "the page's script ran: \(dom.prefix(300))"
        )
        var lengths: [String: Double] = [:]
        for pair in drawn.split(separator: " ") {
            let parts = pair.split(separator: "=")
            if parts.count == 2 { lengths[String(parts[0])] = Double(parts[1]) }
        }
        for series in ["throughput", "peak-memory", "memory-after", "rejected", "uncertain", "reconnects"] {
            #expect((lengths[series] ?? 0) > 100, "\(series) is drawn across the chart: \(drawn)")
        }
    }

    /// `html` as the browser's DOM after its scripts ran (`--dump-dom`). Bounded: a browser still running after
    /// 60 s is killed, and the test fails.
    private static func render(_ html: String, with browser: String) async throws -> String {
        let folder = TestScratch.root.appendingPathComponent("salvo-chart-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let page = folder.appendingPathComponent("soak.html")
        try Data(html.utf8).write(to: page)
        // Its standard output into a file (a DOM larger than a pipe's buffer never holds the browser).
        let (_, dom) = try await TestProcess.run(
            browser,
            [
                "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=\(folder.path)/profile",
                "--virtual-time-budget=5000", "--dump-dom", page.absoluteString,
            ],
            output: .standardOutputOnly,
            seconds: 60
        )
        return dom
    }
}
