import APNSWire
import SalvoCharts
import SalvoService

/// What the console's overview shows, gathered by its route: the service's transactional traffic, its campaigns and
/// webhooks as the API answers them (their JSON: one source for the page and `GET /v1/campaigns`, `/v1/webhooks`).
struct ConsoleOverview {
    var now: Int64
    var depth: Int
    var activity: ServiceActivity
    /// Each campaign as `GET /v1/campaigns` answers it, with the rows its jobs settled per second lately.
    var campaigns: [(campaign: JSONValue, perSecond: [Int])]
    /// Each webhook as `GET /v1/webhooks` answers it.
    var webhooks: [JSONValue]
}

/// The console's pages as HTML, from values alone: every text from outside (a campaign's name, a reason, a webhook's
/// URL) escaped, no script, one stylesheet of the console's own (`/console/console.css`), charts as inline SVG.
/// Numbers are shown grouped by thousands, and carried as written by the API in `data-value`.
enum ConsolePages {
    /// Seconds between a page's reloads (`<meta http-equiv="refresh">`).
    static let refreshSeconds = 5
    /// The overview's charts: the last 10 minutes, per second.
    static let overviewSeconds = 600

    static func login(message: String?) -> String {
        let note = message.map { "<p class=\"error\" id=\"message\">\(HTMLText.escaped($0))</p>" } ?? ""
        return Self.page(
            title: "Sign in",
            refresh: false,
            signedIn: false,
            body: """
                <h2>Sign in</h2>
                \(note)
                <form method="post" action="/console/login" class="login">
                <label for="key">API key</label>
                <input id="key" name="key" type="password" autocomplete="off" required>
                <button type="submit">Sign in</button>
                </form>
                <p class="quiet">The console shows the service's queue, its transactional traffic and its campaigns. \
                It takes the API keys of <code>salvo serve keys create</code>; a session lasts 8 hours.</p>
                """
        )
    }

    /// A form sent from another site's page (`ConsoleOrigin`).
    static func refused(_ why: String) -> String {
        Self.page(
            title: "Refused",
            refresh: false,
            signedIn: false,
            body: "<h2>Refused</h2><p>\(HTMLText.escaped(why))</p><p><a href=\"/console/login\">Sign in</a></p>"
        )
    }

    static func notFound(_ what: String) -> String {
        Self.page(
            title: "Not found",
            refresh: false,
            signedIn: true,
            body: "<h2>Not found</h2><p>\(HTMLText.escaped(what))</p><p><a href=\"/\">The overview</a></p>"
        )
    }

    // MARK: Overview

