import APNSWire

/// A request's notifications, read and checked: each one accepted (made into a `ServiceNotification`) or refused
/// with the field and the reason, so that one bad notification never costs the rest of its batch. A value with no
/// I/O: the store's templates come in as a lookup.
public struct NotificationBatch: Sendable {
    /// One notification of the request, by its index in `notifications`.
    public enum Item: Sendable {
        /// Accepted: `accepted[index]`.
        case accepted(index: Int)
        case refused(FieldError)
    }

    public private(set) var items: [Item]

    /// The accepted notifications, in the request's order (each once: the items name them by place).
    public private(set) var accepted: [ServiceNotification]

    public var refusedCount: Int { self.items.count - self.accepted.count }

    public var refusals: [FieldError] {
        self.items.compactMap { if case .refused(let error) = $0 { error } else { nil } }
    }

    /// The most notifications one request may carry.
    public static let maximumNotifications = 1000

    /// What the caller may leave out.
    public struct Defaults: Sendable {
        /// The topic of a notification that names none (`serve --topic`).
        public var topic: String?

        public init(topic: String? = nil) { self.topic = topic }
    }

    /// Reads `body`: a JSON object whose `notifications` is an array of 1 to `maximumNotifications` objects.
    ///
    /// - Parameters:
    ///   - templates: the stored template of a name, or nil.
    ///   - makeID: the id of the next accepted notification.
    /// - Throws: `ServiceProblem` (400) when the body as a whole is not a batch.
    public static func read(
        _ body: [UInt8],
        defaults: Defaults,
        templates: (String) -> ServiceTemplate?,
        makeID: () -> String
    ) throws(ServiceProblem) -> NotificationBatch {
        // Payloads are read from their compact bytes, each distinct one once (a request's notifications mostly share
        // one). A body that fails so (a key repeated in a payload, or any other fault) is read again with every value
        // built, and gets exactly the answer it always got.
        let results: [Result<(DeviceToken, [UInt8], APNSRequestHeaders, Bool), Refusal>]
        let shared = try? Self.results(body, defaults: defaults, templates: templates, buildPayloads: false)
        if let shared {
            results = shared
        } else {
            results = try Self.results(body, defaults: defaults, templates: templates, buildPayloads: true) ?? []
        }
        var items: [Item] = []
        var accepted: [ServiceNotification] = []
        items.reserveCapacity(results.count)
        accepted.reserveCapacity(results.count)
        for (index, result) in results.enumerated() {
            switch result {
            case .success(let (token, payload, headers, webhook)):
                var headers = headers
                let id = makeID()
                if headers.id == nil { headers.id = id }
                items.append(.accepted(index: accepted.count))
                accepted.append(
                    ServiceNotification(id: id, token: token, payload: payload, headers: headers, webhook: webhook)
                )
            case .failure(let error):
                let field = error.field.isEmpty ? "notifications[\(index)]" : "notifications[\(index)].\(error.field)"
                items.append(.refused(FieldError(field: field, reason: error.reason)))
            }
        }
        return NotificationBatch(items: items, accepted: accepted)
    }

