import APNSWire
import SalvoCharts
import SalvoTestTraits
import Testing

@testable import SalvoServer
@testable import SalvoService

/// The console's values, with the time given: the rings its charts are drawn from, the transactional activity, its
/// sign-ins, and its pages as text (escaped, numbers as the API writes them).
@Suite(.tags(.pure), .runs(.pure)) struct ConsoleValuesTests {
    @Test func aRateRingCountsPerSecondAndForgetsWhatItsSpanLeft() {
        var ring = RateRing(capacity: 10)
        ring.add(3, at: 100_000)
        ring.add(2, at: 100_999)
        ring.add(5, at: 102_500)
        // The 4 whole seconds before 103.2 s: 99, 100, 101, 102.
        #expect(ring.perSecond(last: 4, before: 103_200) == [0, 5, 0, 5])
        #expect(ring.rate(last: 4, before: 103_200) == 2.5)
        #expect(ring.latest == 102)
        // Ten seconds on, second 100's slot holds second 110: 100 reads 0, never 110's count.
        ring.add(7, at: 110_000)
        #expect(ring.perSecond(last: 10, before: 111_000) == [0, 5, 0, 0, 0, 0, 0, 0, 0, 7])
        // A count older than the ring's span is dropped; the span asked is capped at the capacity.
        ring.add(9, at: 100_000)
        #expect(ring.perSecond(last: 50, before: 111_000).count == 10)
        #expect(!ring.perSecond(last: 50, before: 111_000).contains(9))
        #expect(RateRing().perSecond(last: 3, before: 5000) == [0, 0, 0])
        #expect(RateRing.second(-1) == -1 && RateRing.second(999) == 0)
    }

    @Test func theActivityCountsOutcomesRefusalsByReasonAndLatencies() {
        var activity = ServiceActivity()
        activity.accept(10, at: 1000)
        activity.refuseWhenPosted(2)
        for latency in 1...100 { activity.settle(.delivered, latency: Int64(latency), at: 2000) }
        activity.settle(.refused, status: 400, reason: "BadDeviceToken", at: 2000)
        activity.settle(.refused, status: 410, reason: "Unregistered", at: 3000)
        activity.settle(.refused, status: 410, reason: "Unregistered", at: 2500)
        activity.settle(.expired, at: 3000)
        activity.settle(.sending, at: 3000)
        #expect(activity.accepted == 10 && activity.refusedWhenPosted == 2)
        #expect(activity.finals == [.delivered: 100, .refused: 3, .expired: 1])
        #expect(activity.latency(quantile: 0.5) == 50 && activity.latency(quantile: 0.99) == 99)
        #expect(activity.latencySamples == 100)
        #expect(activity.latestRefusals.map(\.reason) == ["Unregistered", "BadDeviceToken"])
        #expect(activity.latestRefusals.first?.count == 2 && activity.latestRefusals.first?.lastAt == 3000)
        #expect(activity.deliveredPerSecond.perSecond(last: 1, before: 3000) == [100])
        #expect(ServiceActivity().latency(quantile: 0.5) == nil)
        // The latencies are the last window's.
        var window = ServiceActivity()
        for _ in 0..<ServiceActivity.latencyWindow { window.settle(.delivered, latency: 1000, at: 0) }
        for _ in 0..<ServiceActivity.latencyWindow { window.settle(.delivered, latency: 5, at: 0) }
        #expect(window.latency(quantile: 0.99) == 5 && window.latencySamples == ServiceActivity.latencyWindow)
    }

    @Test func aSessionLastsItsLifetimeAndAnEntryIsTakenOnce() {
        var sessions = ConsoleSessions()
        _ = sessions.open("cookie-1", keyID: "key_a", now: 0)
        #expect(sessions.keyID(session: "cookie-1", now: ConsoleSessions.lifetime - 1) == "key_a")
        #expect(sessions.keyID(session: "cookie-1", now: ConsoleSessions.lifetime) == nil)
        #expect(sessions.keyID(session: "cookie-1", now: 0) == nil, "an ended session stays ended")
        #expect(sessions.keyID(session: "never", now: 0) == nil)

        _ = sessions.addEntry("link-1", keyID: "key_a", now: 0)
        #expect(sessions.takeEntry("link-1", now: ConsoleSessions.entryLifetime - 1) == "key_a")
        #expect(sessions.takeEntry("link-1", now: 0) == nil, "once")
        _ = sessions.addEntry("link-2", keyID: "key_a", now: 0)
        #expect(sessions.takeEntry("link-2", now: ConsoleSessions.entryLifetime) == nil, "expired")

        // A revoked key's sessions and links end; another key's stay; signing out ends one.
        _ = sessions.open("cookie-a", keyID: "key_a", now: 0)
        _ = sessions.open("cookie-b", keyID: "key_b", now: 0)
        _ = sessions.addEntry("link-a", keyID: "key_a", now: 0)
        sessions.end(keyID: "key_a")
        #expect(sessions.keyID(session: "cookie-a", now: 1) == nil)
        #expect(sessions.takeEntry("link-a", now: 1) == nil)
        #expect(sessions.keyID(session: "cookie-b", now: 1) == "key_b")
        sessions.close("cookie-b")
        #expect(sessions.keyID(session: "cookie-b", now: 1) == nil)
        // Only the tokens' hashes are kept.
        _ = sessions.open("cookie-c", keyID: "key_c", now: 0)
        #expect(sessions.sessions.keys.contains(APIKeys.hash("cookie-c")))
    }

    @Test func theSessionsAreBoundedAndTheSoonestToEndMakesRoom() {
        var sessions = ConsoleSessions()
        for index in 0..<ConsoleSessions.maximum { _ = sessions.open("t\(index)", keyID: "k", now: Int64(index)) }
        _ = sessions.open("new", keyID: "k", now: Int64(ConsoleSessions.maximum))
        #expect(sessions.sessions.count == ConsoleSessions.maximum)
        #expect(sessions.keyID(session: "t0", now: Int64(ConsoleSessions.maximum)) == nil)
        #expect(sessions.keyID(session: "t1", now: Int64(ConsoleSessions.maximum)) == "k")
        #expect(sessions.keyID(session: "new", now: Int64(ConsoleSessions.maximum)) == "k")
    }

    @Test func aCampaignsNameIsShownAsTextAndItsCountsAsTheAPIWritesThem() {
        let campaign = JSONValue.object([
            JSONMember("id", .string("4b0c3c52-5f1e-4d8e-9a57-0c7f3e1d2a10")),
            JSONMember("state", .string("running")),
            JSONMember("name", .string("<script>alert(\"x\")</script> & 'friends'")),
            JSONMember("rate", .number("498")),
            JSONMember(
                "counts",
                .object([
                    JSONMember("valid_rows", .int(1_000_000)), JSONMember("delivered", .int(41200)),
                    JSONMember("rejected", .int(12)),
                    JSONMember("rejected_by_reason", .object([JSONMember("<b>Odd</b>", .int(12))])),
                ])
            ),
        ])
        let page = ConsolePages.campaign(campaign, perSecond: [0, 0, 3, 4], now: 0)
        #expect(!page.contains("<script"), "no script at all, the name's included")
        #expect(page.contains("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;friends&#39;"))
        #expect(page.contains("&lt;b&gt;Odd&lt;/b&gt;") && !page.contains("<b>"))
        #expect(page.contains("class=\"number delivered\" data-value=\"41200\">41,200<"))
        #expect(page.contains("data-settled=\"41212\" data-valid=\"1000000\""))
        #expect(page.contains("<meta http-equiv=\"refresh\""))
        #expect(page.contains("data-series=\"settled\""))

        var activity = ServiceActivity()
        activity.settle(.refused, status: 400, reason: "<img src=x>", at: 0)
        let overview = ConsolePages.overview(
            ConsoleOverview(now: 1000, depth: 1234, activity: activity, campaigns: [(campaign, [1, 2])], webhooks: [])
        )
        #expect(!overview.contains("<script") && !overview.contains("<img"))
        #expect(overview.contains("id=\"queue-depth\" data-value=\"1234\">1,234<"))
        #expect(overview.contains("data-reason=\"&lt;img src=x&gt;\""))
        #expect(overview.contains("href=\"/console/campaigns/4b0c3c52-5f1e-4d8e-9a57-0c7f3e1d2a10\""))
        #expect(!ConsolePages.login(message: "<i>no</i>").contains("<i>"))
    }

    @Test func aChartsPointsStartAtTheFirstCountAndAreAtMost360() {
        let hour = Array(repeating: 0, count: 3000) + Array(repeating: 10, count: 600)
        let points = ConsolePages.chartPoints(hour)
        #expect(points.seconds == 600 && points.bucket == 2 && points.values.count == 300)
        #expect(points.values.allSatisfy { $0 == 10 })
        let busy = ConsolePages.chartPoints(Array(repeating: 4, count: 3600))
        #expect(busy.bucket == 10 && busy.values.count == 360)
        let quiet = ConsolePages.chartPoints(Array(repeating: 0, count: 3600))
        #expect(quiet.seconds == 60 && quiet.values.count == 60)
        #expect(ConsolePages.grouped(1_234_567) == "1,234,567" && ConsolePages.grouped(12) == "12")
        #expect(ConsolePages.grouped(-1000) == "-1,000")
    }

    @Test func aChartDrawsEachSeriesWithoutScriptOrStyleAttributes() {
        let chart = LineChart(
            title: "A <title>",
            unit: "/s",
            times: [0, 1, 2],
            series: [LineChart.Series(name: "rate", color: "#123456", values: [1, 4, 2])],
            axis: ("−3 s", "now"),
            dots: false
        ).svg
        #expect(chart.contains("points=\"64,132 404,24 744,96\""), "\(chart)")
        #expect(chart.contains("A &lt;title&gt;") && !chart.contains("style="))
        #expect(!chart.contains("<circle"))
        let sparkline = LineChart.sparkline([0, 2], name: "r", color: "#000", width: 100, height: 20)
        #expect(sparkline.contains("points=\"0,19 100,1\""), "\(sparkline)")
    }
}

