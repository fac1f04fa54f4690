/// A Live Activity payload template, as `salvo payload liveactivity` writes it: `aps` with the event, the content
/// state as the user wrote it (its `{{column}}` slots filled per row at send time), and the times as the send time
/// plus offsets (`"{{$now}}"`, `"{{$now+900}}"`), so that every notification carries the moment it was sent.
public struct LiveActivityTemplate: Sendable {
    /// Why a template cannot be written: which option, and what is wrong.
    public struct Failure: Error, Hashable, Sendable, CustomStringConvertible {
        public var option: String
        public var message: String
        public var description: String { "\(self.option): \(self.message)" }

        public init(option: String, message: String) {
            self.option = option
            self.message = message
        }
    }

    public var event: LiveActivityEvent
    /// The activity's `ContentState`, an object (its strings may hold `{{column}}` and `"{{column:int}}"`).
    public var contentState: JSONValue?
    /// Seconds after the send time the activity turns stale (`stale-date`).
    public var staleIn: Int64?
    /// Seconds after the send time an ended activity leaves the Lock Screen (`dismissal-date`).
    public var dismissalIn: Int64?
    public var alertTitle: String?
    public var alertBody: String?
    public var sound: String?
    /// A number, or a column (`{{column}}`, filled as a number).
    public var relevanceScore: String?
    public var attributesType: String?
    public var attributes: JSONValue?
    public var inputPushToken = false
    public var inputPushChannel: String?

    public init(event: LiveActivityEvent) {
        self.event = event
    }

    /// Reads `text` as JSON for `option` (`--content-state`, `--attributes`): an object, its placeholders valid.
    public static func object(_ text: [UInt8], option: String) throws(Failure) -> JSONValue {
        let value: JSONValue
        do {
            value = try JSONScanner.parse(text).value
        } catch {
            throw Failure(option: option, message: "not valid JSON: \(error.message)")
        }
        do {
            _ = try PayloadTemplate.placeholders(in: text)
        } catch {
            let at = PayloadTemplate.position(of: error.offset, in: text)
            throw Failure(option: option, message: "\(at): \(error.message)")
        }
        guard case .object = value else {
            throw Failure(option: option, message: "must be a JSON object, not \(value.kindName)")
        }
        return value
    }

    /// `15m`, `1h30m`, `90s`, `2d` or plain seconds; nil for anything else (or more than a year).
    public static func seconds(_ text: String) -> Int64? {
        guard !text.isEmpty else { return nil }
        if let plain = Int64(text), plain >= 0 { return plain <= 366 * 86_400 ? plain : nil }
        var total: Int64 = 0
        var digits = ""
        for character in text {
            if character.isASCII && character.isNumber {
                digits.append(character)
                continue
            }
            let unit: Int64
            switch character {
            case "s": unit = 1
            case "m": unit = 60
            case "h": unit = 3600
            case "d": unit = 86_400
            default: return nil
            }
            guard let value = Int64(digits), value <= 366 * 86_400 else { return nil }
            total += value * unit
            digits = ""
        }
        guard digits.isEmpty, total <= 366 * 86_400 else { return nil }
        return total
    }

    /// The payload template, or why the options do not make one.
    public func json() throws(Failure) -> JSONValue {
        var aps: [JSONMember] = [
            JSONMember("timestamp", .string("{{\(PayloadTemplate.sendTimeName)}}")),
            JSONMember("event", .string(self.event.rawValue)),
        ]
        if let contentState = self.contentState {
            aps.append(JSONMember("content-state", contentState))
        } else if self.event != .end {
            throw Failure(option: "--content-state", message: "an \(self.event) carries the activity's ContentState")
        }
        func sendTime(plus seconds: Int64) -> JSONValue {
            .string("{{\(PayloadTemplate.sendTimeName)+\(seconds)}}")
        }
        if let staleIn = self.staleIn { aps.append(JSONMember("stale-date", sendTime(plus: staleIn))) }
        if let dismissalIn = self.dismissalIn {
            guard self.event == .end else {
                throw Failure(option: "--dismissal-in", message: "goes with --event end (an \(self.event) ignores it)")
            }
            guard dismissalIn <= LiveActivityCheck.maximumDismissalDelay else {
                throw Failure(option: "--dismissal-in", message: "an ended activity stays at most 4 hours (4h)")
            }
            aps.append(JSONMember("dismissal-date", sendTime(plus: dismissalIn)))
        }
        if let score = self.relevanceScore {
            if Double(score) != nil, score.first != "+" {
                aps.append(JSONMember("relevance-score", .number(score)))
            } else if score.hasPrefix("{{"), score.hasSuffix("}}"), score.count > 4 {
                let name = score.dropFirst(2).dropLast(2).filter { $0 != " " }
                let column = name.hasSuffix(":int") ? String(name.dropLast(4)) : String(name)
                aps.append(JSONMember("relevance-score", .string("{{\(column):int}}")))
            } else {
                throw Failure(option: "--relevance-score", message: "is a number or {{column}}, not '\(score)'")
            }
        }
        var alert: [JSONMember] = []
        if let title = self.alertTitle { alert.append(JSONMember("title", .string(title))) }
        if let body = self.alertBody { alert.append(JSONMember("body", .string(body))) }
        if let sound = self.sound { alert.append(JSONMember("sound", .string(sound))) }
        if !alert.isEmpty {
            aps.append(JSONMember("alert", .object(alert)))
        } else if self.event == .start {
            throw Failure(option: "--alert-title", message: "a push-to-start (--event start) carries an alert")
        }
        if self.event == .start {
            guard let type = self.attributesType, !type.isEmpty else {
                throw Failure(option: "--attributes-type", message: "a push-to-start names its ActivityAttributes type")
            }
            guard let attributes = self.attributes else {
                throw Failure(option: "--attributes", message: "a push-to-start carries the activity's attributes")
            }
            aps.append(JSONMember("attributes-type", .string(type)))
            aps.append(JSONMember("attributes", attributes))
            if self.inputPushToken { aps.append(JSONMember("input-push-token", .number("1"))) }
            if let channel = self.inputPushChannel { aps.append(JSONMember("input-push-channel", .string(channel))) }
        } else {
            for (option, given) in [
                ("--attributes-type", self.attributesType != nil), ("--attributes", self.attributes != nil),
                ("--input-push-token", self.inputPushToken), ("--input-push-channel", self.inputPushChannel != nil),
            ] where given {
                throw Failure(option: option, message: "only a push-to-start (--event start) takes it")
            }
        }
        return .object([JSONMember("aps", .object(aps))])
    }

    /// `value` as indented JSON text (two spaces), ending with a line break: a template to read and edit.
    public static func indented(_ value: JSONValue) -> String {
        var out = ""
        Self.write(value, indent: "", to: &out)
        return out + "\n"
    }

    private static func write(_ value: JSONValue, indent: String, to out: inout String) {
        let inner = indent + "  "
        switch value {
        case .object(let members) where !members.isEmpty:
            out += "{\n"
            for (index, member) in members.enumerated() {
                out += inner + String(decoding: JSONValue.string(member.key).compactBytes, as: UTF8.self) + ": "
                Self.write(member.value, indent: inner, to: &out)
                out += index == members.count - 1 ? "\n" : ",\n"
            }
            out += indent + "}"
        case .array(let items) where !items.isEmpty:
            out += "[\n"
            for (index, item) in items.enumerated() {
                out += inner
                Self.write(item, indent: inner, to: &out)
                out += index == items.count - 1 ? "\n" : ",\n"
            }
            out += indent + "]"
        default:
            out += String(decoding: value.compactBytes, as: UTF8.self)
        }
    }
}
