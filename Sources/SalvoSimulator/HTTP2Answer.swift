import APNSWire

/// What the HTTP/2 endpoint answers a notification request: its status, `retry-after` and body (an APNs error
/// body, or nothing for 200). The `apns-id` is not part of it: it is echoed or made as the answer is written.
struct HTTP2Answer: Hashable, Sendable {
    var status: Int
    var retryAfter: Int?
    var body: [UInt8]

    /// 200, no body: the notification is accepted.
    static let accepted = HTTP2Answer(status: 200, retryAfter: nil, body: [])

    /// An error answer: the reason's status (400 for a reason without one) and its body.
    static func refused(_ reason: APNSReason, retryAfter: Int? = nil, timestamp: Int64? = nil) -> HTTP2Answer {
        HTTP2Answer(
            status: reason.status ?? 400,
            retryAfter: retryAfter,
            body: APNSErrorBody(reason: reason, timestamp: timestamp).jsonBytes
        )
    }
}