/// The console's forms refuse what a page of another site made a browser send, by `Sec-Fetch-Site`, else `Origin`;
/// a request with neither (not a browser's form) and every GET go on.
@Suite(.tags(.pure)) struct ConsoleOriginTests {
    @Test(
        arguments: [
            ("POST", "same-origin", nil, "127.0.0.1:8080", true),
            ("POST", "none", nil, "127.0.0.1:8080", true),
            ("POST", "cross-site", "https://127.0.0.1:8080", "127.0.0.1:8080", false),
            ("POST", "same-site", "https://a.example.com", "b.example.com", false),
            ("POST", nil, "https://evil.example", "127.0.0.1:8080", false),
            ("POST", nil, "null", "127.0.0.1:8080", false),
            ("POST", nil, "http://127.0.0.1:8080", "127.0.0.1:8080", true),
            ("POST", nil, "HTTPS://Console.Example", "console.example", true),
            ("POST", nil, "http://127.0.0.1:8081", "127.0.0.1:8080", false),
            ("POST", nil, "http://127.0.0.1:8080", nil, false),
            ("POST", nil, nil, "127.0.0.1:8080", true),
            ("GET", "cross-site", "https://evil.example", "127.0.0.1:8080", true),
        ] as [(String, String?, String?, String?, Bool)]
    )
    func aFormIsTakenOnlyFromTheConsolesOwnPages(
        method: String,
        fetchSite: String?,
        origin: String?,
        host: String?,
        allowed: Bool
    ) {
        let request = ConsoleOrigin(method: method, fetchSite: fetchSite, origin: origin, host: host)
        #expect(request.allowed == allowed)
    }
}
