import APNSWire
import SalvoTestTraits
import Testing

/// Live Activity payloads checked before sending: the static rules once on the template, the column-filled ones
/// per row, and the send time filled into `{{$now}}` from the chunk's one clock reading.
@Suite(.tags(.pure), .runs(.pure)) struct LiveActivityCheckTests {
    static let now: Int64 = 1_764_170_000

    private func template(_ text: String) throws -> PayloadTemplate {
        try PayloadTemplate(json: Array(text.utf8), file: "la.json")
    }

    private func check(_ text: String, priority: NotificationPriority? = .powerConsiderate) throws -> LiveActivityReport
    {
        LiveActivityCheck.check(template: try self.template(text), priority: priority, now: Self.now)
    }

    /// `measure` and `render` for a row whose fields, by the templates' columns, are `values`, at `sendTime`.
    private func render(
        _ templates: PayloadTemplates,
        _ values: [String: String],
        sendTime: Int64 = 0
    ) -> Result<String, PayloadRowError> {
        var bytes: [UInt8] = []
        var bounds: [UInt32] = []
        for column in templates.columns {
            if let value = values[column] {
                bounds.append(UInt32(bytes.count))
                bytes.append(contentsOf: value.utf8)
                bounds.append(UInt32(bytes.count))
            } else {
                bounds += [PayloadFields.missing, 0]
            }
        }
        return bytes.withUnsafeBytes { raw in
            bounds.withUnsafeBufferPointer { bounds in
                let fields = PayloadFields(bytes: raw, bounds: bounds, sendTime: sendTime)
                switch templates.measure(fields, limit: .http2) {
                case .failure(let error):
                    return .failure(error)
                case .success(let (index, count)):
                    var out = [UInt8](repeating: 0, count: count)
                    let written = out.withUnsafeMutableBytes { templates.templates[index].render(fields, into: $0) }
                    #expect(written == count)
                    return .success(String(decoding: out, as: UTF8.self))
                }
            }
        }
    }

    @Test func aCompleteUpdatePassesWithTheBudgetCalledOutAtPriority10() throws {
        let text = #"""
            {"aps": {"timestamp": "{{$now}}", "event": "update",
                     "content-state": {"home": "{{home}}", "score": "{{score:int}}"},
                     "stale-date": "{{$now+900}}", "relevance-score": 50}}
            """#
        let quiet = try self.check(text)
        #expect(quiet.issues.isEmpty, "\(quiet.issues)")
        #expect(quiet.events == [.update])
        #expect(quiet.rowRule == nil, "nothing left to check per row")
        let budgeted = try self.check(text, priority: .immediate)
        #expect(budgeted.errors.isEmpty)
        #expect(budgeted.warnings.map(\.field) == ["aps"])
        #expect(
            budgeted.warnings.first?.message.hasPrefix("priority 10 is charged against the activity's hourly budget")
                == true
        )
        // Omitted is 10 too.
        #expect(try self.check(text, priority: nil).warnings.count == 1)
    }

    @Test func timestampAndEventAreRequiredAndNamed() throws {
        let missing = try self.check(#"{"aps": {"content-state": {}}}"#)
        #expect(missing.errors.map(\.field) == ["aps.timestamp", "aps.event"])
        #expect(missing.errors[0].message.contains("{{$now}}"))
        let wrong = try self.check(#"{"aps": {"timestamp": "{{ts}}", "event": "begin", "content-state": {}}}"#)
        #expect(
            wrong.errors.map(\.description) == [
                #"aps.timestamp: "{{ts}}" fills a string: write "{{ts:int}}" (UNIX seconds)"#,
                "aps.event: is 'begin': start, update or end",
            ]
        )
        let typed = try self.check(#"{"aps": {"timestamp": "{{ts:int}}", "event": "update", "content-state": {}}}"#)
        #expect(typed.errors.isEmpty, "\(typed.errors)")
        let noAps = LiveActivityCheck.check(payload: try Payload(json: #"{"aps": {}, "x": 1}"#), priority: nil, now: 0)
        #expect(noAps.errors.map(\.field) == ["aps.timestamp", "aps.event"])
    }

    @Test func anUpdateCarriesContentStateAndNoPushToStartFields() throws {
        let report = try self.check(
            #"{"aps": {"timestamp": 1764170000, "event": "update", "input-push-token": 1, "attributes": {}}}"#
        )
        #expect(report.errors.map(\.field) == ["aps.content-state", "aps.input-push-token"])
        #expect(report.errors[1].message.hasPrefix("only a push-to-start (event start) takes it"))
        #expect(report.warnings.map(\.field).contains("aps.attributes"))
        // An end may leave the content state out.
        #expect(try self.check(#"{"aps": {"timestamp": 1764170000, "event": "end"}}"#).errors.isEmpty)
    }

    @Test func pushToStartCarriesAlertAttributesTypeAndAttributes() throws {
        let bare = try self.check(#"{"aps": {"timestamp": "{{$now}}", "event": "start", "content-state": {}}}"#)
        #expect(bare.errors.map(\.field) == ["aps.alert", "aps.attributes-type", "aps.attributes"])
        let whole = try self.check(
            #"""
            {"aps": {"timestamp": "{{$now}}", "event": "start", "content-state": {"score": 0},
                     "alert": {"title": "Kick-off", "body": "{{home}} v {{away}}"},
                     "attributes-type": "MatchAttributes", "attributes": {"home": "{{home}}"},
                     "input-push-channel": "{{channel}}"}}
            """#
        )
        #expect(whole.errors.isEmpty, "\(whole.errors)")
        let token = try self.check(
            #"""
            {"aps": {"timestamp": "{{$now}}", "event": "start", "content-state": {}, "alert": {"title": "t"},
                     "attributes-type": "A", "attributes": {}, "input-push-token": true}}
            """#
        )
        #expect(token.errors.map(\.field) == ["aps.input-push-token"])
        // A literal channel id that is not base64 would be refused by APNs: refused here, with the value.
        let channel = try self.check(
            #"""
            {"aps": {"timestamp": "{{$now}}", "event": "start", "content-state": {}, "alert": {"title": "t"},
                     "attributes-type": "A", "attributes": {}, "input-push-channel": "not base64!!"}}
            """#
        )
        #expect(channel.errors.map(\.field) == ["aps.input-push-channel"])
        #expect(channel.errors.first?.message.contains("'not base64!!' is not a channel id") == true)
    }

    @Test func theDismissalDateFallsWithinFourHoursOfTheTimestamp() throws {
        func end(_ timestamp: String, _ dismissal: String) throws -> LiveActivityReport {
            try self.check(#"{"aps": {"timestamp": \#(timestamp), "event": "end", "dismissal-date": \#(dismissal)}}"#)
        }
        #expect(try end("1764170000", "1764184400").errors.isEmpty)  // exactly 4 h
        let late = try end("1764170000", "1764184401")
        #expect(
            late.errors.map(\.description) == [
                "aps.dismissal-date: is 4 h 0 min after aps.timestamp: an ended activity stays at most 4 hours (a past "
                    + "date removes it at once)"
            ]
        )
        #expect(try end("1764170000", "1700000000").errors.isEmpty, "a past date removes the activity at once")
        #expect(try end(#""{{$now}}""#, #""{{$now+3600}}""#).errors.isEmpty)
        #expect(try end(#""{{$now}}""#, #""{{$now+14401}}""#).errors.count == 1)
        // A fixed date against the send time: already over 4 hours from now, and the send is no earlier.
        #expect(try end(#""{{$now}}""#, "\(Self.now + 5 * 3600)").errors.count == 1)
        #expect(try end(#""{{$now}}""#, "\(Self.now + 3 * 3600)").errors.isEmpty)
        // On an update it is ignored: said, not refused.
        let update = try self.check(
            #"{"aps": {"timestamp": 1764170000, "event": "update", "content-state": {}, "dismissal-date": 1764170100}}"#
        )
        #expect(update.errors.isEmpty && update.warnings.map(\.field) == ["aps.dismissal-date"])
    }

    @Test func aDismissalDateFromAColumnIsCheckedPerRowAgainstTheSendTime() throws {
        let text = #"{"aps": {"timestamp": "{{$now}}", "event": "end", "dismissal-date": "{{dismiss:int}}"}}"#
        let report = try self.check(text)
        #expect(report.errors.isEmpty)
        #expect(report.rowRule?.dismissalDate == .column("dismiss"))
        let (templates, reports) = PayloadTemplates(try self.template(text))
            .checkingLiveActivity(priority: .powerConsiderate, now: Self.now)
        #expect(reports.count == 1 && reports[0].file == "la.json")
        let sendTime = Self.now + 10
        let fine = self.render(templates, ["dismiss": String(sendTime + 3600)], sendTime: sendTime)
        #expect(
            try fine.get()
                == #"{"aps":{"timestamp":\#(sendTime),"event":"end","dismissal-date":\#(sendTime + 3600)}}"#
        )
        let late = self.render(templates, ["dismiss": String(sendTime + 5 * 3600)], sendTime: sendTime)
        guard case .failure(let error) = late else {
            Issue.record("a row 5 h ahead was taken")
            return
        }
        #expect(error.code == .liveActivity)
        #expect(error.message.hasPrefix("aps.dismissal-date from column 'dismiss' is 5 h 0 min after aps.timestamp"))
    }

    @Test func anEventFromAColumnIsLimitedToWhatTheTemplateCarries() throws {
        let text = #"{"aps": {"timestamp": "{{$now}}", "event": "{{event}}", "content-state": {"s": "{{s}}"}}}"#
        let report = try self.check(text)
        #expect(report.errors.isEmpty, "\(report.errors)")
        #expect(report.events == [.update, .end])
        #expect(report.warnings.first?.message.hasPrefix("from column 'event': rows may name update or end") == true)
        let templates = PayloadTemplates(try self.template(text))
            .checkingLiveActivity(priority: .powerConsiderate, now: Self.now).templates
        #expect(throws: Never.self) { try self.render(templates, ["event": "end", "s": "x"]).get() }
        guard case .failure(let error) = self.render(templates, ["event": "start", "s": "x"]) else {
            Issue.record("a start without an alert was taken")
            return
        }
        #expect(error.message == "aps.event from column 'event' is 'start': this template takes update or end")
        guard case .failure = self.render(templates, ["event": "Update", "s": "x"]) else {
            Issue.record("an event is matched exactly")
            return
        }
        // No event fits: each one's reason, as errors.
        let none = try self.check(#"{"aps": {"timestamp": 1, "event": "{{e}}", "input-push-token": 1}}"#)
        #expect(none.errors.map(\.field).contains("aps.input-push-token"))
        #expect(none.errors.contains { $0.message.hasPrefix("(event start)") })
    }

    @Test func theFourKilobyteLimitIsCalledOut() throws {
        let big = String(repeating: "x", count: 4100)
        let report = try self.check(
            #"{"aps": {"timestamp": 1764170000, "event": "update", "content-state": {"t": "\#(big)"}}}"#
        )
        #expect(report.errors.map(\.field) == ["aps"])
        #expect(report.errors[0].message.contains("over 4096"))
    }

    @Test func theSendTimeIsFilledAsTenDigitsWithItsOffset() throws {
        let compiled = try self.template(
            #"{"aps": {"timestamp": "{{$now}}", "stale-date": "{{ $now+900 }}"}, "n": "{{n}}"}"#
        )
        #expect(compiled.columns == ["n"], "the send time is no column")
        #expect(compiled.fillsSendTime)
        #expect(compiled.probe.text == #"{"aps":{"timestamp":1000000000,"stale-date":1000000000},"n":""}"#)
        #expect(compiled.literalByteCount == compiled.probe.byteCount)
        let templates = PayloadTemplates(compiled)
        #expect(
            try self.render(templates, ["n": "7"], sendTime: 1_764_170_000).get()
                == #"{"aps":{"timestamp":1764170000,"stale-date":1764170900},"n":"7"}"#
        )
        // Without a send time read the size stays the measured one.
        #expect(
            try self.render(templates, ["n": ""]).get()
                == #"{"aps":{"timestamp":1000000000,"stale-date":1000000000},"n":""}"#
        )
        #expect(String(decoding: compiled.placeholderText, as: UTF8.self).contains(#""{{$now+900}}""#))
        for bad in [
            #"{"aps": {"t": "{{$then}}"}}"#, #"{"aps": {"t": "at {{$now}}"}}"#, #"{"aps": {"t": "{{$now:int}}"}}"#,
        ] {
            #expect(throws: PayloadTemplateError.self, "\(bad)") { try self.template(bad) }
        }
    }
}

/// A channel id as APNs issues it: standard base64, padding optional; `input-push-channel` takes nothing else.
@Suite(.tags(.pure), .runs(.pure)) struct ChannelIDFormatTests {
    @Test(arguments: ["YQ==", "YQ", "Yg", "dW5rbm93bg==", "AAECAwQFBgcICQoLDA0ODw", "ab+/"])
    func wellFormed(id: String) { #expect(ChannelIDFormat.isWellFormed(id)) }

    @Test(arguments: [
        "", "not base64!!", "Y", "YQ=", "Y===", "YQ==YQ==", "ab-_", "=", String(repeating: "A", count: 260),
    ])
    func malformed(id: String) { #expect(!ChannelIDFormat.isWellFormed(id)) }
}
