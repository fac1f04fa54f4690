import APNSWire
import Foundation
import NIOCore

/// The fields payload templates read, for the rows of one chunk: their bytes, per row and column where each field
/// lies, and the template and rendered size `PayloadTemplates.measure` gave the row.
///
/// A shard keeps one and refills it with each chunk it takes (`TokenSource.nextChunk(maximumRows:fields:)`), so its
/// arrays reach their size once and are reused: no allocation per row or per chunk in steady state. Rows are found
/// by their `RowReference` (in order, so a cursor finds them without a search). Not thread-safe: one owner.
public struct RowFields {
    // Read per row by the shards (another module): usable from inlined code, so that `withFields` and `measure` and
    // the closures given to them are inlined where a frame is rendered, not called through a thunk per row.
    @usableFromInline var bytes: [UInt8] = []
    @usableFromInline var bounds: [UInt32] = []
    var references: [UInt64] = []
    @usableFromInline var templates: [Int] = []
    @usableFromInline var payloadCounts: [Int] = []
    var cursor = 0
    /// Columns per row: `PayloadTemplates.columns.count`.
    public private(set) var columnCount = 0
    /// The send time (UNIX seconds) templates fill `"{{$now}}"` with: read when made, and again (`stampSendTime`)
    /// when a chunk to send is taken, once per chunk: never per row.
    public internal(set) var sendTime: Int64

    public init() {
        self.sendTime = Int64(time(nil))
    }

    /// Reads the clock into `sendTime`.
    mutating func stampSendTime() { self.sendTime = Int64(time(nil)) }

    /// Rows held.
    public var count: Int { self.references.count }

    /// Forgets every row, keeping the memory.
    mutating func removeAll(columnCount: Int) {
        self.bytes.removeAll(keepingCapacity: true)
        self.bounds.removeAll(keepingCapacity: true)
        self.references.removeAll(keepingCapacity: true)
        self.templates.removeAll(keepingCapacity: true)
        self.payloadCounts.removeAll(keepingCapacity: true)
        self.cursor = 0
        self.columnCount = columnCount
    }

    /// Appends a row's field for the next column: `nil` when the row has none.
    mutating func appendMissing() {
        self.bounds.append(PayloadFields.missing)
        self.bounds.append(0)
    }

    /// Marks the start of a field appended byte by byte to `bytes`; `endField` closes it.
    mutating func beginField() { self.bounds.append(UInt32(self.bytes.count)) }
    mutating func endField() { self.bounds.append(UInt32(self.bytes.count)) }

    /// Where the next row's fields start: `dropRow(from:)` takes them back.
    var rowStart: Int { self.bytes.count }

    /// Drops the fields appended since `rowStart` was `start` (a row that is not kept).
    mutating func dropRow(from start: Int) {
        self.bytes.removeSubrange(start...)
        self.bounds.removeSubrange((self.references.count * 2 * self.columnCount)...)
    }

    /// The fields of the row appended last (not yet measured or kept).
    @inline(__always)
    func withPendingFields<Result>(_ body: (PayloadFields) -> Result) -> Result {
        self.withFields(bounds: self.references.count * 2 * self.columnCount, body)
    }

    /// Keeps the row whose fields were appended last, with its measure.
    mutating func keep(_ reference: RowReference, template: Int, payloadCount: Int) {
        self.references.append(reference.rawValue)
        self.templates.append(template)
        self.payloadCounts.append(payloadCount)
    }

    /// The index of the row at `reference`, or nil when this chunk does not hold it.
    package mutating func index(of reference: RowReference) -> Int? {
        let wanted = reference.rawValue
        if self.cursor < self.references.count && self.references[self.cursor] == wanted {
            self.cursor += 1
            return self.cursor - 1
        }
        // Out of order (a row sent again): the references rise within a chunk, so a binary search finds it.
        var low = 0
        var high = self.references.count
        while low < high {
            let middle = (low + high) / 2
            if self.references[middle] < wanted { low = middle + 1 } else { high = middle }
        }
        guard low < self.references.count && self.references[low] == wanted else { return nil }
        self.cursor = low + 1
        return low
    }

    /// The template and rendered size of row `index`.
    @inlinable
    package func measure(_ index: Int) -> (template: Int, payloadCount: Int) {
        (self.templates[index], self.payloadCounts[index])
    }

    /// Calls `body` with the fields of row `index`.
    @inlinable @inline(__always)
    package func withFields<Result>(_ index: Int, _ body: (PayloadFields) -> Result) -> Result {
        self.withFields(bounds: index * 2 * self.columnCount, body)
    }

    @inlinable @inline(__always)
    func withFields<Result>(bounds start: Int, _ body: (PayloadFields) -> Result) -> Result {
        self.bytes.withUnsafeBytes { bytes in
            self.bounds.withUnsafeBufferPointer { bounds in
                body(
                    PayloadFields(
                        bytes: bytes,
                        bounds: UnsafeBufferPointer(rebasing: bounds[start..<(start + 2 * self.columnCount)]),
                        sendTime: self.sendTime
                    )
                )
            }
        }
    }

    /// The rendered size of row `index` (measured when its chunk was taken).
    public func payloadByteCount(_ index: Int) -> Int { self.payloadCounts[index] }

    /// Renders row `index` with the template `templates` gave it at the end of `buffer` (a request's body);
    /// returns the bytes written.
    public func render(_ index: Int, with templates: PayloadTemplates, to buffer: inout ByteBuffer) -> Int {
        let (template, count) = self.measure(index)
        return buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: count) { out in
            let written = self.withFields(index) { fields in
                templates.templates.withUnsafeBufferPointer {
                    // Without a retain of the template, which every connection renders with at once (see
                    // `PayloadTemplates.measure`).
                    Unmanaged.passUnretained($0[template])._withUnsafeGuaranteedRef {
                        $0.render(fields, into: UnsafeMutableRawBufferPointer(rebasing: out[0..<count]))
                    }
                }
            }
            precondition(written == count, "the fields changed since they were measured")
            return written
        }
    }
}
