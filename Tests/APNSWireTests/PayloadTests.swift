import APNSWire
import SalvoTestTraits
import Testing

@Suite(.tags(.pure), .runs(.pure)) struct PayloadTests {
    @Test(arguments: 1...5)
    func guideExamplesParseAndValidate(example: Int) throws {
        let text = try TestData.text("payloads/guide-example-\(example).json")
        let payload = try Payload(json: text)
        #expect(!payload.text.contains(" : "), "white space outside strings is removed")
        #expect(payload.value["aps"] != nil)
        try payload.check(limit: .legacy)
        try payload.check(priority: .immediate)
        // Compacting twice changes nothing: the bytes are a fixed point.
        #expect(try Payload(jsonBytes: payload.bytes).bytes == payload.bytes)
    }

    @Test func guideExample5IsWholeAcrossThePageBreak() throws {
        // The guide prints example 5 over two pages; the second holds the sound and the provider's own keys.
        let payload = try Payload(json: try TestData.text("payloads/guide-example-5.json"))
        #expect(
            payload.text.hasSuffix(
                #""sound":"chime.aiff"},"acme-account":"jane.appleseed@apple.com","acme-message":"message123456"}"#
            )
        )
        #expect(payload.value["acme-account"] != nil)
    }

    @Test func compactFormKeepsOrderAndStrings() throws {
        let payload = try Payload(json: "{ \"aps\" : { \"alert\" : \"a  b : c\" },\n \"z\" : 1, \"a\" : [ 1 , 2 ] }")
        #expect(payload.text == #"{"aps":{"alert":"a  b : c"},"z":1,"a":[1,2]}"#)
    }

    @Test(arguments: [
        #"{"aps":{"alert":"a"},"aps":{"badge":1}}"#,
        #"{"aps":{"alert":"a","alert":"b"}}"#,
        #"{"aps":{"alert":"a"},"x":[{"k":1,"k":2}]}"#,
    ])
    func duplicateKeysAreRefusedAtAnyLevel(json: String) {
        #expect {
            try Payload(json: json)
        } throws: { error in
            let error = error as! PayloadError
            return error.code == .invalidJSON && error.message.contains("appears twice in one object")
        }
    }

    @Test func aByteOrderMarkIsNamedAsSuch() {
        #expect {
            try Payload(jsonBytes: [0xEF, 0xBB, 0xBF] + Array(#"{"aps":{"alert":"a"}}"#.utf8))
        } throws: { error in
            (error as! PayloadError).message.contains("byte order mark (BOM)")
        }
        #expect(throws: Never.self) { try Payload(json: #"{"aps":{"alert":"a"},"k":{"aps":1}}"#) }
    }

    @Test func theGuidesPrintedExample2IsRefusedWithItsPosition() {
        // As printed in the guide: a trailing comma after "badge" : 5.
        let printed = """
            {
              "aps" : {
                "alert" : "Bob wants to play poker",
                "badge" : 5,
              },
              "acme1" : "bar"
            }
            """
        #expect {
            try Payload(json: printed)
        } throws: { error in
            let error = error as! PayloadError
            return error.code == .invalidJSON && error.message.contains("line 5, column 3")
                && error.message.contains("trailing comma")
        }
    }

    @Test func theGuidesPrintedExample5IsRefusedAtTheMissingComma() {
        let printed = "{\n  \"aps\" : {\n    \"category\" : \"NEW_MESSAGE_CATEGORY\"\n    \"alert\" : \"x\"\n  }\n}"
        #expect {
            try Payload(json: printed)
        } throws: { error in
            let error = error as! PayloadError
            return error.code == .invalidJSON && error.message.contains("line 4, column 5")
                && error.message.contains("comma missing")
        }
    }

    @Test(arguments: [
        "", "[]", "{}", #"{"aps":1}"#, #"{"aps":{}} x"#, #"{"aps":{"alert":"x"}"#, #"{"aps":{"badge":01}}"#,
        #"{"aps":{"alert":"\q"}}"#, "{'aps':{}}", #"{"aps":{"badge":"5"}}"#, #"{"aps":{"alert":5}}"#,
        #"{"aps":{"alert":{"loc-args":"x"}}}"#, #"{"aps":{"alert":{"body":null}}}"#,
        #"{"aps":{"sound":true}}"#, #"{"aps":{"content-available":"1"}}"#, #"{"aps":{"category":3}}"#,
    ])
    func refusesWhatIsNotAPayload(text: String) {
        #expect(throws: PayloadError.self) { try Payload(json: text) }
    }

    @Test func acceptsNullWhereTheTableAllowsIt() throws {
        let payload = try Payload(json: #"{"aps":{"alert":{"body":"x","action-loc-key":null,"title-loc-args":null}}}"#)
        #expect(payload.value["aps"]?["alert"]?["action-loc-key"] == .null)
    }

    @Test func decodesEscapesIntoValues() throws {
        let payload = try Payload(json: #"{"aps":{"alert":"caf\u00e9 \ud83d\ude00 \"q\" \n"}}"#)
        #expect(payload.value["aps"]?["alert"] == .string("café 😀 \"q\" \n"))
        #expect(
            payload.text == #"{"aps":{"alert":"caf\u00e9 \ud83d\ude00 \"q\" \n"}}"#,
            "the sender's escapes are kept"
        )
    }

    @Test func builderWritesEveryKeyOfTheTables() throws {
        let alert = AlertDictionary(
            title: "Game Request",
            body: "Bob wants to play poker",
            titleLocKey: .value("T"),
            titleLocArgs: ["a"],
            actionLocKey: .null,
            locKey: "GAME_PLAY_REQUEST_FORMAT",
            locArgs: ["Jenna", "Frank"],
            launchImage: "launch.png"
        )
        let payload = Payload(
            aps: APS(alert: .dictionary(alert), badge: 5, sound: "default", contentAvailable: true, category: "C"),
            custom: [JSONMember("acme2", .array([.string("bang"), .string("whiz")])), JSONMember("n", .double(1.5))]
        )
        let expected =
            #"{"aps":{"alert":{"title":"Game Request","body":"Bob wants to play poker","title-loc-key":"T","#
            + #""title-loc-args":["a"],"action-loc-key":null,"loc-key":"GAME_PLAY_REQUEST_FORMAT","#
            + #""loc-args":["Jenna","Frank"],"launch-image":"launch.png"},"badge":5,"sound":"default","#
            + #""content-available":1,"category":"C"},"acme2":["bang","whiz"],"n":1.5}"#
        #expect(payload.text == expected)
        // What the builder writes, the reader accepts unchanged.
        #expect(try Payload(jsonBytes: payload.bytes) == payload)
    }

    @Test func builderEscapesStrings() throws {
        let payload = Payload(aps: APS(alert: .text("quote \" slash \\ tab \t bell \u{7}")))
        #expect(payload.text == #"{"aps":{"alert":"quote \" slash \\ tab \t bell \u0007"}}"#)
        #expect(try Payload(jsonBytes: payload.bytes).value == payload.value)
    }

    /// A payload of exactly `size` bytes: `{"aps":{"alert":"xxx…"}}`.
    private func payload(ofSize size: Int) -> Payload {
        let overhead = #"{"aps":{"alert":""}}"#.utf8.count
        let payload = Payload(aps: APS(alert: .text(String(repeating: "x", count: size - overhead))))
        precondition(payload.byteCount == size)
        return payload
    }

    @Test(arguments: [PayloadLimit.legacy, .binary, .http2, .http2VoIP])
    func limitsHoldAtTheExactBoundary(limit: PayloadLimit) throws {
        try self.payload(ofSize: limit.bytes).check(limit: limit)
        #expect {
            try self.payload(ofSize: limit.bytes + 1).check(limit: limit)
        } throws: { error in
            let error = error as! PayloadError
            return error.code == .tooLarge && error.message.contains("\(limit.bytes + 1) bytes")
        }
    }

    @Test func limitsAreThoseOfTheSpec() {
        #expect(PayloadLimit.legacy.bytes == 256)
        #expect(PayloadLimit.binary.bytes == 2048)
        #expect(PayloadLimit.http2.bytes == 4096)
        #expect(PayloadLimit.http2VoIP.bytes == 5120)
        #expect(FrameCommand.enhanced.payloadLimit == .legacy)
        #expect(APNSPushType.voip.payloadLimit == .http2VoIP)
    }

    @Test func contentAvailableOnlyIsAnErrorAtPriority10() throws {
        let silent = try Payload(json: #"{"aps":{"content-available":1},"acme":"x"}"#)
        #expect(silent.isContentAvailableOnly)
        #expect(throws: PayloadError.self) { try silent.check(priority: .immediate) }
        try silent.check(priority: .powerConsiderate)

        let withSound = try Payload(json: #"{"aps":{"content-available":1,"sound":"default"}}"#)
        #expect(!withSound.isContentAvailableOnly)
        try withSound.check(priority: .immediate)
    }

    @Test func rawContentAvailableCheckAgreesWithTheParsedOne() throws {
        let texts = [
            #"{"aps":{"content-available":1}}"#, #"{"aps":{"content-available":1,"badge":2}}"#,
            #"{"aps":{"alert":"content-available"}}"#, #"{"aps":{"alert":"hi"}}"#, "not json content-available",
        ]
        for text in texts {
            let expected = (try? Payload(json: text))?.isContentAvailableOnly ?? false
            let raw = Array(text.utf8).withUnsafeBytes { Payload.isContentAvailableOnly($0) }
            #expect(raw == expected, "\(text)")
        }
    }

    @Test func aPartsCompactBytesAreCutFromTheWholeAtTheirPath() throws {
        let text = #"""
            { "notifications": [
                { "token": "a", "payload": { "aps" : { "alert" : "one" } } },
                "not an object",
                { "token": "b" },
                { "payload": [ 1, 2 ], "other": { "payload": { "x": 1 } } },
                { "payload": {"aps":{"alert":"fo\u00f6 \" two"}, "n" : null} }
            ],
              "payload": { "top": true }, "other": [ { "payload": 1 } ] }
            """#
        let parsed = try JSONValue.parse(Array(text.utf8), spansAt: ["notifications", "*", "payload"])
        #expect(try parsed.compact == JSONValue.parse(Array(text.utf8)).compact)
        // One span for each element of the top object's notifications that has a payload; none elsewhere.
        let cut = parsed.spans.map { String(decoding: parsed.compact[$0], as: UTF8.self) }
        #expect(cut == [#"{"aps":{"alert":"one"}}"#, "[1,2]", #"{"aps":{"alert":"fo\u00f6 \" two"},"n":null}"#])
        guard case .array(let notifications)? = parsed.value["notifications"] else {
            Issue.record("no notifications")
            return
        }
        // Each span is its value's text, compact, the sender's escapes kept (as `Payload(jsonBytes:)` keeps them).
        let payloads = notifications.compactMap { $0["payload"] }
        #expect(try parsed.spans.map { try JSONValue.parse(Array(parsed.compact[$0])).value } == payloads)
        #expect(try Payload(jsonBytes: Array(parsed.compact[parsed.spans[2]])).bytes == Array(cut[2].utf8))
        let payload = try Payload(value: payloads[0], compact: Array(parsed.compact[parsed.spans[0]]))
        #expect(try payload.bytes == Payload(value: payloads[0]).bytes)
        #expect(throws: PayloadError.self) { try Payload(value: payloads[1], compact: [1]) }
        // Not built: the same compact bytes and spans, each value at the path empty of its kind.
        let unbuilt = try JSONValue.parse(
            Array(text.utf8),
            spansAt: ["notifications", "*", "payload"],
            valuesAtSpans: false
        )
        #expect(unbuilt.compact == parsed.compact && unbuilt.spans == parsed.spans)
        guard case .array(let shells)? = unbuilt.value["notifications"] else {
            Issue.record("no notifications")
            return
        }
        #expect(shells.compactMap { $0["payload"] } == [.object([]), .array([]), .object([])])
        #expect(shells[0]["token"] == .string("a"))
        // A key repeated within such a value is left to whoever reads its span; anywhere else it is refused.
        let repeated = Array(#"{"notifications":[{"payload":{"a":1,"a":2}}]}"#.utf8)
        #expect(throws: JSONParseError.self) {
            try JSONValue.parse(repeated, spansAt: ["notifications", "*", "payload"])
        }
        let read = try JSONValue.parse(repeated, spansAt: ["notifications", "*", "payload"], valuesAtSpans: false)
        #expect(throws: JSONParseError.self) { try JSONValue.parse(Array(read.compact[read.spans[0]])) }
        #expect(throws: JSONParseError.self) {
            try JSONValue.parse(
                Array(#"{"notifications":[{"payload":{},"payload":{}}]}"#.utf8),
                spansAt: ["notifications", "*", "payload"],
                valuesAtSpans: false
            )
        }
        // No path: no span.
        #expect(try JSONValue.parse(Array(text.utf8), spansAt: []).spans.isEmpty)
    }
}
