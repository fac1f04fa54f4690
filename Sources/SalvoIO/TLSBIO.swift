internal import COpenSSL
import NIOCore

/// The custom BIO method: read = take from `TLSBIOBuffers.inbound` (or ask to retry when it is empty),
/// write = append to `TLSBIOBuffers.outbound` (always succeeds, so SSL_write never returns WANT_WRITE).
enum TLSBIO {
    // Created once per process and never freed; BIO_METHOD is immutable after setup.
    nonisolated(unsafe) private static let method: OpaquePointer = {
        let type = BIO_get_new_index() | BIO_TYPE_SOURCE_SINK
        let method = BIO_meth_new(type, "salvo-buffers")!
        _ = BIO_meth_set_write(method) { bio, data, length in
            guard let bio, let data, length > 0 else { return 0 }
            let buffers = TLSBIO.buffers(of: bio)
            CSalvoSSL_BIO_clear_retry_flags(bio)
            buffers.outbound.writeBytes(UnsafeRawBufferPointer(start: data, count: Int(length)))
            return length
        }
        _ = BIO_meth_set_read(method) { bio, data, length in
            guard let bio, let data, length > 0 else { return 0 }
            let buffers = TLSBIO.buffers(of: bio)
            CSalvoSSL_BIO_clear_retry_flags(bio)
            let count = min(Int(length), buffers.inboundRemaining)
            if count == 0 {
                // Nothing buffered yet: "try again" (WANT_READ), not end of file.
                CSalvoSSL_BIO_set_retry_read(bio)
                return -1
            }
            UnsafeMutableRawPointer(data).copyMemory(
                from: buffers.inbound.baseAddress! + buffers.inboundOffset,
                byteCount: count
            )
            buffers.inboundOffset += count
            return Int32(count)
        }
        _ = BIO_meth_set_ctrl(method) { _, command, _, _ in
            // Flushing is the connection's job (it sends `outbound` after each call); report success.
            command == BIO_CTRL_FLUSH ? 1 : 0
        }
        _ = BIO_meth_set_create(method) { bio in
            BIO_set_init(bio, 1)
            return 1
        }
        _ = BIO_meth_set_destroy(method) { _ in 1 }
        return method
    }()

    private static func buffers(of bio: OpaquePointer) -> TLSBIOBuffers {
        Unmanaged<TLSBIOBuffers>.fromOpaque(BIO_get_data(bio)!).takeUnretainedValue()
    }

    /// A BIO over `buffers`. The caller keeps `buffers` alive for as long as the BIO exists.
    static func make(_ buffers: TLSBIOBuffers) -> OpaquePointer? {
        guard let bio = BIO_new(method) else { return nil }
        BIO_set_data(bio, Unmanaged.passUnretained(buffers).toOpaque())
        return bio
    }
}
