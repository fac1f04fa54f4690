import NIOCore

/// The buffers a TLS session's BIO reads from and writes to.
///
/// `inbound` is ciphertext received from the socket, lent for the duration of one `TLSSession` call;
/// `outbound` is the ciphertext buffer that SSL_write and the handshake append to directly (no BIO_s_mem
/// staging). Owned by one `TLSSession`; confined to that session's queue.
final class TLSBIOBuffers {
    var inbound = UnsafeRawBufferPointer(start: nil, count: 0)
    var inboundOffset = 0
    var outbound: ByteBuffer

    init(outboundCapacity: Int) {
        outbound = ByteBufferAllocator().buffer(capacity: outboundCapacity)
    }

    var inboundRemaining: Int { inbound.count - inboundOffset }
}
