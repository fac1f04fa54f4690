import APNSWire
import Foundation
import SalvoDevelopment
import SalvoRows
import SalvoSimulator
import SalvoTestSupport
import Testing

#if canImport(Glibc)
import SalvoTestTraits
#endif

/// Live Activity updates end to end: `salvo payload liveactivity` writes the template, `salvo send --push-type
/// liveactivity` fills each row's content state and the send time and sends it over TLS to the simulator, which
/// receives exactly the payload each row renders to; a template APNs would not deliver, and a row whose event the
/// template cannot carry, are refused before they reach it.
@Suite(.tags(.process), .runs(.process), .serialized, .timeLimit(.minutes(1)))
struct LiveActivitySendTests {
    typealias Sends = ProviderTokenFileSendTests

    static let topic = CertificateFactory.sharedTopic + ".push-type.liveactivity"

    static func send(_ setup: Sends.Setup, template: String, tokens: String, extra: [String] = []) -> [String] {
        [
            "send", tokens, "--protocol", "h2", "--payload-template", template, "--push-type", "liveactivity",
            "--gateway", "127.0.0.1:\(setup.simulator.http2Port!)", "--ca", CertificateFactory.sharedFolder.ca,
            "--server-name", "localhost", "--topic", Self.topic, "--auth-key", setup.signingKey.path,
            "--key-id", DevelopmentSigningKey.keyID, "--team-id", DevelopmentSigningKey.teamID, "--connections", "1",
            "--report", "report.json", "--rejects", "rejects.csv",
        ] + extra
    }

    @Test func aWrittenTemplateSendsEachRowsStateWithTheSendTime() async throws {
        let setup = try await Sends.start(count: 20)
        defer { setup.remove() }
        let written = try await Sends.salvo(
            [
                "payload", "liveactivity", "--event", "update",
                "--content-state", #"{"home": "{{home}}", "score": "{{score:int}}"}"#,
                "--stale-in", "15m", "--relevance-score", "50", "--priority", "5", "--output", "score.json",
            ],
            in: setup.folder
        )
        #expect(written.status == 0, "\(written.standardError)")
        let text = try String(contentsOfFile: setup.folder + "/score.json", encoding: .utf8)
        #expect(text.contains(#""timestamp": "{{$now}}""#) && text.contains(#""stale-date": "{{$now+900}}""#))
        #expect(text.contains(#""content-state": {"#) && text.contains(#""score": "{{score:int}}""#))
        // Each game's row: its token, team and score.
        let rows = setup.tokens.enumerated().map { "\($0.element.hexString),Team \($0.offset),\($0.offset * 3)" }
        try ("token,home,score\n" + rows.joined(separator: "\n") + "\n")
            .write(toFile: setup.folder + "/games.csv", atomically: true, encoding: .utf8)
        let before = Int64(Date().timeIntervalSince1970)
        let sent = try await Sends.salvo(
            Self.send(setup, template: "score.json", tokens: "games.csv", extra: ["--priority", "5", "--quiet"]),
            in: setup.folder
        )
        let after = Int64(Date().timeIntervalSince1970)
        #expect(sent.status == 0, "\(sent.standardError)")
        // The simulator got, per token, the row's rendering at a send time between the two clock readings.
        for (index, token) in setup.tokens.enumerated() {
            guard let record = setup.simulator.ledger.record(for: Array(token.bytes)) else {
                Issue.record("row \(index) was not delivered")
                continue
            }
            #expect(record.count == 1 && record.priority == 5)
            let digests = (before...after).map { time in
                let payload =
                    #"{"aps":{"timestamp":\#(time),"event":"update","content-state":{"home":"Team \#(index)","#
                    + #""score":\#(index * 3)},"stale-date":\#(time + 900),"relevance-score":50}}"#
                return Array(payload.utf8).withUnsafeBytes { TokenHash.digest($0) }
            }
            #expect(digests.contains(record.payloadDigest), "row \(index)'s payload is not its rendering")
        }
        try await setup.simulator.shutdown()
    }

    @Test func aTemplateAPNsWouldNotDeliverIsRefusedBeforeSending() async throws {
        let setup = try await Sends.start(count: 5)
        defer { setup.remove() }
        // A push-to-start without an alert or attributes, and no timestamp.
        try #"{"aps": {"event": "start", "content-state": {"s": "{{token}}"}}}"#
            .write(toFile: setup.folder + "/start.json", atomically: true, encoding: .utf8)
        let refused = try await Sends.salvo(
            Self.send(setup, template: "start.json", tokens: "tokens.csv"),
            in: setup.folder
        )
        #expect(refused.status == 3, "\(refused.standardError)")
        for field in ["aps.timestamp", "aps.alert", "aps.attributes-type", "aps.attributes"] {
            #expect(refused.standardError.contains("start.json: \(field): "), "\(field): \(refused.standardError)")
        }
        #expect(setup.simulator.ledger.snapshot().accepted == 0)
        // The payload command refuses the same.
        let command = try await Sends.salvo(
            ["payload", "liveactivity", "--event", "start", "--content-state", "{}", "--output", "x.json"],
            in: setup.folder
        )
        // A usage error (the template is made of the options alone): 64, not 1.
        #expect(command.status == 64 && command.standardError.contains("--alert-title"), "\(command.standardError)")
        let channel = try await Sends.salvo(
            [
                "payload", "liveactivity", "--event", "start", "--content-state", "{}", "--alert-title", "t",
                "--attributes-type", "A", "--attributes", "{}", "--input-push-channel", "not base64!!",
            ],
            in: setup.folder
        )
        #expect(channel.status == 64 && channel.standardError.contains("not a channel id"), "\(channel.standardError)")
        try await setup.simulator.shutdown()
    }

    @Test func aRowWhoseEventTheTemplateCannotCarryIsABadRow() async throws {
        let setup = try await Sends.start(count: 6)
        defer { setup.remove() }
        try #"{"aps": {"timestamp": "{{$now}}", "event": "{{event}}", "content-state": {"s": "{{s}}"}}}"#
            .write(toFile: setup.folder + "/any.json", atomically: true, encoding: .utf8)
        let events = ["update", "end", "start", "update", "finish", "end"]
        let rows = zip(setup.tokens, events).map { "\($0.hexString),\($1),x" }
        try ("token,event,s\n" + rows.joined(separator: "\n") + "\n")
            .write(toFile: setup.folder + "/rows.csv", atomically: true, encoding: .utf8)
        let sent = try await Sends.salvo(Self.send(setup, template: "any.json", tokens: "rows.csv"), in: setup.folder)
        // Priority 10 by default: sent, with the budget said once.
        #expect(sent.status == 1, "\(sent.standardError)")
        #expect(sent.standardError.contains("Warning: any.json: aps: priority 10 is charged"), "\(sent.standardError)")
        let rejects = try String(contentsOfFile: setup.folder + "/rejects.csv", encoding: .utf8)
        #expect(rejects.contains("rows.csv,4,"), "\(rejects)")
        #expect(rejects.contains("aps.event from column 'event' is 'start': this template takes update or end"))
        #expect(rejects.contains("rows.csv,6,") && rejects.contains("is 'finish'"), "\(rejects)")
        #expect(setup.simulator.ledger.snapshot().accepted == 4)
        for index in [2, 4] {
            #expect(setup.simulator.ledger.record(for: Array(setup.tokens[index].bytes)) == nil)
        }
        try await setup.simulator.shutdown()
    }
}
