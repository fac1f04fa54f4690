internal import COpenSSL
import NIOCore

/// SHA-256 over a stream of bytes (OpenSSL's EVP), for checking bulk transfers end to end: both sides
/// digest what they send and receive, and compare. Not thread-safe: use it on one queue.
public final class SHA256Stream {
    private let context: OpaquePointer
    /// Bytes digested so far.
    public private(set) var count = 0

    /// An empty digest.
    public init() {
        context = EVP_MD_CTX_new()!
        EVP_DigestInit_ex(context, EVP_sha256(), nil)
    }

    deinit {
        EVP_MD_CTX_free(context)
    }

    /// Adds `bytes` to the digest.
    public func update(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0 else { return }
        EVP_DigestUpdate(context, bytes.baseAddress, bytes.count)
        count += bytes.count
    }

    /// Adds the readable bytes of `buffer` (its reader index does not move).
    public func update(_ buffer: ByteBuffer) {
        buffer.withUnsafeReadableBytes { update($0) }
    }

    /// The digest of everything added, as lowercase hex. Call once.
    public func finish() -> String {
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        EVP_DigestFinal_ex(context, &digest, &length)
        return digest.map { byte in
            let hex = String(byte, radix: 16)
            return byte < 16 ? "0" + hex : hex
        }.joined()
    }
}
