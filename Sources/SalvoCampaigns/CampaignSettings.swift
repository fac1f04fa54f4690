import APNSWire
import SalvoRows
import SalvoService

/// What a campaign sends, and when, as `POST /v1/campaigns` gives it: the audience (an upload, a file under the
/// folder the operator allows, or a query on the operator's PostgreSQL server), the token column, one payload or a stored template filled from each row, the
/// headers `send` takes, the start time and the rate. A value read from JSON and written back to it (the store keeps
/// it so, and every run of the campaign builds its job from it), with no I/O.
public struct CampaignSettings: Hashable, Sendable {
    public enum Audience: Hashable, Sendable {
        /// The request's body, a CSV, kept in the campaign's folder.
        case upload
        /// A CSV on the server, named relative to the folder `serve --campaign-files` allows.
        case file(String)
        /// The rows of a query on the server's database (`serve --campaign-postgres`), copied once into the
        /// campaign's folder at its first run (`CampaignQuery`); the token column is `column`.
        case postgres(query: String)

        /// An audience that is a CSV file when the campaign is made (an upload, a server-side file).
        public var isFile: Bool {
            if case .postgres = self { false } else { true }
        }
    }

    public var name: String?
    public var audience: Audience
    /// The header name of the token column.
    public var column = "token"
    /// One payload for every row (compact JSON), or
    public var payload: [UInt8]?
    /// the name of a stored template, filled from each row's columns (its text is kept with the campaign when it is
    /// made, so that a template changed later changes no campaign).
    public var template: String?
    public var pushType: APNSPushType?
    public var topic: String?
    public var priority: NotificationPriority?
    public var expiration: UInt32?
    public var collapseID: String?
    /// When to start, milliseconds since 1970; nil: now.
    public var sendAt: Int64?
    /// Notifications per second at most; nil: as fast as the connections go.
    public var rate: Int?
    /// Local-time delivery: each row at this wall-clock time in its own zone (`LocalTimeSchedule`); nil: every row
    /// from the start on.
    public var deliverAtLocal: LocalTime?
    /// With `deliverAtLocal`: the header name of the column with each row's IANA zone.
    public var zoneColumn = "time_zone"
    /// With `deliverAtLocal`: where rows go whose zone is empty or unknown.
    public var localFallback = LocalFallback.zone("UTC")

    public init(audience: Audience) {
        self.audience = audience
    }

    /// The most a campaign's name may hold, in bytes.
    public static let maximumNameBytes = 200

