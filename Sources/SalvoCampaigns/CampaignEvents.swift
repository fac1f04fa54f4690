import APNSWire
import SalvoService

/// The webhooks' side of the campaigns: where their events go, to which endpoints, and who to wake.
public struct CampaignWebhooks: Sendable {
    public var outbox: any WebhookOutbox
    public var routes: WebhookRoutes
    /// Called once events were put in the outbox.
    public var wake: @Sendable () -> Void

    public init(outbox: any WebhookOutbox, routes: WebhookRoutes, wake: @escaping @Sendable () -> Void) {
        self.outbox = outbox
        self.routes = routes
        self.wake = wake
    }
}

/// A campaign's webhook events, as values: its gone tokens and refusals read from its rejects file (`send
/// --rejects`' CSV, `file,line,token,status,reason`), and its changes of state. An event's id is made from what it is
/// about (`c:<campaign>:<line>:<kind>`), so that reading the same file again makes the same events.
enum CampaignEvents {
    /// The events of the rejects file's rows the push service refused (a status); the rows refused before sending
    /// (bad input, no status) make none.
    static func rejects(campaign: String, csv: String, at: Int64) -> [WebhookEvent] {
        var events: [WebhookEvent] = []
        for (index, line) in csv.split(separator: "\n", omittingEmptySubsequences: true).enumerated() {
            guard index > 0 else { continue }
            let fields = Self.fields(line)
            guard fields.count >= 5, let row = Int(fields[1]), let status = Int(fields[3]), status > 0 else {
                continue
            }
            let reason = fields[4]
            let kind = WebhookEvent.kindOfRefusal(status: status, reason: reason)
            events.append(
                WebhookEvent(
                    id: "c:\(campaign):\(row):\(kind.rawValue)",
                    kind: kind,
                    createdAt: at,
                    data: .object([
                        JSONMember("token", .string(fields[2])), JSONMember("campaign", .string(campaign)),
                        JSONMember("line", .int(row)), JSONMember("status", .int(status)),
                        JSONMember("reason", .string(reason)),
                    ])
                )
            )
        }
        return events
    }

    /// A campaign's new state.
    static func state(campaign: String, state: CampaignState, message: String?, at: Int64) -> WebhookEvent {
        var members = [JSONMember("campaign", .string(campaign)), JSONMember("state", .string(state.rawValue))]
        if let message { members.append(JSONMember("message", .string(message))) }
        return WebhookEvent(
            id: "c:\(campaign):state:\(state.rawValue):\(at)",
            kind: .campaign,
            createdAt: at,
            data: .object(members)
        )
    }

    /// One CSV line's fields: a field in double quotes may hold commas, and `""` for a quote.
    static func fields(_ line: Substring) -> [String] {
        var fields: [String] = []
        var field = ""
        var quoted = false
        var iterator = line.makeIterator()
        var pending: Character? = nil
        while let character = pending ?? iterator.next() {
            pending = nil
            if quoted {
                if character == "\"" {
                    let next = iterator.next()
                    if next == "\"" {
                        field.append("\"")
                    } else {
                        quoted = false
                        pending = next
                        if next == nil { break }
                    }
                } else {
                    field.append(character)
                }
            } else if character == "\"" && field.isEmpty {
                quoted = true
            } else if character == "," {
                fields.append(field)
                field = ""
            } else if character != "\r" {
                field.append(character)
            }
        }
        fields.append(field)
        return fields
    }
}
