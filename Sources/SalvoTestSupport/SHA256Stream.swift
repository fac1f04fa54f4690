import Crypto
import NIOCore

/// SHA-256 over a stream of bytes, for checking bulk transfers end to end: both sides digest what they send
/// and receive, and compare. Not thread-safe: use it on one queue.
public final class SHA256Stream {
    private var hasher = SHA256()
    /// Bytes digested so far.
    public private(set) var count = 0

    /// An empty digest.
    public init() {}

    /// Adds `bytes` to the digest.
    public func update(_ bytes: UnsafeRawBufferPointer) {
        self.hasher.update(bufferPointer: bytes)
        self.count += bytes.count
    }

    /// Adds the readable bytes of `buffer` (its reader index does not move).
    public func update(_ buffer: ByteBuffer) {
        buffer.withUnsafeReadableBytes { self.update($0) }
    }

    /// The digest of everything added, as lowercase hex. Call once.
    public func finish() -> String {
        self.hasher.finalize().map { byte in
            let hex = String(byte, radix: 16)
            return byte < 16 ? "0" + hex : hex
        }.joined()
    }
}
