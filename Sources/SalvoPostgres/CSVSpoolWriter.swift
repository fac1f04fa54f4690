import Crypto
import NIOCore
import SalvoRows

#if canImport(Glibc)
import Glibc
#endif

/// CSV written into a file through one fixed buffer, hashed as it is written: the spool of a query's rows.
///
/// A write that fails (a full disk) is kept as `failure` and every later write is dropped: the caller checks it once a
/// row is written, so that the per-field calls stay free of error handling.
final class CSVSpoolWriter {
    private let descriptor: Int32
    /// The spool's name, for messages.
    private let name: String
    private let buffer: UnsafeMutableRawPointer
    private let capacity: Int
    // Per-field state, exempt from dynamic exclusivity checks: one owner writes from one thread, and no method
    // hands a property out `inout` while another touches it.
    @exclusivity(unchecked) private var count = 0
    @exclusivity(unchecked) private var hash = SHA256()
    /// Bytes handed to the file so far.
    @exclusivity(unchecked) private(set) var bytes = 0
    /// The first write that failed; nothing is written after it.
    @exclusivity(unchecked) private(set) var failure: JobError?
    /// Whether the bytes are hashed as they are written (a journal's snapshot is identified by its hash; a streamed
    /// one is not kept).
    private let hashing: Bool
    /// Told how far the file is written after every write, when a job reads it while it is written.
    let growing: GrowingInput?

    init(descriptor: Int32, name: String, capacity: Int = 1 << 20, hashing: Bool = true, growing: GrowingInput? = nil) {
        self.descriptor = descriptor
        self.name = name
        self.capacity = capacity
        self.hashing = hashing
        self.growing = growing
        self.buffer = .allocate(byteCount: capacity, alignment: 16)
    }

    deinit {
        self.buffer.deallocate()
    }

    /// SHA-256 of every byte written, hex (empty when not hashing); call once, after `flush()`.
    func finish() -> String {
        guard self.hashing else { return "" }
        return self.hash.finalize().map { byte in (byte < 16 ? "0" : "") + String(byte, radix: 16) }.joined()
    }

    @inline(__always)
    func byte(_ value: UInt8) {
        if self.count == self.capacity { self.flush() }
        self.buffer.storeBytes(of: value, toByteOffset: self.count, as: UInt8.self)
        self.count += 1
    }

    func raw(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0 else { return }
        if self.count + bytes.count > self.capacity { self.flush() }
        if bytes.count > self.capacity {
            self.write(bytes)
            return
        }
        (self.buffer + self.count).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
        self.count += bytes.count
    }

    /// A field as CSV: quoted (with `""` for each quote) when it holds a comma, a quote or a line break, or when it
    /// is empty (an empty field unquoted is a NULL).
    func field(_ bytes: UnsafeRawBufferPointer) {
        var needsQuotes = bytes.isEmpty
        for value in bytes where value == UInt8(ascii: ",") || value == UInt8(ascii: "\"") || value < 0x20 {
            if value == UInt8(ascii: ",") || value == UInt8(ascii: "\"") || value == 0x0A || value == 0x0D {
                needsQuotes = true
                break
            }
        }
        guard needsQuotes else {
            self.raw(bytes)
            return
        }
        self.byte(UInt8(ascii: "\""))
        var start = 0
        for (index, value) in bytes.enumerated() where value == UInt8(ascii: "\"") {
            self.raw(UnsafeRawBufferPointer(rebasing: bytes[start...index]))
            self.byte(UInt8(ascii: "\""))
            start = index + 1
        }
        self.raw(UnsafeRawBufferPointer(rebasing: bytes[start...]))
        self.byte(UInt8(ascii: "\""))
    }

    /// Hands what the buffer holds to the file.
    func flush() {
        guard self.count > 0 else { return }
        self.write(UnsafeRawBufferPointer(start: self.buffer, count: self.count))
        self.count = 0
    }

    private func write(_ bytes: UnsafeRawBufferPointer) {
        guard self.failure == nil else { return }
        if self.hashing { self.hash.update(bufferPointer: bytes) }
        var written = 0
        while written < bytes.count {
            let result = Glibc.write(self.descriptor, bytes.baseAddress! + written, bytes.count - written)
            if result < 0 {
                if errno == EINTR { continue }
                self.failure = JobError(
                    .output,
                    "the snapshot of the query \(self.name): cannot write (\(self.bytes + written) bytes written): "
                        + String(cString: strerror(errno))
                )
                return
            }
            written += result
        }
        self.bytes += bytes.count
        self.growing?.wrote(through: self.bytes)
    }
}
