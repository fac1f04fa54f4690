/// A JSON payload whose string values hold `{{column}}` placeholders, compiled once into literal segments and
/// slots, and rendered per row straight into the caller's buffer.
///
/// A placeholder inside a string value is filled with the row's field, JSON-escaped; `"{{column:int}}"` as a
/// whole value is replaced, quotes and all, by the field as a JSON integer (a per-user badge count);
/// `"{{$now}}"` as a whole value by the send time, UNIX seconds (`"{{$now+900}}"`: 15 minutes after it) (`PayloadFields.sendTime`: read once per chunk of
/// rows, never per row), as a Live Activity's `timestamp` wants it. Compiling
/// checks the template once: JSON syntax, placeholder syntax (with line and column), and the payload's structure
/// (with the string slots empty and the integer slots 0). Rendering a row then parses nothing and allocates
/// nothing: `renderedCount` checks the row's fields and gives the exact size, `render` copies literals and
/// escapes fields into memory of that size. Immutable and `Sendable`; a class, so that handing a template to the
/// renderer per row costs one reference count, not one per array it holds.
public final class PayloadTemplate: Sendable {
    /// What a slot holds.
    public enum SlotKind: UInt8, Sendable {
        /// Inside a JSON string: the field, escaped.
        case string = 1
        /// A whole JSON value: the field, a JSON integer.
        case integer = 2
        /// A whole JSON value: the send time, UNIX seconds (`"{{$now}}"`); no column.
        case sendTime = 3
    }

    /// The placeholder of the send time.
    public static let sendTimeName = "$now"
    /// The digits a send time takes: UNIX seconds have 10 from 2001 to 2286, so every rendering of a template has
    /// the size its rows were measured at.
    public static let sendTimeDigits = 10
    /// The send time a probe (and a row rendered without one) holds: the first 10-digit second.
    public static let sendTimeFloor: Int64 = 1_000_000_000

    /// A literal run of the compact template, then (unless `column` is -1) a slot.
    @usableFromInline
    struct Segment: Sendable {
        @usableFromInline var literalStart: Int
        @usableFromInline var literalEnd: Int
        /// Index into `columns`; -1 after the last literal.
        @usableFromInline var column: Int
        @usableFromInline var kind: SlotKind
        /// For a send-time slot: seconds added to the send time.
        @usableFromInline var sendTimeOffset: Int64 = 0
    }

    /// Where a column is first named in the template's text (1-based line and column), for messages.
    public struct Position: Hashable, Sendable, CustomStringConvertible {
        public var line: Int
        public var column: Int
        public var description: String { "line \(self.line), column \(self.column)" }
    }

    @usableFromInline let literals: [UInt8]
    @usableFromInline let segments: [Segment]
    /// The file the template came from, for messages.
    public let file: String
    /// The columns the slots name, in order of first use (as written; matched to a header without regard to case).
    public let columns: [String]
    /// The columns this template's text names (as compiled; `columns` may be a wider list after `bound(to:)`).
    public let names: [String]
    /// Where each of `names` is first named.
    public let positions: [Position]
    /// The template with every string slot empty and every integer slot 0: its structure, checked as a payload.
    public let probe: Payload
    /// Bytes every rendering holds whatever the row: the literals, and the send times.
    public var literalByteCount: Int { self.fixedByteCount }
    /// The literals and the send-time slots' digits.
    @usableFromInline let fixedByteCount: Int
    /// Whether the template holds `"{{$now}}"`.
    public let fillsSendTime: Bool

