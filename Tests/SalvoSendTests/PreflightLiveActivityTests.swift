import APNSWire
import Foundation
import SalvoRows
import SalvoSend
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// `salvo check --push-type liveactivity`: the payload or the templates checked as Live Activity notifications, the
/// budgeted priority a warning, and the rows whose column-filled fields break a rule named as bad rows.
@Suite(.tags(.network), .runs(.network)) struct PreflightLiveActivityTests {
    static func folder(_ files: [String: String]) throws -> URL {
        let folder = TestScratch.root.appendingPathComponent("salvo-la-check-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        for (name, text) in files { try Data(text.utf8).write(to: folder.appendingPathComponent(name)) }
        return folder
    }

    static func request(_ folder: URL, priority: NotificationPriority) -> Preflight.Request {
        var request = Preflight.Request(credentials: .providerTokenFile("/nonexistent"))
        request.topic = "com.example.app.push-type.liveactivity"
        request.pushType = .liveActivity
        request.http2 = GatewayAddress(host: "127.0.0.1", port: 9)
        request.payloadLimits = [.http2]
        request.priority = priority
        request.handshake = false
        return request
    }

    @Test func aPayloadFileIsCheckedAndTheBudgetIsAWarning() async throws {
        let now = Int64(Date().timeIntervalSince1970)
        let folder = try Self.folder([
            "update.json": #"{"aps": {"timestamp": \#(now), "event": "update", "content-state": {"s": 1}}}"#,
            "bad.json": #"{"aps": {"event": "update", "input-push-channel": "abc", "content-state": {}}}"#,
        ])
        defer { try? FileManager.default.removeItem(at: folder) }
        var request = Self.request(folder, priority: .immediate)
        request.payloadFile = folder.appendingPathComponent("update.json").path
        let results = await Preflight.run(request).filter { $0.name == "live activity" }
        #expect(results.map(\.status) == [.warning, .ok], "\(results)")
        #expect(results[0].detail.contains("aps: priority 10 is charged against the activity's hourly budget"))
        #expect(results[1].detail.contains("event update"))
        request.priority = .powerConsiderate
        #expect((await Preflight.run(request)).filter { $0.name == "live activity" }.map(\.status) == [.ok])
        request.payloadFile = folder.appendingPathComponent("bad.json").path
        let bad = await Preflight.run(request).filter { $0.name == "live activity" }
        #expect(bad.map(\.status) == [.fail, .fail], "\(bad)")
        #expect(
            bad[0].detail.hasSuffix(
                "bad.json: aps.timestamp: missing: the device keeps the update with the "
                    + #"newest timestamp; write "{{$now}}" to have the send time filled in"#
            )
        )
        #expect(bad[1].detail.contains("aps.input-push-channel: only a push-to-start (event start) takes it"))
        // Not for other push types.
        request.pushType = .alert
        request.topic = "com.example.app"
        #expect(!(await Preflight.run(request)).contains { $0.name == "live activity" })
    }

    @Test func rowsWhoseColumnsBreakARuleAreBadRows() async throws {
        let template = #"{"aps": {"timestamp": "{{$now}}", "event": "end", "dismissal-date": "{{until:int}}"}}"#
        let now = Int64(Date().timeIntervalSince1970)
        let rows = [
            "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef,\(now + 3600)",
            "1123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef,\(now + 6 * 3600)",
            "2123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef,\(now - 60)",
        ]
        let folder = try Self.folder([
            "end.json": template, "tokens.csv": "token,until\n" + rows.joined(separator: "\n") + "\n",
        ])
        defer { try? FileManager.default.removeItem(at: folder) }
        var request = Self.request(folder, priority: .powerConsiderate)
        request.payloadTemplate = folder.appendingPathComponent("end.json").path
        request.tokenFiles = [folder.appendingPathComponent("tokens.csv").path]
        let results = await Preflight.run(request)
        let live = results.filter { $0.name == "live activity" }
        #expect(live.map(\.status) == [.ok], "\(live)")
        #expect(live.first?.detail.contains("each row's column-filled fields are checked too") == true)
        let bad = try #require(results.first { $0.name == "bad rows" }, "\(results)")
        #expect(bad.detail.hasPrefix("1 bad row(s)"), "\(bad.detail)")
        #expect(bad.detail.contains("tokens.csv:3"), "\(bad.detail)")
        #expect(bad.detail.contains("aps.dismissal-date from column 'until' is 6 h"), "\(bad.detail)")
        #expect(results.first { $0.name == "tokens" }?.detail.hasPrefix("2 valid row(s) of 3") == true)
    }
}
