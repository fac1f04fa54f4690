import SalvoCharts

/// A soak as one self-contained HTML page: three inline SVG charts over the soak's time — throughput, memory and
/// errors per round — with no script or style from the network, readable in any browser and attachable anywhere.
///
/// Each series is a `polyline` of class `series` with `data-series` naming it, and a dot per round. A few lines of
/// inline script measure every drawn series once the browser has laid the page out and write the lengths into the
/// page (`#drawn`), so a headless browser's `--dump-dom` shows that the series were really drawn.
public enum SoakChart {
    public static func html(_ report: SoakReport) -> String {
        let times = report.rounds.map { $0.startedAt + $0.seconds }
        let charts = [
            Self.chart(
                title: "Throughput (rows settled per second)",
                unit: "/s",
                times: times,
                series: [
                    LineChart.Series(name: "throughput", color: "#1f77b4", values: report.rounds.map(\.throughput))
                ]
            ),
            Self.chart(
                title: "Memory (MiB resident)",
                unit: " MiB",
                times: times,
                series: [
                    LineChart.Series(
                        name: "peak-memory",
                        color: "#d62728",
                        values: report.rounds.map { Double($0.peakResidentBytes) / 1_048_576 }
                    ),
                    LineChart.Series(
                        name: "memory-after",
                        color: "#ff9896",
                        values: report.rounds.map { Double($0.after.residentBytes) / 1_048_576 }
                    ),
                ]
            ),
            Self.chart(
                title: "Errors per round (rejected, uncertain, reconnects, lost + duplicated)",
                unit: "",
                times: times,
                series: [
                    LineChart.Series(
                        name: "rejected",
                        color: "#9467bd",
                        values: report.rounds.map { Double($0.rejected) }
                    ),
                    LineChart.Series(
                        name: "uncertain",
                        color: "#8c564b",
                        values: report.rounds.map { Double($0.uncertainEvents) }
                    ),
                    LineChart.Series(
                        name: "reconnects",
                        color: "#7f7f7f",
                        values: report.rounds.map { Double($0.reconnects) }
                    ),
                    LineChart.Series(
                        name: "lost-or-duplicated",
                        color: "#e31a1c",
                        values: report.rounds.map { Double($0.lost + $0.duplicated) }
                    ),
                ]
            ),
        ]
        let verdict = report.verdictLines.map(Self.escaped).joined(separator: "<br>")
        let rules = report.rules.map { "<li>\(Self.escaped($0))</li>" }.joined()
        return """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8"><title>salvo soak: \(Self.escaped(report.interface)), \
            \(Self.escaped(report.plan))</title>
            <style>body{font:14px sans-serif;margin:24px;color:#222}h1{font-size:18px}svg{display:block;margin:8px 0 \
            24px}.pass{color:#2ca02c}.fail{color:#d62728}</style></head>
            <body>
            <h1 class="\(report.passed ? "pass" : "fail")">\(verdict)</h1>
            <p>\(report.rounds.count) rounds of \(report.tokensPerRound) tokens over \(report.connections) \
            connection(s), uncertain rows: \(Self.escaped(report.onUncertain)).</p>
            \(charts.joined(separator: "\n"))
            <h2>Rules</h2><ul>\(rules)</ul>
            <pre id="drawn"></pre>
            <script>
            const drawn = [];
            for (const line of document.querySelectorAll("polyline.series")) {
              const length = line.getTotalLength();
              line.setAttribute("data-drawn", length.toFixed(1));
              drawn.push(line.dataset.series + "=" + length.toFixed(1));
            }
            document.getElementById("drawn").textContent = drawn.join(" ");
            </script>
            </body></html>

            """
    }

    private static func chart(title: String, unit: String, times: [Double], series: [LineChart.Series]) -> String {
        let end = Int(max(times.max() ?? 1, 1).rounded())
        return LineChart(
            title: title,
            unit: unit,
            times: times,
            series: series,
            axis: ("", "\(end) s"),
            dots: true
        ).svg
    }

    static func escaped(_ text: String) -> String { HTMLText.escaped(text) }
}