    /// Compiles `json`, the text of `file`.
    ///
    /// - Throws: `PayloadTemplateError` naming the file, and the line and column where they are known: text that is
    ///   not JSON, a `{{` without `}}` in its string, an empty name, a kind other than `:int`, `:int` that is not
    ///   the whole value, a placeholder in a key, a payload the structure rules refuse.
    public init(json: [UInt8], file: String) throws(PayloadTemplateError) {
        let compact: [UInt8]
        do {
            compact = try JSONScanner.parse(json).compact
        } catch {
            throw PayloadTemplateError(file: file, position: nil, message: "not valid JSON: \(error.message)")
        }
        // Placeholders are found in the text as written (for positions) and in the compact form (for segments):
        // JSON strings keep their bytes when compacted, so both hold the same placeholders in the same order.
        let written: [Placeholder]
        do {
            written = try Self.placeholders(in: json)
        } catch {
            throw PayloadTemplateError(
                file: file,
                position: Self.position(of: error.offset, in: json),
                message: error.message
            )
        }
        let found = (try? Self.placeholders(in: compact)) ?? []
        precondition(found.count == written.count, "compaction keeps every placeholder")

        var columns: [String] = []
        var positions: [Position] = []
        var segments: [Segment] = []
        var literals: [UInt8] = []
        var probe: [UInt8] = []
        var cursor = 0
        var sendTimes = 0
        for (index, placeholder) in found.enumerated() {
            if placeholder.kind == .sendTime {
                let start = literals.count
                literals.append(contentsOf: compact[cursor..<placeholder.start])
                probe.append(contentsOf: compact[cursor..<placeholder.start])
                probe.append(contentsOf: String(Self.sendTimeFloor).utf8)
                segments.append(
                    Segment(
                        literalStart: start,
                        literalEnd: literals.count,
                        column: -2,
                        kind: .sendTime,
                        sendTimeOffset: placeholder.offset
                    )
                )
                cursor = placeholder.end
                sendTimes += 1
                continue
            }
            let key = placeholder.name.lowercased()
            let column: Int
            if let known = columns.firstIndex(where: { $0.lowercased() == key }) {
                column = known
            } else {
                column = columns.count
                columns.append(placeholder.name)
                positions.append(Self.position(of: written[index].start, in: json))
            }
            let start = literals.count
            literals.append(contentsOf: compact[cursor..<placeholder.start])
            probe.append(contentsOf: compact[cursor..<placeholder.start])
            if placeholder.kind == .integer { probe.append(UInt8(ascii: "0")) }
            segments.append(
                Segment(literalStart: start, literalEnd: literals.count, column: column, kind: placeholder.kind)
            )
            cursor = placeholder.end
        }
        let start = literals.count
        literals.append(contentsOf: compact[cursor...])
        probe.append(contentsOf: compact[cursor...])
        segments.append(Segment(literalStart: start, literalEnd: literals.count, column: -1, kind: .string))
        do {
            self.probe = try Payload(jsonBytes: probe)
        } catch {
            throw PayloadTemplateError(file: file, position: nil, message: error.message)
        }
        self.file = file
        self.literals = literals
        self.segments = segments
        self.columns = columns
        self.names = columns
        self.positions = positions
        self.fixedByteCount = literals.count + sendTimes * Self.sendTimeDigits
        self.fillsSendTime = sendTimes > 0
    }

    private init(_ template: PayloadTemplate, segments: [Segment], columns: [String]) {
        self.file = template.file
        self.literals = template.literals
        self.probe = template.probe
        self.segments = segments
        self.columns = columns
        self.names = template.names
        self.positions = template.positions
        self.fixedByteCount = template.fixedByteCount
        self.fillsSendTime = template.fillsSendTime
    }

    /// Where the text first names `column` (without regard to case); nil when it does not.
    public func position(of column: String) -> Position? {
        self.names.firstIndex { $0.lowercased() == column.lowercased() }.map { self.positions[$0] }
    }

    /// The same template with its slots naming indices of `union`, which holds every one of `columns`
    /// (compared without regard to case): templates of one job then read the same fields.
    public func bound(to union: [String]) -> PayloadTemplate {
        let lowered = union.map { $0.lowercased() }
        let map = self.names.map { name in lowered.firstIndex(of: name.lowercased())! }
        let segments = self.segments.map { segment in
            var segment = segment
            if segment.column >= 0 { segment.column = map[segment.column] }
            return segment
        }
        return PayloadTemplate(self, segments: segments, columns: union)
    }

    // MARK: - Rendering

    /// The size of this template rendered with `fields`, or why the row cannot be rendered: a missing field, a
    /// field that is not UTF-8, an integer slot's field that is not a JSON integer. Reads each field once.
    @inlinable
    public func renderedCount(_ fields: PayloadFields) -> Result<Int, PayloadRowError> {
        var count = self.fixedByteCount
        for segment in self.segments where segment.column >= 0 {
            guard let field = fields.field(segment.column) else {
                return .failure(PayloadRowError(.missingField, column: self.columns[segment.column]))
            }
            switch segment.kind {
            case .string:
                guard let escaped = JSONEscaping.escapedCount(field) else {
                    return .failure(PayloadRowError(.notUTF8, column: self.columns[segment.column]))
                }
                count += escaped
            case .integer:
                guard JSONEscaping.isInteger(field) else {
                    return .failure(
                        PayloadRowError(.notInteger, column: self.columns[segment.column], value: field)
                    )
                }
                count += field.count
            case .sendTime:
                break
            }
        }
        return .success(count)
    }

    /// Renders the template with `fields` into `out`, which holds at least `renderedCount(fields)` bytes (the
    /// fields as `renderedCount` accepted them); returns the bytes written. Copies and escapes, nothing else:
    /// `renderChecked`, whose checks such fields pass.
    @inlinable
    public func render(_ fields: PayloadFields, into out: UnsafeMutableRawBufferPointer) -> Int {
        guard let written = self.renderChecked(fields, into: out) else {
            preconditionFailure("the fields changed since they were measured, or the room is short of the measure")
        }
        return written
    }