    /// Each notification of `body` read, accepted or refused, before any is given an id.
    /// - Parameter buildPayloads: whether the parser builds each payload's value with the body's; else each is
    ///   read from its compact bytes, and nil is returned when one does not read so.
    private static func results(
        _ body: [UInt8],
        defaults: Defaults,
        templates: (String) -> ServiceTemplate?,
        buildPayloads: Bool
    ) throws(ServiceProblem) -> [Result<(DeviceToken, [UInt8], APNSRequestHeaders, Bool), Refusal>]? {
        let value: JSONValue
        let compact: [UInt8]
        // Each payload's compact bytes, cut from the body's (a payload is not written out again).
        var spans: ArraySlice<Range<Int>>
        do {
            let parsed = try JSONValue.parse(
                body,
                spansAt: ["notifications", "*", "payload"],
                valuesAtSpans: buildPayloads
            )
            value = parsed.value
            compact = parsed.compact
            spans = parsed.spans[...]
        } catch {
            throw ServiceProblem(.badJSON, detail: "the body is not JSON: \(error.message)")
        }
        guard case .object = value else {
            throw ServiceProblem(.badRequest, detail: "the body must be a JSON object, not \(value.kindName)")
        }
        guard let list = value["notifications"] else {
            throw ServiceProblem(.badRequest, detail: "the body has no notifications array", field: "notifications")
        }
        guard case .array(let notifications) = list else {
            throw ServiceProblem(
                .badRequest,
                detail: "notifications must be an array, not \(list.kindName)",
                field: "notifications"
            )
        }
        guard (1...Self.maximumNotifications).contains(notifications.count) else {
            throw ServiceProblem(
                .badRequest,
                detail: "notifications holds \(notifications.count); a request takes 1 to \(Self.maximumNotifications)",
                field: "notifications"
            )
        }
        var results: [Result<(DeviceToken, [UInt8], APNSRequestHeaders, Bool), Refusal>] = []
        results.reserveCapacity(notifications.count)
        var checks = SharedChecks()
        for notification in notifications {
            var members = Members(notification)
            // The parser took a span for each element that is an object with a payload, in order.
            var payloadBytes: ArraySlice<UInt8>?
            var sameAsLast = false
            if case .object = notification, members.payload != nil, let span = spans.popFirst() {
                let bytes = compact[span]
                payloadBytes = bytes
                // The same bytes as the last payload accepted: the same value, checked already.
                sameAsLast = members.template == nil && checks.payload?.elementsEqual(bytes) == true
                if !buildPayloads, !sameAsLast {
                    guard let read = try? JSONValue.parse(Array(bytes)).value else { return nil }
                    members.payload = read
                }
            }
            results.append(
                Self.notification(
                    notification,
                    members,
                    payload: payloadBytes,
                    sameAsLast: sameAsLast,
                    defaults: defaults,
                    templates: templates,
                    checks: &checks
                )
            )
        }
        return results
    }

    /// A refusal naming the field within its notification (`token`, `payload`, …).
    private struct Refusal: Error {
        var field: String
        var reason: String

        init(_ field: String, _ reason: String) {
            self.field = field
            self.reason = reason
        }
    }

    /// A notification object's members by name, read in one pass (the first of a repeated name, as
    /// `JSONValue`'s subscript reads: the parser refuses repeats anyway).
    private struct Members {
        var token: JSONValue?
        var pushType: JSONValue?
        var payload: JSONValue?
        var template: JSONValue?
        var fields: JSONValue?
        var priority: JSONValue?
        var topic: JSONValue?
        var collapseID: JSONValue?
        var apnsID: JSONValue?
        var expiration: JSONValue?
        var webhook: JSONValue?

        init(_ value: JSONValue) {
            guard case .object(let members) = value else { return }
            for member in members {
                switch member.key {
                case "token": if self.token == nil { self.token = member.value }
                case "payload": if self.payload == nil { self.payload = member.value }
                case "push_type": if self.pushType == nil { self.pushType = member.value }
                case "template": if self.template == nil { self.template = member.value }
                case "fields": if self.fields == nil { self.fields = member.value }
                case "priority": if self.priority == nil { self.priority = member.value }
                case "topic": if self.topic == nil { self.topic = member.value }
                case "collapse_id": if self.collapseID == nil { self.collapseID = member.value }
                case "apns_id": if self.apnsID == nil { self.apnsID = member.value }
                case "expiration": if self.expiration == nil { self.expiration = member.value }
                case "webhook": if self.webhook == nil { self.webhook = member.value }
                default: break
                }
            }
        }
    }

    /// The last topic, push type and payload checked within a request, and what the checks found: a request's
    /// notifications mostly share them, and each is checked once.
    private struct SharedChecks {
        var topic: (topic: String, problem: String?)?
        /// The last payload accepted: the same bytes are the same value, checked already, and share one array.
        var payload: [UInt8]?
        var pushType: (pushType: APNSPushType, topic: String?, priority: NotificationPriority?, problem: String?)?