    /// Reads the settings from a JSON object: the body of a JSON request, or the `Salvo-Campaign` header of an
    /// upload (`upload`: the audience is the body, and the object names none).
    ///
    /// - Throws: `ServiceProblem` (400 `bad-json` or `bad-request`) naming the field at fault and why.
    public static func read(
        _ bytes: [UInt8],
        upload: Bool,
        source: String = "the body"
    ) throws(ServiceProblem)
        -> CampaignSettings
    {
        let value: JSONValue
        do {
            value = try JSONValue.parse(bytes).value
        } catch {
            throw ServiceProblem(.badJSON, detail: "\(source) is not JSON: \(error.message)")
        }
        guard case .object = value else {
            throw ServiceProblem(.badRequest, detail: "\(source) must be a JSON object, not \(value.kindName)")
        }
        var settings = CampaignSettings(audience: .upload)
        if upload {
            if value["audience"] != nil {
                throw Self.refusal("audience", "an uploaded campaign's audience is the body; name no other")
            }
        } else {
            settings.audience = try Self.audience(value["audience"])
        }
        settings.name = try Self.string(value, "name")
        if let name = settings.name, !(1...Self.maximumNameBytes).contains(name.utf8.count) {
            throw Self.refusal("name", "a name is 1 to \(Self.maximumNameBytes) bytes")
        }
        if let column = try Self.string(value, "column") {
            guard !column.isEmpty, column.utf8.count <= 200 else {
                throw Self.refusal("column", "the token column's name is 1 to 200 bytes")
            }
            settings.column = column
        }
        if case .postgres = settings.audience, case .string(let column)? = value["audience"]?["postgres"]?["column"] {
            guard column == settings.column || value["column"] == nil else {
                throw Self.refusal(
                    "audience.postgres.column",
                    "the token column is named twice (column and audience.postgres.column), differently"
                )
            }
            settings.column = column
        }
        switch (value["payload"], value["template"]) {
        case (nil, nil):
            throw Self.refusal("payload", "a campaign needs a payload, or a stored template filled from each row")
        case (.some, .some):
            throw Self.refusal("template", "a campaign takes a payload or a template, not both")
        case (let payload?, nil):
            guard case .object = payload else {
                throw Self.refusal("payload", "the payload must be a JSON object, not \(payload.kindName)")
            }
            do {
                settings.payload = try Payload(value: payload).bytes
            } catch {
                throw Self.refusal("payload", error.message)
            }
        case (nil, let template?):
            guard case .string(let name) = template, ServiceTemplate.isValidName(name) else {
                throw Self.refusal("template", "the template is a stored template's name, not \(template.kindName)")
            }
            settings.template = name
        }
        if let text = try Self.string(value, "push_type") {
            let pushType = APNSPushType(rawValue: text)
            guard APNSPushType.known.contains(pushType) else {
                let known = APNSPushType.known.map(\.rawValue).sorted().joined(separator: ", ")
                throw Self.refusal("push_type", "unknown push type \(Self.shown(text)); known: \(known)")
            }
            settings.pushType = pushType
        }
        settings.topic = try Self.string(value, "topic")
        if let topic = settings.topic {
            if let problem = APNSHeaderValueRules.topicProblem(topic) { throw Self.refusal("topic", problem) }
            guard (1...255).contains(topic.utf8.count), topic.utf8.allSatisfy({ $0 >= 0x21 && $0 <= 0x7E }) else {
                throw Self.refusal("topic", "the topic is 1 to 255 visible ASCII characters")
            }
        }
        settings.collapseID = try Self.string(value, "collapse_id")
        if let collapseID = settings.collapseID {
            if let problem = APNSHeaderValueRules.collapseIDProblem(collapseID) {
                throw Self.refusal("collapse_id", problem)
            }
            let bytes = Array(collapseID.utf8)
            guard (1...64).contains(bytes.count), bytes.allSatisfy({ $0 >= 0x20 && $0 <= 0x7E }),
                bytes.first != 0x20, bytes.last != 0x20
            else {
                throw Self.refusal(
                    "collapse_id",
                    "the collapse id is 1 to 64 printable ASCII characters, without a space at either end"
                )
            }
        }
        if let priority = value["priority"] {
            guard case .number(let literal) = priority, let number = UInt8(literal), [1, 5, 10].contains(number) else {
                throw Self.refusal("priority", "the priority is 10, 5 or 1, not \(Self.shown(priority))")
            }
            settings.priority = NotificationPriority(rawValue: number)
        }
        if let expiration = value["expiration"] {
            guard case .number(let literal) = expiration, let seconds = UInt32(literal) else {
                throw Self.refusal(
                    "expiration",
                    "the expiration is UNIX seconds, a whole number from 0 to \(UInt32.max), not \(Self.shown(expiration))"
                )
            }
            settings.expiration = seconds
        }
        if let sendAt = value["send_at"] {
            guard case .string(let text) = sendAt, let milliseconds = Self.time(text) else {
                throw Self.refusal(
                    "send_at",
                    "send_at is an RFC 3339 time with its offset (2026-12-01T09:00:00Z), not \(Self.shown(sendAt))"
                )
            }
            settings.sendAt = milliseconds
        }
        if let rate = value["rate"] {
            guard case .number(let literal) = rate, let number = Int(literal), number >= 1, number <= 1_000_000 else {
                throw Self.refusal(
                    "rate",
                    "the rate is a whole number of notifications per second from 1 to 1000000, not \(Self.shown(rate))"
                )
            }
            settings.rate = number
        }
        try Self.readLocalTime(value, into: &settings)
        let pushType = settings.pushType ?? .alert
        if let problem = pushType.problem(
            topic: settings.topic,
            priority: settings.priority,
            priorityIsDefault: settings.priority == nil,
            naming: .headers
        ) {
            throw Self.refusal(settings.priority != nil ? "priority" : "topic", problem.message)
        }
        if let payload = settings.payload, payload.count > pushType.payloadLimit.bytes {
            throw Self.refusal(
                "payload",
                "the payload is \(payload.count) bytes; \(pushType.payloadLimit.name) allows at most "
                    + "\(pushType.payloadLimit.bytes)"
            )
        }
        return settings
    }