    static func overview(_ overview: ConsoleOverview) -> String {
        let activity = overview.activity
        let now = overview.now
        let minute = 60
        let delivered = activity.finals[.delivered] ?? 0
        let refused = activity.finals[.refused] ?? 0
        let stats = [
            Self.stat("queue-depth", "Queue depth", overview.depth, note: "accepted, not yet final"),
            Self.stat(
                "accepted",
                "Accepted",
                activity.accepted,
                note: Self.rate(activity.acceptedPerSecond.rate(last: minute, before: now))
            ),
            Self.stat(
                "delivered",
                "Delivered",
                delivered,
                note: Self.rate(activity.deliveredPerSecond.rate(last: minute, before: now))
            ),
            Self.stat(
                "refused",
                "Refused",
                refused,
                note: Self.rate(activity.refusedPerSecond.rate(last: minute, before: now))
            ),
            Self.stat("refused-when-posted", "Refused when posted", activity.refusedWhenPosted, note: "bad input"),
            Self.stat("expired", "Expired", activity.finals[.expired] ?? 0, note: nil),
            Self.stat("uncertain", "Uncertain", activity.finals[.uncertain] ?? 0, note: nil),
            Self.latencyStat("latency-p50", "Latency p50", activity.latency(quantile: 0.5), activity.latencySamples),
            Self.latencyStat("latency-p99", "Latency p99", activity.latency(quantile: 0.99), activity.latencySamples),
        ]
        let span = Self.overviewSeconds
        let chart = LineChart(
            title: "Transactional notifications per second, last \(span / 60) minutes",
            unit: "/s",
            times: (0..<span).map(Double.init),
            series: [
                LineChart.Series(
                    name: "accepted",
                    color: "#1f77b4",
                    values: activity.acceptedPerSecond.perSecond(last: span, before: now).map(Double.init)
                ),
                LineChart.Series(
                    name: "delivered",
                    color: "#2ca02c",
                    values: activity.deliveredPerSecond.perSecond(last: span, before: now).map(Double.init)
                ),
                LineChart.Series(
                    name: "refused",
                    color: "#d62728",
                    values: activity.refusedPerSecond.perSecond(last: span, before: now).map(Double.init)
                ),
            ],
            axis: ("−\(span / 60) min", "now"),
            dots: false
        ).svg
        let refusals = activity.latestRefusals.prefix(20).map { refusal in
            """
            <tr data-reason="\(HTMLText.escaped(refusal.reason))"><td>\(HTMLText.escaped(refusal.reason))</td>\
            <td class="number">\(refusal.status.map(String.init) ?? "")</td>\
            <td class="number" data-value="\(refusal.count)">\(Self.grouped(refusal.count))</td>\
            <td>\(ServiceJSON.time(refusal.lastAt))</td></tr>
            """
        }
        let refusalTable =
            refusals.isEmpty
            ? "<p class=\"quiet\" id=\"no-refusals\">No notification refused since the service started.</p>"
            : """
            <table id="refusals"><thead><tr><th>Reason</th><th>Status</th><th>Count</th><th>Last</th></tr></thead>
            <tbody>\(refusals.joined(separator: "\n"))</tbody></table>
            """
        return Self.page(
            title: "Overview",
            refresh: true,
            signedIn: true,
            body: """
                <h2>Transactional</h2>
                <dl class="stats">\(stats.joined())</dl>
                <div class="chart" id="transactional-chart">\(chart)</div>
                <h2>Last refusals by reason</h2>
                \(refusalTable)
                <h2>Campaigns</h2>
                \(Self.campaignTable(overview.campaigns))
                <h2>Webhooks</h2>
                \(Self.webhookTable(overview.webhooks))
                <p class="quiet">At \(ServiceJSON.time(now)); rates over the last minute; latencies from acceptance \
                to APNs' answer over the last \(Self.grouped(activity.latencySamples)) deliveries. The page reloads \
                every \(Self.refreshSeconds) seconds.</p>
                """
        )
    }

    private static func campaignTable(_ campaigns: [(campaign: JSONValue, perSecond: [Int])]) -> String {
        guard !campaigns.isEmpty else { return "<p class=\"quiet\" id=\"no-campaigns\">No campaign yet.</p>" }
        let rows = campaigns.reversed().map { campaign, perSecond -> String in
            let id = campaign["id"]?.text ?? ""
            let progress = Self.progress(campaign)
            let sparkline = LineChart.sparkline(
                perSecond.map(Double.init),
                name: "rate",
                color: "#1f77b4",
                width: 160,
                height: 28
            )
            return """
                <tr data-campaign="\(HTMLText.escaped(id))">\
                <td><a href="/console/campaigns/\(HTMLText.escaped(id))">\(Self.campaignName(campaign))</a></td>\
                <td class="state" data-value="\(HTMLText.escaped(campaign["state"]?.text ?? ""))">\
                \(HTMLText.escaped(campaign["state"]?.text ?? ""))</td>\
                <td>\(progress)</td>\
                \(Self.countCell(campaign, "delivered"))\(Self.countCell(campaign, "rejected"))\
                \(Self.countCell(campaign, "not_sent"))\
                <td class="number rate" data-value="\(campaign["rate"]?.text ?? "")">\
                \(campaign["rate"].map { Self.rate($0.number ?? 0) } ?? "")</td>\
                <td>\(sparkline)</td>\
                <td class="estimated-end">\(HTMLText.escaped(campaign["estimated_end"]?.text ?? ""))</td></tr>
                """
        }
        return """
            <table id="campaigns"><thead><tr><th>Campaign</th><th>State</th><th>Progress</th><th>Delivered</th>\
            <th>Refused</th><th>Not sent</th><th>Rate</th><th>Last 5 minutes</th><th>Estimated end</th></tr></thead>
            <tbody>\(rows.joined(separator: "\n"))</tbody></table>
            """
    }