        mutating func topicProblem(_ topic: String) -> String? {
            if let known = self.topic, known.topic == topic { return known.problem }
            let problem = APNSHeaderValueRules.topicProblem(topic)
            self.topic = (topic, problem)
            return problem
        }

        mutating func pushTypeProblem(
            _ pushType: APNSPushType,
            topic: String?,
            priority: NotificationPriority?
        ) -> String? {
            if let known = self.pushType, known.pushType == pushType, known.topic == topic,
                known.priority == priority
            {
                return known.problem
            }
            let problem = pushType.problem(
                topic: topic,
                priority: priority,
                priorityIsDefault: priority == nil,
                naming: .headers
            )?.message
            self.pushType = (pushType, topic, priority, problem)
            return problem
        }
    }

    private static func notification(
        _ value: JSONValue,
        _ members: Members,
        payload payloadBytes: ArraySlice<UInt8>?,
        sameAsLast: Bool,
        defaults: Defaults,
        templates: (String) -> ServiceTemplate?,
        checks: inout SharedChecks
    ) -> Result<(DeviceToken, [UInt8], APNSRequestHeaders, Bool), Refusal> {
        Result { () throws(Refusal) in
            guard case .object = value else {
                throw Refusal("", "a notification must be a JSON object, not \(value.kindName)")
            }
            let token = try Self.token(members.token)
            let pushType = try Self.pushType(members.pushType)
            let payload: [UInt8]
            if sameAsLast, let last = checks.payload {
                payload = last
            } else {
                payload = try Self.payload(members, compact: payloadBytes, templates: templates)
                if payloadBytes != nil { checks.payload = payload }
            }
            let priority = try Self.priority(members.priority)
            let topic = try Self.string(members.topic, "topic") ?? defaults.topic
            if let topic, let problem = checks.topicProblem(topic) { throw Refusal("topic", problem) }
            let collapseID = try Self.string(members.collapseID, "collapse_id")
            if let collapseID, let problem = APNSHeaderValueRules.collapseIDProblem(collapseID) {
                throw Refusal("collapse_id", problem)
            }
            let id = try Self.string(members.apnsID, "apns_id")
            if let id, !APNSRequestHeaders.isCanonicalUUID(id) {
                throw Refusal("apns_id", "apns_id must be a lowercase UUID (8-4-4-4-12 hex digits), not \(id)")
            }
            let expiration = try Self.expiration(members.expiration)
            let webhook = try Self.webhook(members.webhook)
            if let problem = checks.pushTypeProblem(pushType, topic: topic, priority: priority) {
                throw Refusal(priority != nil ? "priority" : "topic", problem)
            }
            let limit = pushType.payloadLimit
            if payload.count > limit.bytes {
                throw Refusal(
                    "payload",
                    "the payload is \(payload.count) bytes; \(limit.name) allows at most \(limit.bytes)"
                )
            }
            do {
                let headers = try APNSRequestHeaders(
                    pushType: pushType,
                    id: id,
                    expiration: expiration,
                    priority: priority,
                    topic: topic,
                    collapseID: collapseID
                )
                return (token, payload, headers, webhook)
            } catch {
                throw Refusal("", "the headers would be refused: \(error)")
            }
        }
    }

    private static func token(_ value: JSONValue?) throws(Refusal) -> DeviceToken {
        guard let value else { throw Refusal("token", "a notification needs a token") }
        guard case .string(let text) = value else {
            throw Refusal("token", "the token must be a string of 64 hex digits, not \(value.kindName)")
        }
        do {
            return try DeviceToken(hex: text)
        } catch {
            throw Refusal("token", "\(error): \(Self.shown(text))")
        }
    }

    private static func pushType(_ value: JSONValue?) throws(Refusal) -> APNSPushType {
        guard let text = try Self.string(value, "push_type") else { return .alert }
        let pushType = APNSPushType(rawValue: text)
        guard APNSPushType.known.contains(pushType) else {
            let known = APNSPushType.known.map(\.rawValue).sorted().joined(separator: ", ")
            throw Refusal("push_type", "unknown push type \(Self.shown(text)); known: \(known)")
        }
        return pushType
    }