    /// Renders the template with `fields` into `out` in one pass, checking as it goes what `renderedCount` checks;
    /// returns the bytes written, or nil when the row cannot be rendered or does not fit in `out` (the caller asks
    /// `renderedCount` why: rare, and its answer then says which field, or the size, exactly).
    ///
    /// One read of each field instead of two (a measure, then a render): what the row's payload is made of is
    /// known only once it is rendered, into room as large as the format's limit.
    @inlinable
    public func renderChecked(_ fields: PayloadFields, into out: UnsafeMutableRawBufferPointer) -> Int? {
        self.literals.withUnsafeBytes { literals in
            var offset = 0
            for segment in self.segments {
                let count = segment.literalEnd &- segment.literalStart
                if count > 0 {
                    guard offset &+ count <= out.count else { return nil }
                    (out.baseAddress! + offset).copyMemory(
                        from: literals.baseAddress! + segment.literalStart,
                        byteCount: count
                    )
                    offset &+= count
                }
                if segment.kind == .sendTime {
                    guard offset &+ Self.sendTimeDigits <= out.count else { return nil }
                    let time = fields.sendTime == 0 ? 0 : fields.sendTime + segment.sendTimeOffset
                    offset = Self.writeSendTime(time, into: out, at: offset)
                    continue
                }
                guard segment.column >= 0 else { continue }
                guard let field = fields.field(segment.column) else { return nil }
                switch segment.kind {
                case .string:
                    offset = JSONEscaping.escapeChecked(field, into: out, at: offset)
                    guard offset >= 0 else { return nil }
                case .integer:
                    guard JSONEscaping.isInteger(field), offset &+ field.count <= out.count else { return nil }
                    (out.baseAddress! + offset).copyMemory(from: field.baseAddress!, byteCount: field.count)
                    offset &+= field.count
                case .sendTime:
                    break
                }
            }
            return offset
        }
    }

    /// Writes `seconds` as exactly `sendTimeDigits` decimal digits at `offset` (held to the 10-digit range, so the
    /// size never differs from the measure); returns the offset after them.
    @inlinable
    static func writeSendTime(_ seconds: Int64, into out: UnsafeMutableRawBufferPointer, at offset: Int) -> Int {
        precondition(offset + Self.sendTimeDigits <= out.count)
        var value = min(max(seconds, Self.sendTimeFloor), 9_999_999_999)
        var index = offset + Self.sendTimeDigits - 1
        while index >= offset {
            out[index] = UInt8(ascii: "0") + UInt8(value % 10)
            value /= 10
            index -= 1
        }
        return offset + Self.sendTimeDigits
    }
}

extension PayloadTemplate {
    /// The template filled with text fields, one per column in `columns`' order (nil: the row has no such field), and
    /// `sendTime` for `"{{$now}}"`: for payloads made one at a time (a broadcast's row, a service's notification). The
    /// bulk path renders from a chunk's field store instead (`RowPayloads`).
    ///
    /// - Returns: the payload, or why it cannot be made: a field missing or unfit (`column` names it), or a payload
    ///   over `limit` (`tooLarge`, measured before anything is rendered).
    public func render(
        fields: [String?],
        sendTime: Int64 = 0,
        limit: PayloadLimit? = nil
    ) -> Result<[UInt8], PayloadRowError> {
        var bytes: [UInt8] = []
        var bounds: [UInt32] = []
        bounds.reserveCapacity(2 * self.columns.count)
        for index in self.columns.indices {
            guard index < fields.count, let field = fields[index] else {
                bounds.append(contentsOf: [PayloadFields.missing, 0])
                continue
            }
            bounds.append(UInt32(bytes.count))
            bytes.append(contentsOf: field.utf8)
            bounds.append(UInt32(bytes.count))
        }
        return bytes.withUnsafeBytes { raw in
            bounds.withUnsafeBufferPointer { bounds in
                let row = PayloadFields(bytes: raw, bounds: bounds, sendTime: sendTime)
                switch self.renderedCount(row) {
                case .failure(let error):
                    return .failure(error)
                case .success(let count) where count > limit?.bytes ?? .max:
                    let limit = limit!
                    return .failure(
                        PayloadRowError(
                            code: .tooLarge,
                            message: "the payload is \(count) bytes; \(limit.name) allows at most \(limit.bytes)"
                        )
                    )
                case .success(let count):
                    var out = [UInt8](repeating: 0, count: count)
                    let written = out.withUnsafeMutableBytes { self.render(row, into: $0) }
                    return .success(Array(out.prefix(written)))
                }
            }
        }
    }
}