    private static func webhookTable(_ webhooks: [JSONValue]) -> String {
        guard !webhooks.isEmpty else { return "<p class=\"quiet\" id=\"no-webhooks\">No webhook.</p>" }
        let rows = webhooks.map { webhook -> String in
            let counts = webhook["counts"]
            return """
                <tr><td>\(HTMLText.escaped(webhook["webhook"]?.text ?? ""))</td>\
                <td class="number">\(Self.grouped(counts?["pending"]?.number.map(Int.init) ?? 0))</td>\
                <td class="number">\(Self.grouped(counts?["delivered"]?.number.map(Int.init) ?? 0))</td>\
                <td class="number">\(Self.grouped(counts?["dead"]?.number.map(Int.init) ?? 0))</td>\
                <td class="number">\(Self.grouped(webhook["failures"]?.number.map(Int.init) ?? 0))</td>\
                <td>\(HTMLText.escaped(webhook["last_error"]?.text ?? ""))</td>\
                <td>\(HTMLText.escaped(webhook["next_attempt_at"]?.text ?? ""))</td></tr>
                """
        }
        return """
            <table id="webhooks"><thead><tr><th>Webhook</th><th>Pending</th><th>Delivered</th><th>Dead</th>\
            <th>Failures</th><th>Last error</th><th>Next attempt</th></tr></thead>
            <tbody>\(rows.joined(separator: "\n"))</tbody></table>
            """
    }

    // MARK: Campaign

    /// A campaign's page: its state, times, progress, counts (as `GET /v1/campaigns/{id}` answers them) and the
    /// rows settled per second over the last hour (`perSecond`, oldest first).
    static func campaign(_ campaign: JSONValue, perSecond: [Int], now: Int64) -> String {
        let id = campaign["id"]?.text ?? ""
        var times: [(String, String, String?)] = [
            ("state", "State", campaign["state"]?.text), ("created_at", "Created", campaign["created_at"]?.text),
            ("created_by", "By key", campaign["created_by"]?.text), ("send_at", "Send at", campaign["send_at"]?.text),
            ("started_at", "Started", campaign["started_at"]?.text), ("ended_at", "Ended", campaign["ended_at"]?.text),
            ("estimated_end", "Estimated end", campaign["estimated_end"]?.text),
        ]
        times.append(("rate_limit", "Rate limit", campaign["rate_limit"].map { Self.rate($0.number ?? 0) }))
        times.append(("rate", "Rate", campaign["rate"].map { Self.rate($0.number ?? 0) }))
        times.append(("message", "Message", campaign["message"]?.text))
        let facts = times.compactMap { key, label, value -> String? in
            value.map { "<dt>\(label)</dt><dd id=\"\(key)\">\(HTMLText.escaped($0))</dd>" }
        }
        let countNames: [(String, String)] = [
            ("input_rows", "Input rows"), ("invalid_input", "Invalid input"), ("valid_rows", "Valid rows"),
            ("delivered", "Delivered"), ("confirmed", "Confirmed"), ("presumed", "Presumed"),
            ("rejected", "Refused"), ("expired", "Expired"), ("uncertain", "Uncertain"), ("not_sent", "Not sent"),
            ("suppressed", "Suppressed"),
        ]
        let counts = countNames.map { key, label in
            "<tr><th>\(label)</th>\(Self.countCell(campaign, key))</tr>"
        }
        var reasons: [String] = []
        if case .object(let members)? = campaign["counts"]?["rejected_by_reason"] {
            for member in members {
                let count = member.value.number.map(Int.init) ?? 0
                reasons.append(
                    "<tr data-reason=\"\(HTMLText.escaped(member.key))\"><td>\(HTMLText.escaped(member.key))</td>"
                        + "<td class=\"number\" data-value=\"\(count)\">\(Self.grouped(count))</td></tr>"
                )
            }
        }
        let reasonTable =
            reasons.isEmpty
            ? "<p class=\"quiet\">No row refused.</p>"
            : "<table id=\"reasons\"><thead><tr><th>Reason</th><th>Rows</th></tr></thead><tbody>"
                + reasons.joined() + "</tbody></table>"
        let points = Self.chartPoints(perSecond)
        let minutes = max(1, (points.seconds + 59) / 60)
        let chart = LineChart(
            title: "Rows settled per second",
            unit: "/s",
            times: points.values.indices.map { Double($0 * points.bucket) },
            series: [LineChart.Series(name: "settled", color: "#1f77b4", values: points.values)],
            axis: ("−\(minutes) min", "now"),
            dots: false
        ).svg
        return Self.page(
            title: "Campaign \(campaign["name"]?.text ?? id)",
            refresh: true,
            signedIn: true,
            body: """
                <p><a href="/">← Overview</a></p>
                <h2 id="campaign" data-campaign="\(HTMLText.escaped(id))">\(Self.campaignName(campaign))</h2>
                <p class="quiet">\(HTMLText.escaped(id))</p>
                \(Self.progress(campaign))
                <dl class="facts">\(facts.joined())</dl>
                <div class="chart" id="campaign-chart">\(chart)</div>
                <div class="columns"><div><h3>Counts</h3><table id="counts">\(counts.joined())</table></div>
                <div><h3>Refused by reason</h3>\(reasonTable)</div></div>
                <p class="quiet">At \(ServiceJSON.time(now)); the counts as <code>GET /v1/campaigns/\
                \(HTMLText.escaped(id))</code> answers them. The page reloads every \(Self.refreshSeconds) \
                seconds.</p>
                """
        )
    }

