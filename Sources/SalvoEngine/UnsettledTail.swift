import APNSWire

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The valid rows a stopped job never took from its source (the gateway was gone from the start, a signal came early),
/// kept out of memory: each is written, as it is read, to a spill file in the unsettled file's format, or only counted
/// when no unsettled file is asked for. Listed in memory (`UnsettledRow`, about 200 bytes a row with its strings),
/// the rest of a 10 M-row input took 2.2 GB to say that nothing was sent.
///
/// Used by one job at a time, on the thread that ends it (not thread-safe). Rows come in input order and after every
/// row the job took, so the spill is the unsettled file's tail.
public final class UnsettledTail: @unchecked Sendable {
    /// Where the rows go (nil: counted only).
    public let path: String?
    /// Rows appended.
    public private(set) var count = 0
    private var descriptor: Int32 = -1
    private var buffer: [UInt8] = []
    /// The first error writing the spill (then the rows are still counted).
    public private(set) var failure: String?

    /// - Parameter path: the spill file, created (replaced) at the first row; nil to count only.
    public init(spillingTo path: String?) {
        self.path = path
    }

    deinit {
        if self.descriptor >= 0 { close(self.descriptor) }
    }

    /// A row never taken, from input file `file`.
    public func append(_ row: TokenRow, file: String) {
        self.count += 1
        guard self.path != nil, self.failure == nil else { return }
        // "token,file,line,unsent": the token's hex and the line need no quoting, the file may.
        row.token.withUnsafeBytes { raw in
            let digits: StaticString = "0123456789abcdef"
            for byte in raw {
                self.buffer.append(digits.utf8Start[Int(byte >> 4)])
                self.buffer.append(digits.utf8Start[Int(byte & 0x0f)])
            }
        }
        self.buffer.append(UInt8(ascii: ","))
        self.buffer.append(contentsOf: csvField(file).utf8)
        self.buffer.append(UInt8(ascii: ","))
        self.buffer.append(contentsOf: String(row.line).utf8)
        self.buffer.append(UInt8(ascii: ","))
        self.buffer.append(contentsOf: UnsettledRow.Outcome.unsent.rawValue.utf8)
        self.buffer.append(UInt8(ascii: "\n"))
        if self.buffer.count >= 1 << 20 { self.flush() }
    }

    /// Writes what is buffered and closes the spill: call before reading it.
    public func finish() {
        self.flush()
        if self.descriptor >= 0 {
            close(self.descriptor)
            self.descriptor = -1
        }
    }

    /// Removes the spill file.
    public func remove() {
        self.finish()
        if let path = self.path { unlink(path) }
    }

    private func flush() {
        guard let path = self.path, self.failure == nil, !self.buffer.isEmpty else { return }
        if self.descriptor < 0 {
            self.descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
            guard self.descriptor >= 0 else {
                self.failure = "\(path): cannot create: \(String(cString: strerror(errno)))"
                return
            }
        }
        var written = 0
        while written < self.buffer.count {
            let result = self.buffer.withUnsafeBytes { raw in
                write(self.descriptor, raw.baseAddress! + written, raw.count - written)
            }
            if result < 0 {
                if errno == EINTR { continue }
                self.failure = "\(path): cannot write: \(String(cString: strerror(errno)))"
                return
            }
            written += result
        }
        self.buffer.removeAll(keepingCapacity: true)
    }
}
