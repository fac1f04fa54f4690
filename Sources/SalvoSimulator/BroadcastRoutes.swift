import APNSWire
import Foundation
import NIOCore

/// An answer of the channel management or broadcast service: status, headers (`apns-request-id` always), body.
struct BroadcastResponse: Sendable, Equatable {
    var status: Int
    var headers: [(name: String, value: String)]
    var body: [UInt8]

    static func == (lhs: BroadcastResponse, rhs: BroadcastResponse) -> Bool {
        lhs.status == rhs.status && lhs.body == rhs.body
            && lhs.headers.map { $0.name + ":" + $0.value } == rhs.headers.map { $0.name + ":" + $0.value }
    }

    /// The header block: `:status` and every header as HPACK literals without indexing (RFC 7541 §6.2.2), so the
    /// client's decoder table is never touched, as `HTTP2FrameWriter.responseHeaders` writes device answers.
    func headerBlock(allocator: ByteBufferAllocator) -> ByteBuffer {
        var block = allocator.buffer(capacity: 128)
        Self.literal(":status", String(self.status), into: &block)
        for header in self.headers { Self.literal(header.name, header.value, into: &block) }
        return block
    }

    private static func literal(_ name: String, _ value: String, into block: inout ByteBuffer) {
        block.writeInteger(UInt8(0))
        Self.string(name, into: &block)
        Self.string(value, into: &block)
    }

    /// A string literal without Huffman coding: its length as an HPACK integer with a 7-bit prefix, then its bytes.
    private static func string(_ text: String, into block: inout ByteBuffer) {
        var length = text.utf8.count
        if length < 127 {
            block.writeInteger(UInt8(length))
        } else {
            block.writeInteger(UInt8(127))
            length -= 127
            while length >= 128 {
                block.writeInteger(UInt8(length & 0x7F | 0x80))
                length >>= 7
            }
            block.writeInteger(UInt8(length))
        }
        block.writeString(text)
    }
}

/// The requests the simulator's HTTP/2 handler passes on instead of checking them as device pushes: on the channel
/// management port every request, on the push port `POST /4/broadcasts/apps/<app>`. Checks them
/// (`ChannelRequestCheck`, `BroadcastRequestCheck`), carries them out on the `ChannelRegistry`, and answers.
struct BroadcastRoutes: Sendable {
    let registry: ChannelRegistry
    /// True on the channel management port.
    let management: Bool

    /// Whether a request for `path` is this service's.
    func takes(path: String?) -> Bool {
        self.management || path?.hasPrefix("/4/broadcasts/") == true
    }

    func answer(
        method: String?,
        path: String?,
        fields: [(name: String, value: String)],
        credentials: HTTP2RequestCheck.Credentials,
        body: ByteBuffer,
        bodyBytes: Int
    ) -> BroadcastResponse {
        // `apns-request-id` is echoed on every answer; APNs makes one when the request has none (or a malformed one,
        // which is refused).
        var requestID = UUID().uuidString.lowercased()
        var refusal: APNSReason?
        if let given = fields.first(where: { $0.name == "apns-request-id" })?.value {
            if APNSRequestHeaders.isCanonicalUUID(given) {
                requestID = given
            } else {
                refusal = .badMessageId
            }
        }
        let bytes = Array(body.readableBytesView)
        let response: Result<BroadcastResponse, APNSReason>
        if let refusal {
            response = .failure(refusal)
        } else if self.management {
            response = self.manage(
                method: method,
                path: path,
                fields: fields,
                credentials: credentials,
                body: bytes,
                bodyBytes: bodyBytes
            )
        } else {
            response = self.broadcast(
                method: method,
                path: path,
                fields: fields,
                credentials: credentials,
                payload: bytes,
                payloadBytes: bodyBytes
            )
        }
        switch response {
        case .success(var answer):
            answer.headers.insert(("apns-request-id", requestID), at: 0)
            return answer
        case .failure(let reason):
            self.registry.countRefusal(reason, broadcast: !self.management)
            return BroadcastResponse(
                status: BroadcastRules.status(of: reason),
                headers: [("apns-request-id", requestID), ("content-type", "application/json")],
                body: APNSErrorBody(reason: reason).jsonBytes
            )
        }
    }

    private func manage(
        method: String?,
        path: String?,
        fields: [(name: String, value: String)],
        credentials: HTTP2RequestCheck.Credentials,
        body: [UInt8],
        bodyBytes: Int
    ) -> Result<BroadcastResponse, APNSReason> {
        let checked = ChannelRequestCheck.check(
            method: method,
            path: path,
            fields: fields,
            credentials: credentials,
            enabledApps: self.registry.configuration.enabledApps,
            body: body,
            bodyBytes: bodyBytes
        )
        return checked.flatMap { self.registry.perform($0) }.map { managed in
            switch managed {
            case .created(let id):
                return BroadcastResponse(status: 201, headers: [("apns-channel-id", id)], body: [])
            case .read(let policy):
                let json = JSONValue.object([
                    JSONMember("message-storage-policy", .int(policy.rawValue)),
                    JSONMember("push-type", .string(BroadcastRules.channelPushType)),
                ])
                return BroadcastResponse(
                    status: 200,
                    headers: [("content-type", "application/json")],
                    body: json.compactBytes
                )
            case .deleted:
                return BroadcastResponse(status: 204, headers: [], body: [])
            case .listed(let ids):
                let json = JSONValue.object([JSONMember("channels", .array(ids.map { .string($0) }))])
                return BroadcastResponse(
                    status: 200,
                    headers: [("content-type", "application/json")],
                    body: json.compactBytes
                )
            }
        }
    }

    private func broadcast(
        method: String?,
        path: String?,
        fields: [(name: String, value: String)],
        credentials: HTTP2RequestCheck.Credentials,
        payload: [UInt8],
        payloadBytes: Int
    ) -> Result<BroadcastResponse, APNSReason> {
        let registry = self.registry
        let checked = BroadcastRequestCheck.check(
            method: method,
            path: path,
            fields: fields,
            credentials: credentials,
            enabledApps: registry.configuration.enabledApps,
            policyOf: { registry.policy(of: $0, app: $1) },
            payload: payload,
            payloadBytes: payloadBytes
        )
        return checked.flatMap { registry.accept($0) }.map { _ in
            // A server-made id to quote to support; on broadcasts it is given in every environment.
            BroadcastResponse(status: 200, headers: [("apns-unique-id", UUID().uuidString.lowercased())], body: [])
        }
    }
}