    /// Per-second counts as a chart's points: from the first second with a count (at least the last minute), in
    /// buckets of whole seconds so that there are at most 360 points, each the bucket's average per second.
    static func chartPoints(_ perSecond: [Int]) -> (values: [Double], bucket: Int, seconds: Int) {
        let first = perSecond.firstIndex { $0 > 0 } ?? perSecond.count
        let counts = Array(perSecond[min(first, max(0, perSecond.count - 60))...])
        let bucket = max(1, (counts.count + 359) / 360)
        var values: [Double] = []
        var start = 0
        while start < counts.count {
            let slice = counts[start..<min(start + bucket, counts.count)]
            values.append(Double(slice.reduce(0, +)) / Double(slice.count))
            start += bucket
        }
        return (values, bucket, counts.count)
    }

    // MARK: Pieces

    private static func page(title: String, refresh: Bool, signedIn: Bool, body: String) -> String {
        let reload = refresh ? "<meta http-equiv=\"refresh\" content=\"\(Self.refreshSeconds)\">" : ""
        let signOut =
            signedIn
            ? "<form method=\"post\" action=\"/console/logout\"><button type=\"submit\">Sign out</button></form>" : ""
        return """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8">\(reload)
            <title>salvo · \(HTMLText.escaped(title))</title>
            <link rel="stylesheet" href="/console/console.css"></head>
            <body><header><h1><a href="/">salvo</a></h1>\(signOut)</header>
            <main>
            \(body)
            </main></body></html>

            """
    }

    private static func stat(_ id: String, _ label: String, _ value: Int, note: String?) -> String {
        "<div><dt>\(label)</dt><dd id=\"\(id)\" data-value=\"\(value)\">\(Self.grouped(value))</dd>"
            + (note.map { "<dd class=\"note\">\(HTMLText.escaped($0))</dd>" } ?? "") + "</div>"
    }

    private static func latencyStat(_ id: String, _ label: String, _ milliseconds: Int64?, _ samples: Int) -> String {
        let shown = milliseconds.map { "\(Self.grouped(Int($0))) ms" } ?? "–"
        return "<div><dt>\(label)</dt><dd id=\"\(id)\" data-value=\"\(milliseconds.map(String.init) ?? "")\">"
            + "\(shown)</dd><dd class=\"note\">\(Self.grouped(samples)) deliveries</dd></div>"
    }

    private static func countCell(_ campaign: JSONValue, _ key: String) -> String {
        let value = campaign["counts"]?[key]?.number.map(Int.init) ?? 0
        return "<td class=\"number \(key)\" data-value=\"\(value)\">\(Self.grouped(value))</td>"
    }

