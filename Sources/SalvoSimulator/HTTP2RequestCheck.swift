import APNSWire

/// The checks APNs makes on an HTTP/2 request, in its order, as a pure function: method, path, device token,
/// `apns-*` headers, credentials and topic, push type against topic and priority (`APNSPushType.violation`),
/// payload. The first failure is the answer.
///
/// Checks that need the token's registration (the plan's invalid tokens, tokens of another app, uninstalled
/// apps) come after these, in `HTTP2Answers.refusal(of:)`.
struct HTTP2RequestCheck {
    /// How the connection or request proves who sends.
    enum Credentials {
        /// A client certificate for this topic.
        case certificate(PeerTopic)
        /// A provider token, already verified (or refused).
        case token(Result<ProviderTokenVerifier.Accepted, APNSReason>)
        /// Neither.
        case none
    }

    struct Passed {
        var token: DeviceToken
        var headers: APNSRequestHeaders
        /// The topic the notification goes to (the certificate's when the request named none).
        var topic: String
    }

    static func check(
        method: String?,
        path: String?,
        fields: some Sequence<(name: String, value: String)>,
        credentials: Credentials,
        payloadBytes: Int
    ) -> Result<Passed, APNSReason> {
        guard method == "POST" else { return .failure(.methodNotAllowed) }
        guard var path else { return .failure(.badPath) }
        // Read from the path's bytes: no substring or copy of the token text per request.
        let parsed = path.withUTF8 { utf8 -> Result<DeviceToken, APNSReason> in
            let prefix = "/3/device/".utf8
            guard utf8.count >= prefix.count, utf8.prefix(prefix.count).elementsEqual(prefix) else {
                return .failure(.badPath)
            }
            let hex = UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(utf8)[prefix.count...])
            guard !hex.isEmpty else { return .failure(.missingDeviceToken) }
            guard hex.count == 2 * DeviceToken.byteCount, let token = try? DeviceToken(hexUTF8: hex) else {
                return .failure(.badDeviceToken)
            }
            return .success(token)
        }
        let token: DeviceToken
        switch parsed {
        case .success(let value): token = value
        case .failure(let reason): return .failure(reason)
        }
        let headers: APNSRequestHeaders
        do {
            headers = try APNSRequestHeaders(fields: fields)
        } catch {
            return .failure(error)
        }
        let topic: String
        // The app the topic belongs to, when the credentials say: the push type's suffix is checked against it.
        let app: String?
        switch credentials {
        case .none:
            return .failure(.missingProviderToken)
        case .certificate(let peer):
            guard let certificateTopic = peer.topic else { return .failure(.badCertificate) }
            if let named = headers.topic {
                guard PeerTopic.isBundleIdentifier(named) else { return .failure(.badTopic) }
                guard Self.certificate(for: certificateTopic, covers: named) else { return .failure(.topicDisallowed) }
                topic = named
            } else {
                topic = certificateTopic
            }
            app = certificateTopic
        case .token(let verdict):
            let accepted: ProviderTokenVerifier.Accepted
            switch verdict {
            case .success(let value): accepted = value
            case .failure(let reason): return .failure(reason)
            }
            guard let named = headers.topic else { return .failure(.missingTopic) }
            guard PeerTopic.isBundleIdentifier(named) else { return .failure(.badTopic) }
            // A team's key covers its apps and every push-type topic of them (`<app>.voip`, …).
            if accepted.topics.isEmpty {
                app = nil
            } else {
                guard let owner = APNSPushType.bundleIdentifier(ofTopic: named, among: accepted.topics) else {
                    return .failure(.topicDisallowed)
                }
                app = owner
            }
            topic = named
        }
        // The push type against the topic's suffix, then against the priority (omitted = 10).
        if let pushType = headers.pushType,
            let reason = pushType.violation(topic: topic, priority: headers.priority, bundleIdentifier: app)
        {
            return .failure(reason)
        }
        guard payloadBytes > 0 else { return .failure(.payloadEmpty) }
        let limit = (headers.pushType ?? .alert).payloadLimit
        guard payloadBytes <= limit.bytes else { return .failure(.payloadTooLarge) }
        return .success(Passed(token: token, headers: headers, topic: topic))
    }

    /// The suffixes of the topics a certificate covers besides its app's.
    private static let certificateSuffixes = [".voip", ".complication", ".pushkit.fileprovider"]

    /// A certificate covers its app and the app's VoIP, complication and file-provider topics.
    private static func certificate(for app: String, covers topic: String) -> Bool {
        if topic == app { return true }
        guard topic.utf8.starts(with: app.utf8) else { return false }
        let rest = topic.utf8.dropFirst(app.utf8.count)
        return Self.certificateSuffixes.contains { rest.elementsEqual($0.utf8) }
    }
}