    /// - Parameter compact: the payload's compact bytes, when the parser cut them from the body's.
    private static func payload(
        _ members: Members,
        compact: ArraySlice<UInt8>?,
        templates: (String) -> ServiceTemplate?
    ) throws(Refusal) -> [UInt8] {
        let payload = members.payload
        let template = members.template
        switch (payload, template) {
        case (nil, nil):
            throw Refusal("payload", "a notification needs a payload, or a template and its fields")
        case (.some, .some):
            throw Refusal("template", "a notification takes a payload or a template, not both")
        case (let payload?, nil):
            guard case .object = payload else {
                throw Refusal("payload", "the payload must be a JSON object, not \(payload.kindName)")
            }
            do {
                if let compact { return try Payload(value: payload, compact: Array(compact)).bytes }
                return try Payload(value: payload).bytes
            } catch {
                throw Refusal("payload", error.message)
            }
        case (nil, let template?):
            guard case .string(let name) = template else {
                throw Refusal("template", "the template must be a name, not \(template.kindName)")
            }
            guard let stored = templates(name) else {
                throw Refusal("template", "no template named \(Self.shown(name))")
            }
            var fields: [String: String] = [:]
            switch members.fields {
            case nil: break
            case .object(let members)?:
                for member in members {
                    guard case .string(let text) = member.value else {
                        throw Refusal("fields.\(member.key)", "a field must be a string, not \(member.value.kindName)")
                    }
                    fields[member.key] = text
                }
            case let other?:
                throw Refusal("fields", "fields must be an object of strings, not \(other.kindName)")
            }
            switch stored.render(fields) {
            case .success(let bytes): return bytes
            case .failure(let error): throw Refusal(error.field.map { "fields.\($0)" } ?? "fields", error.reason)
            }
        }
    }

    private static func priority(_ value: JSONValue?) throws(Refusal) -> NotificationPriority? {
        guard let value else { return nil }
        guard case .number(let literal) = value, let number = UInt8(literal), [1, 5, 10].contains(number) else {
            throw Refusal("priority", "the priority is 10, 5 or 1, not \(Self.shown(value))")
        }
        return NotificationPriority(rawValue: number)
    }

    private static func expiration(_ value: JSONValue?) throws(Refusal) -> UInt32? {
        guard let value else { return nil }
        guard case .number(let literal) = value, let seconds = UInt32(literal) else {
            throw Refusal(
                "expiration",
                "the expiration is UNIX seconds, a whole number from 0 to \(UInt32.max), not \(Self.shown(value))"
            )
        }
        return seconds
    }

    /// `webhook`: true for the final outcome as a webhook event.
    private static func webhook(_ value: JSONValue?) throws(Refusal) -> Bool {
        guard let value else { return false }
        guard case .bool(let flag) = value else {
            throw Refusal("webhook", "webhook must be true or false, not \(value.kindName)")
        }
        return flag
    }

    private static func string(_ value: JSONValue?, _ field: String) throws(Refusal) -> String? {
        guard let value else { return nil }
        guard case .string(let text) = value else {
            throw Refusal(field, "\(field) must be a string, not \(value.kindName)")
        }
        return text
    }

    /// A value as a refusal quotes it: cut to 80 characters.
    static func shown(_ text: String) -> String {
        text.count > 80 ? "\"\(text.prefix(77))...\"" : "\"\(text)\""
    }

    static func shown(_ value: JSONValue) -> String {
        Self.shown(String(decoding: value.compactBytes, as: UTF8.self))
    }
}

/// A field of a request and why it is refused (`notifications[3].token`, "…").
public struct FieldError: Error, Hashable, Sendable {
    public var field: String
    public var reason: String

    public init(field: String, reason: String) {
        self.field = field
        self.reason = reason
    }
}
