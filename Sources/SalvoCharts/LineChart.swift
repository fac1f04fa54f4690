/// A line chart as inline SVG, drawn from numbers alone: series over a shared time axis, the largest value and 0
/// marked on the vertical axis, a label at each end of the horizontal one, a legend. Nothing from the network, no
/// script and no `style` attribute (colours and weights are presentation attributes), so that a page under a strict
/// Content-Security-Policy shows it.
///
/// Each series is a `polyline` of class `series` with `data-series` naming it (and a dot per point when `dots`).
public struct LineChart: Sendable {
    public struct Series: Sendable {
        public var name: String
        public var color: String
        public var values: [Double]

        public init(name: String, color: String, values: [Double]) {
            self.name = name
            self.color = color
            self.values = values
        }
    }

    public var title: String
    /// After the largest value on the vertical axis (`/s`, ` MiB`).
    public var unit: String
    /// Each point's time, in any unit, rising; the axis runs from 0 to the largest (at least 1).
    public var times: [Double]
    public var series: [Series]
    /// The horizontal axis's labels, at its left and right ends.
    public var axis: (start: String, end: String)
    public var dots: Bool
    public var width = 760.0
    public var height = 200.0

    static let margin = (left: 64.0, right: 16.0, top: 24.0, bottom: 32.0)

    public init(
        title: String,
        unit: String,
        times: [Double],
        series: [Series],
        axis: (start: String, end: String),
        dots: Bool
    ) {
        self.title = title
        self.unit = unit
        self.times = times
        self.series = series
        self.axis = axis
        self.dots = dots
    }

    public var svg: String {
        let margin = Self.margin
        let plotWidth = self.width - margin.left - margin.right
        let plotHeight = self.height - margin.top - margin.bottom
        let maxTime = max(self.times.max() ?? 1, 1)
        let maxValue = max(self.series.flatMap(\.values).max() ?? 1, 1)
        func x(_ time: Double) -> Double { margin.left + plotWidth * time / maxTime }
        func y(_ value: Double) -> Double { margin.top + plotHeight * (1 - value / maxValue) }
        let title = HTMLText.escaped(self.title)
        var svg = [
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Int(self.width))\" height=\"\(Int(self.height))\" "
                + "role=\"img\" aria-label=\"\(title)\" font-family=\"sans-serif\" font-size=\"11\" fill=\"#444\">",
            "<text x=\"\(margin.left)\" y=\"14\" font-weight=\"bold\">\(title)</text>",
            "<line x1=\"\(margin.left)\" y1=\"\(y(0))\" x2=\"\(self.width - margin.right)\" y2=\"\(y(0))\" "
                + "stroke=\"#999\"/>",
            "<line x1=\"\(margin.left)\" y1=\"\(margin.top)\" x2=\"\(margin.left)\" y2=\"\(y(0))\" stroke=\"#999\"/>",
            "<text x=\"4\" y=\"\(margin.top + 4)\">\(Self.number(maxValue))\(HTMLText.escaped(self.unit))</text>",
            "<text x=\"4\" y=\"\(y(0))\">0</text>",
            "<text x=\"\(margin.left)\" y=\"\(self.height - 8)\">\(HTMLText.escaped(self.axis.start))</text>",
            "<text x=\"\(self.width - margin.right)\" y=\"\(self.height - 8)\" text-anchor=\"end\">"
                + "\(HTMLText.escaped(self.axis.end))</text>",
        ]
        var legend = margin.left + 8 + Double(self.axis.start.count) * 7 + 16
        for line in self.series {
            let name = HTMLText.escaped(line.name)
            let color = HTMLText.escaped(line.color)
            let points = zip(self.times, line.values).map { "\(Self.number(x($0))),\(Self.number(y($1)))" }
            svg.append(
                "<polyline class=\"series\" data-series=\"\(name)\" fill=\"none\" stroke=\"\(color)\" "
                    + "stroke-width=\"2\" points=\"\(points.joined(separator: " "))\"/>"
            )
            if self.dots {
                for (time, value) in zip(self.times, line.values) {
                    svg.append(
                        "<circle cx=\"\(Self.number(x(time)))\" cy=\"\(Self.number(y(value)))\" r=\"2.5\" "
                            + "fill=\"\(color)\"/>"
                    )
                }
            }
            svg.append("<text x=\"\(Self.number(legend))\" y=\"\(self.height - 8)\" fill=\"\(color)\">\(name)</text>")
            legend += Double(line.name.count) * 7 + 16
        }
        svg.append("</svg>")
        return svg.joined(separator: "\n")
    }

    /// A chart without axes or text, a line across `width` × `height` (for a table's cell): `values` evenly
    /// spaced, 0 at the bottom and the largest (at least 1) at the top.
    public static func sparkline(
        _ values: [Double],
        name: String,
        color: String,
        width: Double,
        height: Double
    )
        -> String
    {
        let maxValue = max(values.max() ?? 1, 1)
        let step = values.count > 1 ? width / Double(values.count - 1) : 0
        let points = values.enumerated().map { index, value in
            "\(Self.number(Double(index) * step)),\(Self.number(1 + (height - 2) * (1 - value / maxValue)))"
        }
        return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Int(width))\" height=\"\(Int(height))\" "
            + "role=\"img\" aria-label=\"\(HTMLText.escaped(name))\"><polyline class=\"series\" "
            + "data-series=\"\(HTMLText.escaped(name))\" fill=\"none\" stroke=\"\(HTMLText.escaped(color))\" "
            + "stroke-width=\"1.5\" points=\"\(points.joined(separator: " "))\"/></svg>"
    }

    /// A number as the chart writes it: to one decimal, without a trailing `.0`.
    static func number(_ value: Double) -> String {
        let rounded = (value * 10).rounded() / 10
        return rounded == rounded.rounded() ? String(Int(rounded)) : String(rounded)
    }
}
