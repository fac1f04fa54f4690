import APNSWire
import SalvoRows
import SalvoService
import SalvoWebhooks

/// The API's JSON bodies for what the service answers (the shapes the OpenAPI document gives).
enum ServiceJSON {
    static func record(_ record: NotificationRecord) -> JSONValue {
        var members: [JSONMember] = [
            JSONMember("id", .string(record.id)),
            JSONMember("batch", .string(record.batch)),
            JSONMember("token", .string(record.token)),
            JSONMember("state", .string(record.state.description)),
            JSONMember("final", .bool(record.state.isFinal)),
        ]
        if let status = record.status { members.append(JSONMember("status", .int(status))) }
        if let reason = record.reason { members.append(JSONMember("reason", .string(reason))) }
        if let apnsID = record.apnsID { members.append(JSONMember("apns_id", .string(apnsID))) }
        if let unique = record.apnsUniqueID { members.append(JSONMember("apns_unique_id", .string(unique))) }
        if let since = record.unregisteredAt { members.append(JSONMember("unregistered_at", .int(Int(since)))) }
        members.append(JSONMember("accepted_at", .string(Self.time(record.acceptedAt))))
        if let sent = record.sentAt { members.append(JSONMember("sent_at", .string(Self.time(sent)))) }
        if let answered = record.answeredAt { members.append(JSONMember("answered_at", .string(Self.time(answered)))) }
        members.append(JSONMember("uncertain_resends", .int(record.uncertainResends)))
        return .object(members)
    }

    static func batch(_ id: String, _ records: [NotificationRecord]) -> JSONValue {
        var counts: [NotificationState: Int] = [:]
        for record in records { counts[record.state, default: 0] += 1 }
        return .object([
            JSONMember("batch", .string(id)),
            JSONMember("final", .bool(records.allSatisfy { $0.state.isFinal })),
            JSONMember(
                "counts",
                .object(NotificationState.allCases.map { JSONMember($0.description, .int(counts[$0] ?? 0)) })
            ),
            JSONMember("notifications", .array(records.map(Self.record))),
        ])
    }

    static func template(_ template: ServiceTemplate, withText: Bool) -> JSONValue {
        var members = [
            JSONMember("name", .string(template.name)),
            JSONMember("fields", .array(template.fields.map { .string($0) })),
        ]
        if withText, let value = try? JSONValue.parse(template.text).value {
            members.append(JSONMember("template", value))
        }
        return .object(members)
    }

    static func webhook(_ status: WebhookStatus) -> JSONValue {
        var members: [JSONMember] = [
            JSONMember("webhook", .string(status.webhook)),
            JSONMember("events", .array(status.events.map { .string($0.rawValue) })),
            JSONMember(
                "counts",
                .object([
                    JSONMember("pending", .int(status.counts.pending)),
                    JSONMember("delivered", .int(status.counts.delivered)),
                    JSONMember("dead", .int(status.counts.dead)),
                ])
            ),
            JSONMember("failures", .int(status.failures)),
            JSONMember("failed_attempts", .int(status.failedAttempts)),
        ]
        if let error = status.lastError { members.append(JSONMember("last_error", .string(error))) }
        if let next = status.nextAttemptAt { members.append(JSONMember("next_attempt_at", .string(Self.time(next)))) }
        return .object(members)
    }

    /// RFC 3339 in UTC with milliseconds: `2026-11-29T06:30:00.123Z`.
    static func time(_ milliseconds: Int64) -> String {
        let seconds = milliseconds >= 0 ? milliseconds / 1000 : (milliseconds - 999) / 1000
        let fraction = milliseconds - seconds * 1000
        let text = UnixTime.iso8601(seconds)
        let digits = String(fraction)
        return String(text.dropLast()) + "." + String(repeating: "0", count: 3 - digits.count) + digits + "Z"
    }
}
