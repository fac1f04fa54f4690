import APNSWire
import NIOCore
import NIOHPACK

/// The client's reading of an answer's header block (the `wire` engine's, and the fuzz target's over server bytes):
/// HPACK-decoded with one decoder per connection (its dynamic table follows every block the server sends), up to
/// `maximumHeaderList` bytes of headers, the `SETTINGS_MAX_HEADER_LIST_SIZE` the client announces, and the fields an
/// APNs answer carries picked out (`:status`, `apns-id`, `retry-after`). Other headers are read and dropped: a proxy
/// or gateway in front of the service may add large ones, and an answer is never thrown away for them.
///
/// A value confined to its connection.
public struct HTTP2AnswerDecoder {
    /// The header list size announced and decoded (RFC 9113 §6.5.2), in bytes: 256 KiB, far above the few hundred
    /// bytes APNs sends.
    public static let maximumHeaderList = 256 << 10

    /// What the client reads of an answer's headers.
    public struct Fields: Hashable, Sendable {
        public var status: Int?
        public var apnsID: String?
        /// `apns-unique-id`: what Apple's development environment adds to an accepted request, for its delivery log.
        public var apnsUniqueID: String?
        /// `Retry-After` in seconds.
        public var retryAfter: Int64?
    }

    private var decoder: HPACKDecoder

    public init(allocator: ByteBufferAllocator = ByteBufferAllocator()) {
        self.decoder = HPACKDecoder(
            allocator: allocator,
            maxDynamicTableSize: HPACKDecoder.maxDynamicTableSize,
            maxHeaderListSize: Self.maximumHeaderList
        )
    }

    /// Decodes `block` (a whole header block, as `HTTP2FrameReader` joins it). A block that does not decode is the
    /// connection's COMPRESSION_ERROR (RFC 9113 §4.3): the decoder's table can no longer be trusted.
    public mutating func decode(_ block: inout ByteBuffer) throws(HTTP2ConnectionError) -> Fields {
        let headers: HPACKHeaders
        do {
            headers = try self.decoder.decodeHeaders(from: &block)
        } catch {
            throw HTTP2ConnectionError(.compressionError, "a header block does not decode: \(error)")
        }
        var fields = Fields()
        for (name, value, _) in headers {
            switch name {
            case ":status": fields.status = Int(value)
            case "apns-id": fields.apnsID = value
            case "apns-unique-id": fields.apnsUniqueID = value
            case "retry-after": fields.retryAfter = Int64(value)
            default: break
            }
        }
        return fields
    }
}
