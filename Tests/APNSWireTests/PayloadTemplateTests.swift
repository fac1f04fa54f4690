import APNSWire
import NIOCore
import SalvoTestTraits
import Testing

/// Payload templates as values: compiled once, rendered per row into exact bytes, refused with file and position.
@Suite(.tags(.pure), .runs(.pure)) struct PayloadTemplateTests {
    /// Renders `templates` for a row whose fields, by the templates' columns, are `values` (nil: missing).
    private func render(
        _ templates: PayloadTemplates,
        _ values: [String: String?],
        limit: PayloadLimit = .binary
    ) -> Result<String, PayloadRowError> {
        var bytes: [UInt8] = []
        var bounds: [UInt32] = []
        for column in templates.columns {
            if let value = values[column] ?? nil {
                bounds.append(UInt32(bytes.count))
                bytes.append(contentsOf: value.utf8)
                bounds.append(UInt32(bytes.count))
            } else {
                bounds += [PayloadFields.missing, 0]
            }
        }
        return bytes.withUnsafeBytes { raw in
            bounds.withUnsafeBufferPointer { bounds in
                let fields = PayloadFields(bytes: raw, bounds: bounds)
                switch templates.measure(fields, limit: limit) {
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

    /// One render that checks as it writes gives what a measure and then a render give: the same template and
    /// bytes, or the same refusal (a missing field, a field that is not UTF-8 or not an integer, no template for the
    /// language, a rendering over the limit: said with its exact size).
    @Test func oneCheckedRenderAgreesWithAMeasureThenARender() throws {
        let english = try self.template(
            #"{"aps":{"alert":"Hi {{name}}, {{city}}","badge":"{{n:int}}"},"t":"{{$now}}"}"#
        )
        let french = try self.template(#"{"aps":{"alert":"Salut {{name}}"},"x":"{{n:int}}"}"#, file: "fr.json")
        let sets = [
            PayloadTemplates(english),
            PayloadTemplates(byLanguage: [("default", english), ("fr", french)], languageColumn: "lang"),
            PayloadTemplates(byLanguage: [("fr", french)], languageColumn: "lang"),
        ]
        let names: [[UInt8]] = [
            Array("Ana".utf8), Array("Customer 1234567".utf8), Array("Zoë \"Z\"".utf8), [0x41, 0xFF], [0x0A, 0x01],
            Array(String(repeating: "long name ", count: 30).utf8), [],
        ]
        let numbers: [[UInt8]] = [Array("7".utf8), Array("-12".utf8), Array("012".utf8), Array("x".utf8), []]
        let languages: [[UInt8]] = [Array("fr".utf8), Array("fr-CA".utf8), Array("en".utf8), Array("de".utf8)]
        var random = SystemRandomNumberGenerator()
        var outcomes = (rendered: 0, refused: 0)
        for _ in 0..<3000 {
            let templates = sets.randomElement(using: &random)!
            var bytes: [UInt8] = []
            var bounds: [UInt32] = []
            for column in templates.columns {
                let value: [UInt8]? =
                    switch column {
                    case "name", "city": Int.random(in: 0..<12, using: &random) == 0 ? nil : names.randomElement()!
                    case "n": Int.random(in: 0..<12, using: &random) == 0 ? nil : numbers.randomElement()!
                    default: Int.random(in: 0..<8, using: &random) == 0 ? nil : languages.randomElement()!
                    }
                if let value {
                    bounds.append(UInt32(bytes.count))
                    bytes += value
                    bounds.append(UInt32(bytes.count))
                } else {
                    bounds += [PayloadFields.missing, 0]
                }
            }
            let limit = PayloadLimit(bytes: Int.random(in: 40...400, using: &random), name: "a test limit")
            bytes.withUnsafeBytes { raw in
                bounds.withUnsafeBufferPointer { bounds in
                    let fields = PayloadFields(bytes: raw, bounds: bounds, sendTime: 1_764_170_000)
                    var once = [UInt8](repeating: 0xEE, count: limit.bytes + 16)
                    let checked = once.withUnsafeMutableBytes { templates.render(fields, limit: limit, into: $0) }
                    switch (templates.measure(fields, limit: limit), checked) {
                    case (.success(let measured), .success(let one)):
                        #expect(one.template == measured.template && one.count == measured.count)
                        var twice = [UInt8](repeating: 0, count: measured.count)
                        _ = twice.withUnsafeMutableBytes {
                            templates.templates[measured.template].render(fields, into: $0)
                        }
                        #expect(Array(once[0..<one.count]) == twice)
                        outcomes.rendered += 1
                    case (.failure(let measured), .failure(let one)):
                        #expect(one.message == measured.message)
                        outcomes.refused += 1
                    case (let measured, let one):
                        Issue.record("measure then render: \(measured); one render: \(one)")
                    }
                }
            }
        }
        #expect(outcomes.rendered > 300 && outcomes.refused > 300)
    }

    private func template(_ text: String, file: String = "t.json") throws -> PayloadTemplate {
        try PayloadTemplate(json: Array(text.utf8), file: file)
    }

    @Test func placeholdersAreFilledEscapedAndIntegersReplaceTheWholeValue() throws {
        let text = """
            {
              "aps": {"alert": {"title": "Hi {{name}}!", "body": "{{ city }} at {{name}}"}, "badge": "{{count:int}}"},
              "user": "{{name}}"
            }
            """
        let compiled = try self.template(text)
        #expect(compiled.columns == ["name", "city", "count"])
        #expect(compiled.probe.text == #"{"aps":{"alert":{"title":"Hi !","body":" at "},"badge":0},"user":""}"#)
        let templates = PayloadTemplates(compiled)
        let rendered = self.render(templates, ["name": "Zoë \"Z\"\\\n\u{1}", "city": "Köln", "count": "-12"])
        #expect(
            try rendered.get()
                == #"{"aps":{"alert":{"title":"Hi Zoë \"Z\"\\\n\u0001!","body":"Köln at Zoë \"Z\"\\\n\u0001"},"badge":-12},"user":"Zoë \"Z\"\\\n\u0001"}"#
        )
        // The rendering is a payload the strict parser takes as it is.
        let payload = try Payload(jsonBytes: Array(try rendered.get().utf8))
        #expect(payload.value["aps"]?["badge"] == .number("-12"))
    }

    @Test(arguments: [
        (["name": "x", "n": "007"], PayloadRowError.Code.notInteger, "column 'n' is '007', not an integer"),
        (["name": "x", "n": "1.5"], .notInteger, "column 'n' is '1.5', not an integer"),
        (["name": "x", "n": ""], .notInteger, "column 'n' is '', not an integer"),
        (["name": nil, "n": "1"], .missingField, "the row has no field for column 'name'"),
        (["name": "\u{FFFD}", "n": "1"], nil, ""),
    ])
    func badRowsAreRefusedWithTheirReason(
        values: [String: String?],
        code: PayloadRowError.Code?,
        message: String
    )
        throws
    {
        let templates = PayloadTemplates(try self.template(#"{"aps":{"alert":"{{name}}","badge":"{{n:int}}"}}"#))
        switch self.render(templates, values) {
        case .success:
            #expect(code == nil)
        case .failure(let error):
            #expect(error.code == code)
            #expect(error.message == message)
        }
    }

    @Test func aFieldThatIsNotUTF8IsRefused() throws {
        let templates = PayloadTemplates(try self.template(#"{"aps":{"alert":"{{name}}"}}"#))
        let bytes: [UInt8] = [0x61, 0xC3, 0x28]
        let bounds: [UInt32] = [0, 3]
        let result = bytes.withUnsafeBytes { raw in
            bounds.withUnsafeBufferPointer { templates.measure(PayloadFields(bytes: raw, bounds: $0), limit: .binary) }
        }
        #expect(throws: PayloadRowError.self) { try result.get() }
    }

    @Test(arguments: [(PayloadLimit.legacy, 256), (.binary, 2048), (.http2, 4096), (.http2VoIP, 5120)])
    func aRenderingOverTheLimitIsRefusedAndOneAtTheLimitGoes(limit: PayloadLimit, bytes: Int) throws {
        let templates = PayloadTemplates(try self.template(#"{"aps":{"alert":"{{text}}"}}"#))
        let frame = #"{"aps":{"alert":""}}"#.utf8.count
        let fits = String(repeating: "a", count: bytes - frame)
        #expect(try self.render(templates, ["text": fits], limit: limit).get().utf8.count == bytes)
        // One more byte, or one quote more (escaped: two bytes), is over.
        for over in [fits + "a", String(fits.dropFirst()) + "\""] {
            let error = try #require(throws: PayloadRowError.self) {
                try self.render(templates, ["text": over], limit: limit).get()
            }
            #expect(error.code == .tooLarge)
            #expect(
                error.message == "the rendered payload is \(bytes + 1) bytes; \(limit.name) allows at most \(bytes)"
            )
        }
    }

    @Test(arguments: [
        (
            "{\n  \"aps\": {\"alert\": \"Hi {{name\"}}",
            "t.json, line 2, column 24: '{{' is not closed by '}}' within its string"
        ),
        (
            #"{"aps":{"alert":"x"},"{{k}}":1}"#,
            "t.json, line 1, column 23: a placeholder belongs in a value, not in a key"
        ),
        (
            #"{"aps":{"badge":"n={{n:int}}"}}"#,
            #"t.json, line 1, column 20: '{{n:int}}' must be the whole value, written "{{n:int}}""#
        ),
        (#"{"aps":{"alert":"{{}}"}}"#, "t.json, line 1, column 18: '{{}}' names no column"),
        (
            #"{"aps":{"alert":"{{n:float}}"}}"#,
            "t.json, line 1, column 18: '{{n:float}}': the only kind is ':int' (a whole JSON integer)"
        ),
        (#"{"aps":{"alert":"x"},}"#, "t.json: not valid JSON: line 1, column 22: a trailing comma before '}'"),
        (#"{"aps":{"badge":"{{n}}"}}"#, "t.json: aps.badge must be a number; it is a string"),
    ])
    func badTemplatesAreRefusedWithFileAndPosition(text: String, message: String) {
        let error = #expect(throws: PayloadTemplateError.self) { try self.template(text) }
        #expect(error?.description == message)
    }

    @Test func theLanguageColumnPicksTheTemplateWithFallbacks() throws {
        let templates = PayloadTemplates(
            byLanguage: [
                ("default", try self.template(#"{"aps":{"alert":"Hello {{name}}"}}"#)),
                ("pt", try self.template(#"{"aps":{"alert":"Olá {{name}}"}}"#)),
                ("pt-BR", try self.template(#"{"aps":{"alert":"Oi {{name}}","badge":"{{n:int}}"}}"#)),
            ],
            languageColumn: "lang"
        )
        #expect(templates.columns == ["name", "n", "lang"])
        let cases: [(String?, String)] = [
            ("pt-BR", #"{"aps":{"alert":"Oi Ana","badge":3}}"#),
            ("pt_br", #"{"aps":{"alert":"Oi Ana","badge":3}}"#),
            ("pt-PT", #"{"aps":{"alert":"Olá Ana"}}"#),
            ("pt", #"{"aps":{"alert":"Olá Ana"}}"#),
            ("fr-CA", #"{"aps":{"alert":"Hello Ana"}}"#),
            ("", #"{"aps":{"alert":"Hello Ana"}}"#),
            // A short row, with no language field at all: the default too.
            (nil, #"{"aps":{"alert":"Hello Ana"}}"#),
        ]
        for (language, expected) in cases {
            let result = self.render(templates, ["name": "Ana", "n": "3", "lang": language])
            #expect(try result.get() == expected, "\(language ?? "no field")")
        }
        let withoutDefault = PayloadTemplates(
            byLanguage: [("de", try self.template(#"{"aps":{"alert":"Hallo"}}"#))],
            languageColumn: "lang"
        )
        let error = try #require(throws: PayloadRowError.self) { try self.render(withoutDefault, ["lang": "fr"]).get() }
        #expect(error.message == "no template for language 'fr' and no default template")
        let short = try #require(throws: PayloadRowError.self) { try self.render(withoutDefault, ["lang": nil]).get() }
        #expect(short.message == "no template for language '' and no default template")
    }

    @Test func aRenderedFrameIsTheFrameOfTheRenderedPayload() throws {
        let compiled = try self.template(#"{"aps":{"alert":"Hi {{name}}","badge":"{{n:int}}"}}"#)
        let templates = PayloadTemplates(compiled)
        let token = try DeviceToken(hex: String(repeating: "5a", count: 32))
        let rendered = try self.render(templates, ["name": "Bo", "n": "7"]).get()
        for command in [FrameCommand.simple, .enhanced, .framed] {
            let frame = try FrameTemplate(command: command, payload: compiled.probe, expiry: 1_900_000_000)
            let expected = try FrameTemplate(command: command, payload: Payload(json: rendered), expiry: 1_900_000_000)
            var want = ByteBuffer()
            expected.write(token: token, identifier: 42, to: &want)
            var got = ByteBuffer()
            let bytes: [UInt8] = Array("Bo7".utf8)
            let bounds: [UInt32] = [0, 2, 2, 3]
            let size = bytes.withUnsafeBytes { raw in
                bounds.withUnsafeBufferPointer { bounds in
                    frame.write(
                        token: token,
                        identifier: 42,
                        payload: templates.templates[0],
                        fields: PayloadFields(bytes: raw, bounds: bounds),
                        payloadCount: rendered.utf8.count,
                        to: &got
                    )
                }
            }
            #expect(got == want, "command \(command.rawValue)")
            #expect(size == frame.frameByteCount(payloadCount: rendered.utf8.count))
        }
    }
}
