/// A soak as one self-contained HTML page: three inline SVG charts over the soak's time — throughput, memory and
/// errors per round — with no script or style from the network, readable in any browser and attachable anywhere.
///
/// Each series is a `polyline` of class `series` with `data-series` naming it, and a dot per round. A few lines of
/// inline script measure every drawn series once the browser has laid the page out and write the lengths into the
/// page (`#drawn`), so a headless browser's `--dump-dom` shows that the series were really drawn.
public enum SoakChart {
    struct Series {
        var name: String
        var color: String
        var values: [Double]
    }

    static let width = 760.0
    static let height = 200.0
    static let margin = (left: 64.0, right: 16.0, top: 24.0, bottom: 32.0)

    public static func html(_ report: SoakReport) -> String {
        let times = report.rounds.map { $0.startedAt + $0.seconds }
        let charts = [
            Self.chart(
                title: "Throughput (rows settled per second)",
                unit: "/s",
                times: times,
                series: [Series(name: "throughput", color: "#1f77b4", values: report.rounds.map(\.throughput))]
            ),
            Self.chart(
                title: "Memory (MiB resident)",
                unit: " MiB",
                times: times,
                series: [
                    Series(
                        name: "peak-memory",
                        color: "#d62728",
                        values: report.rounds.map { Double($0.peakResidentBytes) / 1_048_576 }
                    ),
                    Series(
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
                    Series(name: "rejected", color: "#9467bd", values: report.rounds.map { Double($0.rejected) }),
                    Series(
                        name: "uncertain",
                        color: "#8c564b",
                        values: report.rounds.map { Double($0.uncertainEvents) }
                    ),
                    Series(name: "reconnects", color: "#7f7f7f", values: report.rounds.map { Double($0.reconnects) }),
                    Series(
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
            24px}.pass{color:#2ca02c}.fail{color:#d62728}text{font:11px sans-serif;fill:#444}</style></head>
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

    private static func chart(title: String, unit: String, times: [Double], series: [Series]) -> String {
        let plotWidth = Self.width - Self.margin.left - Self.margin.right
        let plotHeight = Self.height - Self.margin.top - Self.margin.bottom
        let maxTime = max(times.max() ?? 1, 1)
        let maxValue = max(series.flatMap(\.values).max() ?? 1, 1)
        func x(_ time: Double) -> Double { Self.margin.left + plotWidth * time / maxTime }
        func y(_ value: Double) -> Double { Self.margin.top + plotHeight * (1 - value / maxValue) }
        var svg = [
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Int(Self.width))\" height=\"\(Int(Self.height))\" "
                + "role=\"img\" aria-label=\"\(Self.escaped(title))\">",
            "<text x=\"\(Self.margin.left)\" y=\"14\" style=\"font-weight:bold\">\(Self.escaped(title))</text>",
            "<line x1=\"\(Self.margin.left)\" y1=\"\(y(0))\" x2=\"\(Self.width - Self.margin.right)\" y2=\"\(y(0))\" "
                + "stroke=\"#999\"/>",
            "<line x1=\"\(Self.margin.left)\" y1=\"\(Self.margin.top)\" x2=\"\(Self.margin.left)\" y2=\"\(y(0))\" "
                + "stroke=\"#999\"/>",
            "<text x=\"4\" y=\"\(Self.margin.top + 4)\">\(Self.number(maxValue))\(unit)</text>",
            "<text x=\"4\" y=\"\(y(0))\">0</text>",
            "<text x=\"\(Self.width - Self.margin.right - 40)\" y=\"\(Self.height - 8)\">\(Int(maxTime.rounded())) s</text>",
        ]
        var legend = Self.margin.left + 8
        for line in series {
            let points = zip(times, line.values).map { "\(Self.number(x($0))),\(Self.number(y($1)))" }
            svg.append(
                "<polyline class=\"series\" data-series=\"\(line.name)\" fill=\"none\" stroke=\"\(line.color)\" "
                    + "stroke-width=\"2\" points=\"\(points.joined(separator: " "))\"/>"
            )
            for (time, value) in zip(times, line.values) {
                svg.append(
                    "<circle cx=\"\(Self.number(x(time)))\" cy=\"\(Self.number(y(value)))\" r=\"2.5\" "
                        + "fill=\"\(line.color)\"/>"
                )
            }
            svg.append(
                "<text x=\"\(Self.number(legend))\" y=\"\(Self.height - 8)\" style=\"fill:\(line.color)\">"
                    + "\(line.name)</text>"
            )
            legend += Double(line.name.count) * 7 + 16
        }
        svg.append("</svg>")
        return svg.joined(separator: "\n")
    }

    private static func number(_ value: Double) -> String {
        let rounded = (value * 10).rounded() / 10
        return rounded == rounded.rounded() ? String(Int(rounded)) : String(rounded)
    }

    static func escaped(_ text: String) -> String {
        var out = ""
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            default: out.append(character)
            }
        }
        return out
    }
}
