import APNSWire
import SalvoTestTraits
import Testing

/// Every push type Apple lists, its topic and its priorities, as `APNSPushType+Rules` holds them: one case per push
/// type, each checked the way `send`, `check`, the HTTP/2 job and the simulator check it.
@Suite(.tags(.pure), .runs(.pure)) struct PushTypeRuleTests {
    struct Rule: Sendable, CustomTestStringConvertible {
        var type: APNSPushType
        /// What the topic ends with after the bundle id; nil: the bundle id itself (or, for mdm, the certificate's UID).
        var suffix: String?
        var allowed: [NotificationPriority?]
        var refused: [NotificationPriority?]
        var budgeted: [NotificationPriority?] = []

        var testDescription: String { self.type.rawValue }
    }

    static let app = "com.example.app"

    // Apple, "Sending notification requests to APNs" (the apns-push-type list and apns-priority); ActivityKit for
    // liveactivity (5 or 10, 10 budgeted); "Creating a Push to Talk app" (10); WidgetKit for widgets and controls.
    static let rules: [Rule] = [
        Rule(type: .alert, suffix: nil, allowed: [nil, .immediate, .powerConsiderate, .low], refused: []),
        // "Always use priority 5. Using priority 10 is an error."; an omitted priority is 10.
        Rule(type: .background, suffix: nil, allowed: [.powerConsiderate, .low], refused: [nil, .immediate]),
        Rule(
            type: .location,
            suffix: ".location-query",
            allowed: [nil, .immediate, .powerConsiderate],
            refused: [.low]
        ),
        Rule(type: .voip, suffix: ".voip", allowed: [nil, .immediate, .powerConsiderate, .low], refused: []),
        Rule(
            type: .complication,
            suffix: ".complication",
            allowed: [nil, .immediate, .powerConsiderate, .low],
            refused: []
        ),
        Rule(
            type: .fileProvider,
            suffix: ".pushkit.fileprovider",
            allowed: [nil, .immediate, .powerConsiderate, .low],
            refused: []
        ),
        Rule(type: .mdm, suffix: nil, allowed: [nil, .immediate, .powerConsiderate, .low], refused: []),
        Rule(
            type: .liveActivity,
            suffix: ".push-type.liveactivity",
            allowed: [nil, .immediate, .powerConsiderate],
            refused: [.low],
            budgeted: [nil, .immediate]
        ),
        Rule(type: .pushToTalk, suffix: ".voip-ptt", allowed: [nil, .immediate], refused: [.powerConsiderate, .low]),
        Rule(
            type: .widgets,
            suffix: ".push-type.widgets",
            allowed: [nil, .immediate, .powerConsiderate, .low],
            refused: [],
            budgeted: [nil, .immediate, .powerConsiderate, .low]
        ),
        Rule(
            type: .controls,
            suffix: ".push-type.controls",
            allowed: [nil, .immediate, .powerConsiderate, .low],
            refused: []
        ),
    ]

    @Test func everyPushTypeAppleListsHasARule() {
        #expect(Set(Self.rules.map(\.type)) == APNSPushType.known)
        #expect(APNSPushType.known.count == 11)
    }

    @Test(arguments: Self.rules) func topicRule(_ rule: Rule) {
        let type = rule.type
        #expect(type.requiredTopicSuffix == rule.suffix)
        let priority = rule.allowed.first!
        let topic = Self.app + (rule.suffix ?? "")
        #expect(type.violation(topic: topic, priority: priority, bundleIdentifier: Self.app) == nil)
        #expect(type.problem(topic: topic, priority: priority, naming: .options) == nil)
        guard let suffix = rule.suffix else {
            if type != .mdm {
                // The bundle id itself; another push type's suffix is the wrong push type for that topic.
                let voip = type.problem(topic: Self.app + ".voip", priority: priority, naming: .options)
                #expect(voip == nil, "without the app, a bundle id may end like a suffix")
                #expect(
                    type.violation(topic: Self.app + ".voip", priority: priority, bundleIdentifier: Self.app)
                        == .invalidPushType
                )
            }
            return
        }
        // The bare bundle id is a topic the push type's tokens are not registered for.
        let problem = type.problem(topic: Self.app, priority: priority, naming: .options)
        #expect(problem?.reason == .deviceTokenNotForTopic)
        #expect(
            problem?.message
                == "--push-type \(type) needs a --topic ending in \(suffix) (<bundle id>\(suffix)), not \(Self.app): "
                + "APNs would answer DeviceTokenNotForTopic for every request"
        )
        let headers = type.problem(topic: Self.app, priority: priority, naming: .headers)
        #expect(headers?.message.hasPrefix("apns-push-type \(type) needs an apns-topic ending in \(suffix)") == true)
        // The push type's suffix on another app's topic is fine (the credentials decide about that app).
        #expect(type.problem(topic: "org.other" + suffix, priority: priority, naming: .options) == nil)
    }

    @Test(arguments: Self.rules) func priorityRule(_ rule: Rule) {
        let type = rule.type
        let topic = Self.app + (rule.suffix ?? "")
        for priority in rule.allowed {
            #expect(type.allows(priority), "\(String(describing: priority))")
            #expect(type.problem(topic: topic, priority: priority, naming: .headers) == nil)
        }
        for priority in rule.refused {
            #expect(!type.allows(priority), "\(String(describing: priority))")
            let problem = type.problem(
                topic: topic,
                priority: priority,
                priorityIsDefault: priority == nil,
                naming: .headers
            )
            #expect(problem?.reason == .badPriority)
            let allowed = type.allowedPriorities.map { String($0.rawValue) }.joined(separator: " or ")
            let value = (priority ?? .immediate).rawValue
            #expect(
                problem?.message
                    == "apns-push-type \(type) takes apns-priority \(allowed), not \(value)"
                    + (priority == nil ? " (the default)" : "") + ": APNs would answer BadPriority for every request"
            )
            // Without a topic (a certificate names it) the priority is still checked.
            #expect(type.problem(topic: nil, priority: priority, naming: .headers)?.reason == .badPriority)
        }
        // The default priority is one the push type takes; 1 is HTTP/2 only, and `--priority` takes 10 or 5.
        #expect(type.allows(type.defaultPriority))
        if let refused = rule.refused.compactMap({ $0 }).first(where: \.isValidForBinary) {
            let message = type.problem(topic: topic, priority: refused, naming: .options)?.message ?? ""
            #expect(!message.contains(" 1,") && !message.contains("or 1"), "\(message)")
        }
        for priority in [nil, NotificationPriority.immediate, .powerConsiderate, .low] {
            #expect(
                type.isBudgeted(at: priority) == rule.budgeted.contains(priority),
                "\(String(describing: priority))"
            )
        }
    }

    @Test func anUnknownPushTypeIsNamedWithTheKnownOnes() {
        let problem = APNSPushType(rawValue: "banner").problem(topic: Self.app, priority: nil, naming: .options)
        #expect(problem?.reason == nil)
        #expect(
            problem?.message.hasPrefix("--push-type banner is not one of APNs' push types (alert, background") == true
        )
    }
}
