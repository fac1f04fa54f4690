import APNSWire
import NIOCore
import NIOHPACK

/// The parts of every request of a job that do not change per row: the pseudo-headers, the `apns-*` headers and
/// the payload, encoded once.
///
/// The payload is one `ByteBuffer` that every DATA frame of the job shares (a reference, never a copy per
/// request). Only `:path` and `authorization` differ between requests.
struct HTTP2RequestTemplate: Sendable {
    let authority: String
    /// `https`, or `http` in cleartext mode.
    let scheme: String
    let fields: [(name: String, value: String)]
    let payload: ByteBuffer
    /// The payload's length as text, made once.
    private let contentLength: String

    init(authority: String, scheme: String = "https", headers: APNSRequestHeaders, payload: Payload) {
        self.authority = authority
        self.scheme = scheme
        self.fields = headers.fields()
        var buffer = ByteBufferAllocator().buffer(capacity: payload.byteCount)
        buffer.writeBytes(payload.bytes)
        self.payload = buffer
        self.contentLength = String(buffer.readableBytes)
    }

    /// The header block of the request for `token`; pseudo-headers first, as HTTP/2 requires. `bodyLength`: the
    /// length of a row's own body (nil: `payload`'s). `rowHeaders`: the row's own fields, in place of the job's of
    /// the same name.
    func headers(
        token: DeviceToken,
        authorization: String?,
        bodyLength: Int? = nil,
        rowHeaders: HTTP2RowHeaders? = nil
    ) -> HPACKHeaders {
        var headers = HPACKHeaders()
        headers.reserveCapacity(5 + self.fields.count)
        headers.add(name: ":method", value: "POST")
        headers.add(name: ":scheme", value: self.scheme)
        // Never the same twice: kept out of the HPACK dynamic table, where each path would evict the entries that
        // make the other headers (the token above all) one byte each.
        headers.add(name: ":path", value: Self.path(for: token), indexing: .nonIndexable)
        headers.add(name: ":authority", value: self.authority)
        // Indexed: the same token rides every request for up to an hour, and the HPACK dynamic table turns its
        // ~200 bytes into one.
        if let authorization { headers.add(name: "authorization", value: authorization) }
        if let rowHeaders {
            for field in self.fields where !rowHeaders.sets(field.name) {
                headers.add(name: field.name, value: field.value)
            }
            // A row's own `apns-id` is never the same twice: kept out of the dynamic table, like `:path`.
            for field in rowHeaders.fields {
                headers.add(
                    name: field.name,
                    value: field.value,
                    indexing: field.name == "apns-id" ? .nonIndexable : .indexable
                )
            }
        } else {
            for field in self.fields { headers.add(name: field.name, value: field.value) }
        }
        headers.add(name: "content-length", value: bodyLength.map { String($0) } ?? self.contentLength)
        return headers
    }

    /// `/3/device/<64 hex digits>`, written into one string (no hex string to copy from).
    static func path(for token: DeviceToken) -> String {
        let prefix: StaticString = "/3/device/"
        let prefixLength = prefix.utf8CodeUnitCount
        return String(unsafeUninitializedCapacity: prefixLength + 2 * DeviceToken.byteCount) { out in
            out.baseAddress!.initialize(from: prefix.utf8Start, count: prefixLength)
            token.writeHex(to: out.baseAddress! + prefixLength)
            return prefixLength + 2 * DeviceToken.byteCount
        }
    }
}