    /// The settings as the store keeps them (and `read` reads them again, `upload` as the audience says).
    public var json: [UInt8] {
        var members: [JSONMember] = []
        if let name { members.append(JSONMember("name", .string(name))) }
        switch self.audience {
        case .upload: break
        case .file(let path): members.append(JSONMember("audience", .object([JSONMember("file", .string(path))])))
        case .postgres(let query):
            let postgres = JSONValue.object([
                JSONMember("query", .string(query)), JSONMember("column", .string(column)),
            ])
            members.append(JSONMember("audience", .object([JSONMember("postgres", postgres)])))
        }
        members.append(JSONMember("column", .string(self.column)))
        if let payload, let value = try? JSONValue.parse(payload).value {
            members.append(JSONMember("payload", value))
        }
        if let template { members.append(JSONMember("template", .string(template))) }
        if let pushType { members.append(JSONMember("push_type", .string(pushType.rawValue))) }
        if let topic { members.append(JSONMember("topic", .string(topic))) }
        if let priority { members.append(JSONMember("priority", .int(Int(priority.rawValue)))) }
        if let expiration { members.append(JSONMember("expiration", .int(Int(expiration)))) }
        if let collapseID { members.append(JSONMember("collapse_id", .string(collapseID))) }
        if let sendAt { members.append(JSONMember("send_at", .string(Self.timeText(sendAt)))) }
        if let rate { members.append(JSONMember("rate", .int(rate))) }
        if let deliverAtLocal {
            members.append(JSONMember("deliver_at_local", .string(deliverAtLocal.description)))
            members.append(JSONMember("zone_column", .string(self.zoneColumn)))
            members.append(JSONMember("local_fallback", .string(self.localFallback.description)))
        }
        return JSONValue.object(members).compactBytes
    }

    /// The request headers of every row: the settings' own, the service's topic when they name none.
    public func headers(defaultTopic: String?) throws(ServiceProblem) -> APNSRequestHeaders {
        do {
            return try APNSRequestHeaders(
                pushType: self.pushType,
                expiration: self.expiration,
                priority: self.priority ?? (self.pushType ?? .alert).defaultPriority,
                topic: self.topic ?? defaultTopic,
                collapseID: self.collapseID
            )
        } catch {
            throw ServiceProblem(.badRequest, detail: "the headers would be refused: \(error)")
        }
    }

    // MARK: Pieces

    /// `deliver_at_local` (`HH:MM`), `zone_column` and `local_fallback` (an IANA zone or `skip`); the latter two
    /// only with the first.
    private static func readLocalTime(_ value: JSONValue, into settings: inout CampaignSettings) throws(ServiceProblem)
    {
        if let local = value["deliver_at_local"] {
            guard case .string(let text) = local, let time = LocalTime(text) else {
                throw Self.refusal(
                    "deliver_at_local",
                    "deliver_at_local is a wall-clock time HH:MM from 00:00 to 23:59, not \(Self.shown(local))"
                )
            }
            settings.deliverAtLocal = time
        }
        for field in ["zone_column", "local_fallback"] where value[field] != nil && settings.deliverAtLocal == nil {
            throw Self.refusal(field, "\(field) is for a local-time campaign: name its time with deliver_at_local")
        }
        if let column = try Self.string(value, "zone_column") {
            guard !column.isEmpty, column.utf8.count <= 200 else {
                throw Self.refusal("zone_column", "the time zone column's name is 1 to 200 bytes")
            }
            guard column != settings.column else {
                throw Self.refusal("zone_column", "the time zone column cannot be the token column")
            }
            settings.zoneColumn = column
        }
        if let text = try Self.string(value, "local_fallback") {
            guard let fallback = LocalFallback(text) else {
                throw Self.refusal(
                    "local_fallback",
                    "unknown time zone \(Self.shown(text)): the fallback is an IANA zone (UTC, Europe/Paris) or skip"
                )
            }
            settings.localFallback = fallback
        }
    }

    private static func refusal(_ field: String, _ reason: String) -> ServiceProblem {
        ServiceProblem(.badRequest, detail: reason, field: field)
    }

    /// The most a query may hold, in bytes.
    public static let maximumQueryBytes = 65_536

    private static func audience(_ value: JSONValue?) throws(ServiceProblem) -> Audience {
        guard let value else {
            throw Self.refusal(
                "audience",
                "a campaign needs an audience: {\"file\": PATH} under the server's campaign folder, "
                    + "{\"postgres\": {\"query\": SQL}} on the server's database, or a CSV body "
                    + "(Content-Type: text/csv) with the settings in the Salvo-Campaign header"
            )
        }
        if case .object = value, let postgres = value["postgres"] {
            guard value["file"] == nil else {
                throw Self.refusal("audience", "the audience is a file or a query, not both")
            }
            return try Self.postgresAudience(postgres)
        }
        guard case .object = value, case .string(let path)? = value["file"] else {
            throw Self.refusal(
                "audience",
                "the audience is {\"file\": PATH} or {\"postgres\": {\"query\": SQL}}, not \(Self.shown(value))"
            )
        }
        guard !path.isEmpty, path.utf8.count <= 4096, !path.utf8.contains(0) else {
            throw Self.refusal("audience.file", "the file's path is 1 to 4096 bytes")
        }
        return .file(path)
    }

