import APNSWire
import Foundation
import NIOCore

/// The payloads of the rows of one chunk, rendered once when the chunk is taken: the rows' payload bytes back to
/// back, and each row's place in them.
///
/// A row is rendered straight from the fields of its record in the reader's buffer (`RowReader.renderPayload`)
/// into `storage`, checked as it is written (one read of each field: no copy of the fields and no measure before
/// the render), and kept with `keep` once the row is handed out; a row refused after its render is overwritten by
/// the next. The frame or request body then copies the bytes.
///
/// A shard keeps one and refills it with each chunk it takes (`TokenSource.nextChunk(maximumRows:fields:)`), so its
/// arrays reach their size once and are reused: no allocation per row or per chunk in steady state. Rows are found
/// by their `RowReference` (in order, so a cursor finds them without a search). Not thread-safe: one owner.
public struct RowFields {
    /// The kept rows' payloads back to back, then room for one more at the limit: `count` only grows (its bytes past
    /// the last kept payload are scratch).
    @usableFromInline var storage: [UInt8] = []
    /// Where each kept row's payload ends in `storage` (it starts where the previous one ends).
    @usableFromInline var ends: [Int] = []
    var references: [UInt64] = []
    /// The end of the payload rendered last and not kept yet.
    var pendingEnd = 0
    /// For the row being rendered: two bounds per column (see `PayloadFields`).
    var bounds: [UInt32] = []
    /// For the row being rendered when its fields cannot be read in place (`""` pairs to undo, a row read again).
    var scratch: [UInt8] = []
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
        self.ends.removeAll(keepingCapacity: true)
        self.references.removeAll(keepingCapacity: true)
        self.pendingEnd = 0
        self.cursor = 0
        self.columnCount = columnCount
        if self.bounds.count != 2 * columnCount {
            self.bounds = [UInt32](repeating: PayloadFields.missing, count: 2 * columnCount)
        }
    }

    /// Where the next payload starts.
    @inline(__always)
    private var nextStart: Int { self.ends.last ?? 0 }

    /// Renders the next row's payload with the template it takes, from fields that lie in `bytes` where `bounds`
    /// says (`fillBounds` fills them and returns the bytes, or nil when the fields cannot be read in place: then
    /// `copy` appends a column's field to a scratch copy and says whether the row has it). The row is held once
    /// `keep` is called.
    @inline(__always)
    mutating func render(
        _ payloads: RowPayloads,
        fillBounds: (UnsafeMutableBufferPointer<UInt32>) -> UnsafeRawBufferPointer?,
        copy: (Int, inout [UInt8]) -> Bool
    ) -> Result<(template: Int, count: Int), PayloadRowError> {
        if let bytes = self.bounds.withUnsafeMutableBufferPointer({ fillBounds($0) }) {
            return self.render(payloads, bytes: bytes)
        }
        self.scratch.removeAll(keepingCapacity: true)
        for column in 0..<self.columnCount {
            let start = UInt32(self.scratch.count)
            if copy(column, &self.scratch) {
                self.bounds[2 * column] = start
                self.bounds[2 * column + 1] = UInt32(self.scratch.count)
            } else {
                self.bounds[2 * column] = PayloadFields.missing
                self.bounds[2 * column + 1] = 0
            }
        }
        return self.scratch.withUnsafeBytes { scratch in self.render(payloads, bytes: scratch) }
    }

    /// Renders from `bytes` and `bounds` into the room after the last kept payload.
    @inline(__always)
    private mutating func render(
        _ payloads: RowPayloads,
        bytes: UnsafeRawBufferPointer
    ) -> Result<(template: Int, count: Int), PayloadRowError> {
        let start = self.nextStart
        let limit = payloads.limit.bytes
        if self.storage.count < start + limit {
            self.storage.append(contentsOf: repeatElement(0, count: start + limit - self.storage.count))
        }
        let sendTime = self.sendTime
        let result = self.bounds.withUnsafeBufferPointer { bounds in
            self.storage.withUnsafeMutableBytes { storage in
                payloads.templates.render(
                    PayloadFields(bytes: bytes, bounds: bounds, sendTime: sendTime),
                    limit: payloads.limit,
                    into: UnsafeMutableRawBufferPointer(rebasing: storage[start..<(start + limit)])
                )
            }
        }
        if case .success(let rendered) = result { self.pendingEnd = start + rendered.count }
        return result
    }

    /// Keeps the row whose payload was rendered last.
    mutating func keep(_ reference: RowReference) {
        self.references.append(reference.rawValue)
        self.ends.append(self.pendingEnd)
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

    /// Calls `body` with the rendered payload of row `index`.
    @inlinable @inline(__always)
    package func withPayload<Result>(_ index: Int, _ body: (UnsafeRawBufferPointer) -> Result) -> Result {
        let start = index == 0 ? 0 : self.ends[index - 1]
        let end = self.ends[index]
        return self.storage.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[start..<end])) }
    }

    /// The rendered size of row `index`.
    public func payloadByteCount(_ index: Int) -> Int {
        self.ends[index] - (index == 0 ? 0 : self.ends[index - 1])
    }

    /// The payloads of every row held, back to back in the rows' order.
    public func withPayloads<Result>(_ body: (UnsafeRawBufferPointer) -> Result) -> Result {
        self.storage.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[0..<(self.ends.last ?? 0)])) }
    }
}
