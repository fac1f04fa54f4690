import APNSWire
import SalvoTestTraits
import Testing

@Suite(.tags(.pure), .runs(.pure)) struct HTTP2ModelTests {
    @Test func headersAreWrittenInOrder() throws {
        let headers = try APNSRequestHeaders(
            pushType: .alert,
            id: "123e4567-e89b-12d3-a456-426614174000",
            expiration: 0,
            priority: .powerConsiderate,
            topic: "com.example.app",
            collapseID: "c1"
        )
        let fields = headers.fields(authorization: "bearer abc")
        #expect(
            fields.map(\.name) == [
                "authorization", "apns-push-type", "apns-id", "apns-expiration", "apns-priority", "apns-topic",
                "apns-collapse-id",
            ]
        )
        #expect(
            fields.map(\.value) == [
                "bearer abc", "alert", "123e4567-e89b-12d3-a456-426614174000", "0", "5", "com.example.app", "c1",
            ]
        )
        // The server side reads back what the client wrote.
        #expect(try APNSRequestHeaders(fields: fields) == headers)
    }

    @Test func collapseIDLimitIsExact() throws {
        _ = try APNSRequestHeaders(collapseID: String(repeating: "c", count: 64))
        #expect(throws: APNSReason.badCollapseId) {
            try APNSRequestHeaders(collapseID: String(repeating: "c", count: 65))
        }
        // Bytes, not characters: 22 three-byte characters are 66 bytes.
        #expect(throws: APNSReason.badCollapseId) {
            try APNSRequestHeaders(collapseID: String(repeating: "€", count: 22))
        }
    }

    @Test func serverSideValidationNamesTheReason() {
        let cases: [([(name: String, value: String)], APNSReason)] = [
            ([("apns-id", "123E4567-E89B-12D3-A456-426614174000")], .badMessageId),
            ([("apns-id", "not-a-uuid")], .badMessageId),
            ([("apns-expiration", "soon")], .badExpirationDate),
            ([("apns-priority", "7")], .badPriority),
            ([("apns-push-type", "carrier-pigeon")], .invalidPushType),
            ([("apns-topic", "a"), ("APNS-TOPIC", "b")], .duplicateHeaders),
            ([("apns-collapse-id", String(repeating: "x", count: 65))], .badCollapseId),
        ]
        for (fields, reason) in cases {
            #expect(throws: reason, "\(fields)") { try APNSRequestHeaders(fields: fields) }
        }
    }

    @Test func reasonsKnowTheirStatusAndUnknownOnesAreKept() {
        #expect(APNSReason.badDeviceToken.status == 400)
        #expect(APNSReason.expiredProviderToken.status == 403)
        #expect(APNSReason.badPath.status == 404)
        #expect(APNSReason.methodNotAllowed.status == 405)
        #expect(APNSReason.unregistered.status == 410)
        #expect(APNSReason.payloadTooLarge.status == 413)
        #expect(APNSReason.tooManyRequests.status == 429)
        #expect(APNSReason.internalServerError.status == 500)
        #expect(APNSReason.shutdown.status == 503)
        #expect(APNSReason.known.count == 32)
        #expect(APNSReason.expiredToken.status == 410 && APNSReason.expiredToken.meansTheTokenIsGone)
        #expect(APNSReason.unrelatedKeyIdInToken.status == 403 && APNSReason.unrelatedKeyIdInToken.stopsTheJob)
        #expect(
            APNSReason.badEnvironmentKeyIdInToken.status == 403 && APNSReason.badEnvironmentKeyIdInToken.stopsTheJob
        )
        let novel = APNSReason(rawValue: "SomethingNew")
        #expect(novel.status == nil)
        #expect(novel.rawValue == "SomethingNew")
        #expect(APNSReason.tooManyRequests.isRetryable && !APNSReason.badDeviceToken.isRetryable)
        #expect(APNSReason.badCertificateEnvironment.stopsTheJob)
    }

    @Test func errorBodiesRoundTrip() throws {
        let gone = APNSErrorBody(reason: .unregistered, timestamp: 1_700_000_000_123)
        #expect(
            String(decoding: gone.jsonBytes, as: UTF8.self) == #"{"reason":"Unregistered","timestamp":1700000000123}"#
        )
        #expect(APNSErrorBody(jsonBytes: gone.jsonBytes) == gone)
        #expect(APNSErrorBody(jsonBytes: Array(#"{"reason":"Novel"}"#.utf8))?.reason.rawValue == "Novel")
        #expect(APNSErrorBody(jsonBytes: Array("nope".utf8)) == nil)
    }

    @Test func everyPushTypeNamesItsTopicSuffix() {
        let expected: [APNSPushType: String?] = [
            .alert: nil, .background: nil, .mdm: nil, .voip: ".voip", .complication: ".complication",
            .fileProvider: ".pushkit.fileprovider", .location: ".location-query",
            .liveActivity: ".push-type.liveactivity", .pushToTalk: ".voip-ptt", .widgets: ".push-type.widgets",
            .controls: ".push-type.controls",
        ]
        #expect(Set(expected.keys) == APNSPushType.known)
        for (type, suffix) in expected {
            #expect(type.requiredTopicSuffix == suffix, "\(type)")
        }
        #expect(APNSPushType(rawValue: "novel").requiredTopicSuffix == nil)
    }

    @Test func aTopicWithoutThePushTypesSuffixIsNotTheTokensTopic() {
        let app = "com.example.app"
        for (type, suffix) in APNSPushType.topicSuffixes {
            let priority = type.allowedPriorities.first
            #expect(type.violation(topic: app + suffix, priority: priority) == nil, "\(type)")
            #expect(type.violation(topic: app + suffix, priority: priority, bundleIdentifier: app) == nil, "\(type)")
            #expect(type.violation(topic: app, priority: priority) == .deviceTokenNotForTopic, "\(type)")
            #expect(
                type.violation(topic: app, priority: priority, bundleIdentifier: app) == .deviceTokenNotForTopic,
                "\(type)"
            )
            // The suffix alone is no topic.
            #expect(type.violation(topic: suffix, priority: priority) == .deviceTokenNotForTopic, "\(type)")
        }
        // Another push type's suffix: the topic is right, the push type is not.
        #expect(
            APNSPushType.alert.violation(topic: app + ".voip", priority: nil, bundleIdentifier: app) == .invalidPushType
        )
        #expect(
            APNSPushType.background.violation(topic: app + ".complication", priority: .low, bundleIdentifier: app)
                == .invalidPushType
        )
        #expect(
            APNSPushType.voip.violation(topic: app + ".voip-ptt", priority: nil, bundleIdentifier: app)
                == .invalidPushType
        )
        #expect(APNSPushType.alert.violation(topic: app, priority: nil, bundleIdentifier: app) == nil)
        // Without the app, an app whose bundle id ends like a suffix is not refused.
        #expect(APNSPushType.alert.violation(topic: "com.example.voip", priority: nil) == nil)
        // A topic of another app (the credentials decide about it) is judged by its suffix alone.
        #expect(APNSPushType.voip.violation(topic: "org.other.voip", priority: nil, bundleIdentifier: app) == nil)
        #expect(
            APNSPushType.voip.violation(topic: "com.example.apple", priority: nil, bundleIdentifier: app)
                == .deviceTokenNotForTopic
        )
        // MDM topics come from the MDM certificate; no topic (a certificate names it) skips the rule.
        #expect(
            APNSPushType.mdm.violation(topic: "com.apple.mgmt.External.1", priority: nil, bundleIdentifier: app) == nil
        )
        #expect(APNSPushType.voip.violation(topic: nil, priority: .immediate) == nil)
        // The topic is checked before the priority.
        #expect(APNSPushType.pushToTalk.violation(topic: app, priority: .low) == .deviceTokenNotForTopic)
    }

    @Test func priorityRulesFollowThePushType() {
        let app = "com.example.app"
        let cases: [(APNSPushType, [NotificationPriority?], [NotificationPriority?])] = [
            (.alert, [nil, .immediate, .powerConsiderate, .low], []),
            // "Always use priority 5. Using priority 10 is an error."; an omitted priority is 10.
            (.background, [.powerConsiderate, .low], [nil, .immediate]),
            (.location, [nil, .immediate, .powerConsiderate], [.low]),
            (.liveActivity, [nil, .immediate, .powerConsiderate], [.low]),
            (.pushToTalk, [nil, .immediate], [.powerConsiderate, .low]),
            (.voip, [nil, .immediate, .powerConsiderate, .low], []),
            (.widgets, [nil, .immediate, .powerConsiderate, .low], []),
        ]
        for (type, allowed, refused) in cases {
            let topic = app + (type.requiredTopicSuffix ?? "")
            for priority in allowed {
                #expect(type.allows(priority), "\(type) \(String(describing: priority))")
                #expect(type.violation(topic: topic, priority: priority) == nil, "\(type)")
            }
            for priority in refused {
                #expect(!type.allows(priority), "\(type) \(String(describing: priority))")
                #expect(type.violation(topic: topic, priority: priority) == .badPriority, "\(type)")
                #expect(type.violation(topic: nil, priority: priority) == .badPriority, "\(type)")
            }
        }
    }

    @Test func aTopicBelongsToTheAppItExtends() {
        let apps: Set = ["com.example.app", "com.example.other"]
        #expect(APNSPushType.bundleIdentifier(ofTopic: "com.example.app", among: apps) == "com.example.app")
        #expect(APNSPushType.bundleIdentifier(ofTopic: "com.example.other.voip", among: apps) == "com.example.other")
        #expect(
            APNSPushType.bundleIdentifier(ofTopic: "com.example.app.push-type.liveactivity", among: apps)
                == "com.example.app"
        )
        #expect(APNSPushType.bundleIdentifier(ofTopic: "com.example.app.unknown", among: apps) == nil)
        #expect(APNSPushType.bundleIdentifier(ofTopic: "com.example.third.voip", among: apps) == nil)
    }
}