    /// `{"query": SQL, "column": NAME}`: the query's text only; the database is the server's.
    private static func postgresAudience(_ value: JSONValue) throws(ServiceProblem) -> Audience {
        guard case .object(let members) = value else {
            throw Self.refusal(
                "audience.postgres",
                "audience.postgres is an object {\"query\": SQL, \"column\": NAME}, not \(value.kindName)"
            )
        }
        for member in members where member.key != "query" && member.key != "column" {
            throw Self.refusal(
                "audience.postgres.\(member.key)",
                "audience.postgres takes query and column only: the database, its user and password are the server's "
                    + "(salvo serve --campaign-postgres)"
            )
        }
        guard let query = value["query"] else {
            throw Self.refusal(
                "audience.postgres.query",
                "audience.postgres needs the query whose rows are the audience"
            )
        }
        guard case .string(let text) = query else {
            throw Self.refusal("audience.postgres.query", "the query is a string, not \(query.kindName)")
        }
        guard !text.allSatisfy(\.isWhitespace), text.utf8.count <= Self.maximumQueryBytes, !text.utf8.contains(0) else {
            throw Self.refusal(
                "audience.postgres.query",
                "the query is 1 to \(Self.maximumQueryBytes) bytes, not blank, without a NUL character"
            )
        }
        if let column = value["column"] {
            guard case .string(let name) = column, !name.isEmpty, name.utf8.count <= 200 else {
                throw Self.refusal("audience.postgres.column", "the token column's name is a string of 1 to 200 bytes")
            }
        }
        return .postgres(query: text)
    }

    private static func string(_ value: JSONValue, _ field: String) throws(ServiceProblem) -> String? {
        guard let member = value[field] else { return nil }
        guard case .string(let text) = member else {
            throw Self.refusal(field, "\(field) must be a string, not \(member.kindName)")
        }
        return text
    }

    /// RFC 3339 (`2026-12-01T09:00:00Z`, `…T10:00:00.250+01:00`) as milliseconds since 1970; nil for anything
    /// else, a date alone or a time without its offset included.
    static func time(_ text: String) -> Int64? {
        let bytes = Array(text.utf8)
        // The date, the T, the time with seconds: `UnixTime.parse` reads them; the offset is required here.
        guard bytes.count >= 20, bytes.count <= 40, bytes[10] == UInt8(ascii: "T") || bytes[10] == UInt8(ascii: "t"),
            bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":"),
            let last = bytes.last,
            last == UInt8(ascii: "Z") || last == UInt8(ascii: "z") || bytes[bytes.count - 6] == UInt8(ascii: "+")
                || bytes[bytes.count - 6] == UInt8(ascii: "-")
        else { return nil }
        guard let seconds = UnixTime.parse(text) else { return nil }
        var milliseconds: Int64 = 0
        if bytes.count > 19, bytes[19] == UInt8(ascii: ".") {
            var index = 20
            var scale: Int64 = 100
            while index < bytes.count, bytes[index] >= 0x30, bytes[index] <= 0x39 {
                milliseconds += Int64(bytes[index] - 0x30) * scale
                scale /= 10
                index += 1
            }
        }
        guard seconds > -62_135_596_800, seconds < 253_402_300_800 else { return nil }
        return seconds * 1000 + milliseconds
    }

    /// Milliseconds since 1970 as RFC 3339 in UTC, with milliseconds.
    public static func timeText(_ milliseconds: Int64) -> String {
        let seconds = milliseconds >= 0 ? milliseconds / 1000 : (milliseconds - 999) / 1000
        let fraction = milliseconds - seconds * 1000
        let digits = String(fraction)
        return String(UnixTime.iso8601(seconds).dropLast()) + "." + String(repeating: "0", count: 3 - digits.count)
            + digits + "Z"
    }

    static func shown(_ text: String) -> String {
        text.count > 80 ? "\"\(text.prefix(77))...\"" : "\"\(text)\""
    }

    static func shown(_ value: JSONValue) -> String {
        Self.shown(String(decoding: value.compactBytes, as: UTF8.self))
    }
}
