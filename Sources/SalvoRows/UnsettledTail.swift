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
    /// The spill being written (created at the first row), committed to `path` by `finish`.
    private var writer: AtomicFileWriter?
    private var line: [UInt8] = []
    /// The last row's file and its field as written, between its commas.
    private var file: (name: String, field: [UInt8])?
    private static let ending = Array(",\(UnsettledRow.Outcome.unsent.rawValue)\n".utf8)
    /// The first error writing the spill (then the rows are still counted).
    public private(set) var failure: String?

    /// - Parameter path: the spill file, created (replaced) at the first row; nil to count only.
    public init(spillingTo path: String?) {
        self.path = path
    }

    /// A row never taken, from input file `file`.
    public func append(_ row: TokenRow, file: String) {
        self.count += 1
        guard let path = self.path, self.failure == nil else { return }
        // "token,file,line,unsent": the token's hex and the line need no quoting, the file may (quoted once a file).
        if self.file?.name != file { self.file = (file, Array(("," + csvField(file) + ",").utf8)) }
        self.line.removeAll(keepingCapacity: true)
        self.line.append(contentsOf: repeatElement(0, count: 2 * DeviceToken.byteCount))
        self.line.withUnsafeMutableBufferPointer { row.token.writeHex(to: $0.baseAddress!) }
        self.line.append(contentsOf: self.file!.field)
        self.line.append(contentsOf: String(row.line).utf8)
        self.line.append(contentsOf: Self.ending)
        do throws(JobError) {
            if self.writer == nil { self.writer = try AtomicFileWriter(path: path) }
            try self.writer!.write(self.line)
        } catch {
            self.failure = error.message
            self.writer = nil
        }
    }

    /// Writes what is buffered and puts the spill in place: call before reading it.
    public func finish() {
        guard let writer = self.writer else { return }
        self.writer = nil
        do throws(JobError) {
            try writer.commit()
        } catch {
            self.failure = error.message
        }
    }

    /// Removes the spill file.
    public func remove() {
        self.writer = nil
        if let path = self.path { unlink(path) }
    }
}
