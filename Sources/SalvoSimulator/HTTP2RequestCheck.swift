import APNSWire

/// The checks APNs makes on an HTTP/2 request, in its order, as a pure function: method, path, device token,
/// `apns-*` headers, credentials and topic, push type and priority, payload. The first failure is the answer.
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
        payload: [UInt8],
        payloadBytes: Int? = nil
    ) -> Result<Passed, APNSReason> {
        guard method == "POST" else { return .failure(.methodNotAllowed) }
        guard let path, path.hasPrefix("/3/device/") else { return .failure(.badPath) }
        let hex = path.dropFirst("/3/device/".count)
        guard !hex.isEmpty else { return .failure(.missingDeviceToken) }
        guard hex.utf8.count == 2 * DeviceToken.byteCount, let token = try? DeviceToken(hex: String(hex)) else {
            return .failure(.badDeviceToken)
        }
        let headers: APNSRequestHeaders
        do {
            headers = try APNSRequestHeaders(fields: fields)
        } catch {
            return .failure(error)
        }
        let topic: String
        switch credentials {
        case .none:
            return .failure(.missingProviderToken)
        case .certificate(let peer):
            guard let certificateTopic = peer.topic else { return .failure(.badCertificate) }
            if let named = headers.topic {
                guard PeerTopic.isBundleIdentifier(named) else { return .failure(.badTopic) }
                // A certificate covers its app and the app's VoIP, complication and file-provider topics.
                let allowed = [
                    certificateTopic, certificateTopic + ".voip", certificateTopic + ".complication",
                    certificateTopic + ".pushkit.fileprovider",
                ]
                guard allowed.contains(named) else { return .failure(.topicDisallowed) }
                topic = named
            } else {
                topic = certificateTopic
            }
        case .token(let verdict):
            let accepted: ProviderTokenVerifier.Accepted
            switch verdict {
            case .success(let value): accepted = value
            case .failure(let reason): return .failure(reason)
            }
            guard let named = headers.topic else { return .failure(.missingTopic) }
            guard PeerTopic.isBundleIdentifier(named) else { return .failure(.badTopic) }
            guard accepted.topics.isEmpty || accepted.topics.contains(named) else { return .failure(.topicDisallowed) }
            topic = named
        }
        // Background notifications go at priority 5 (or 1); 10 is refused.
        if headers.pushType == .background && headers.priority == .immediate { return .failure(.badPriority) }
        guard !payload.isEmpty else { return .failure(.payloadEmpty) }
        let limit = (headers.pushType ?? .alert).payloadLimit
        guard payloadBytes ?? payload.count <= limit.bytes else { return .failure(.payloadTooLarge) }
        return .success(Passed(token: token, headers: headers, topic: topic))
    }
}