    private static func campaignName(_ campaign: JSONValue) -> String {
        if let name = campaign["name"]?.text, !name.isEmpty { return HTMLText.escaped(name) }
        return "<span class=\"quiet\">unnamed</span>"
    }

    /// Rows settled of the valid rows: a bar and its percentage.
    private static func progress(_ campaign: JSONValue) -> String {
        let count = { (key: String) in campaign["counts"]?[key]?.number.map(Int.init) ?? 0 }
        let settled = count("delivered") + count("rejected") + count("expired") + count("uncertain")
        let valid = count("valid_rows")
        let percent = valid > 0 ? Double(settled) * 100 / Double(valid) : 0
        return "<div class=\"progress\" data-settled=\"\(settled)\" data-valid=\"\(valid)\">"
            + "<progress value=\"\(settled)\" max=\"\(max(valid, 1))\"></progress> "
            + "<span>\(String(format1: percent)) % · \(Self.grouped(settled)) of \(Self.grouped(valid))</span></div>"
    }

    private static func rate(_ perSecond: Double) -> String {
        "\(String(format1: perSecond))/s"
    }

    /// `1234567` as `1,234,567`.
    static func grouped(_ value: Int) -> String {
        let digits = String(value.magnitude)
        var out = ""
        for (index, digit) in digits.enumerated() {
            if index > 0, (digits.count - index) % 3 == 0 { out.append(",") }
            out.append(digit)
        }
        return (value < 0 ? "-" : "") + out
    }

    static let stylesheet = """
        body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#222;background:#fafafa}
        header{display:flex;justify-content:space-between;align-items:center;padding:8px 24px;background:#1f2933}
        header h1{font-size:18px;margin:0}header h1 a{color:#fff;text-decoration:none}
        header button{background:none;border:1px solid #9aa5b1;color:#fff;border-radius:4px;padding:3px 10px}
        main{padding:8px 24px 24px;max-width:1240px}h2{font-size:16px;margin:20px 0 8px}h3{font-size:14px}
        .stats{display:flex;flex-wrap:wrap;gap:8px;margin:0}.stats div{background:#fff;border:1px solid #e4e7eb;
        border-radius:6px;padding:6px 12px;min-width:110px}.stats dt{color:#616e7c;font-size:12px}
        .stats dd{margin:0;font-size:20px;font-variant-numeric:tabular-nums}.stats dd.note{font-size:12px;color:#7b8794}
        table{border-collapse:collapse;background:#fff;border:1px solid #e4e7eb}
        th,td{padding:4px 10px;border-bottom:1px solid #e4e7eb;text-align:left;vertical-align:middle;
        white-space:nowrap}
        th{font-size:12px;color:#616e7c;font-weight:600}.number{text-align:right;font-variant-numeric:tabular-nums}
        progress{width:120px;height:12px;vertical-align:middle}#campaigns td:first-child{white-space:normal}.progress span{font-size:12px;color:#52606d}
        .chart{background:#fff;border:1px solid #e4e7eb;display:inline-block;margin-top:8px}
        .quiet{color:#7b8794}.error{color:#c81e1e}.facts{display:grid;grid-template-columns:max-content auto;
        gap:2px 16px}.facts dt{color:#616e7c}.facts dd{margin:0}.columns{display:flex;gap:32px}
        .login{display:flex;gap:8px;align-items:center}.login input{width:420px;padding:4px}
        td.state[data-value=running]{color:#1f77b4}td.state[data-value=failed]{color:#c81e1e}
        """
}

extension JSONValue {
    /// A string's text, or a number's literal.
    fileprivate var text: String? {
        switch self {
        case .string(let text): text
        case .number(let literal): literal
        default: nil
        }
    }

    fileprivate var number: Double? {
        if case .number(let literal) = self { Double(literal) } else { nil }
    }
}

extension String {
    /// One decimal, without a trailing `.0`: `12`, `12.5`.
    fileprivate init(format1 value: Double) {
        let rounded = (value * 10).rounded() / 10
        self = rounded == rounded.rounded() ? String(Int(rounded)) : String(rounded)
    }
}
