import APNSWire

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A streaming RFC 4180 reader: records of fields from a file of any size, in bounded memory.
///
/// Reads the file in chunks (1 MiB by default) with `read(2)` rather than mapping it: a mapped file's pages
/// count toward the process's resident memory as they are touched, and a bulk send must stay small while
/// it reads a file of tens of millions of rows. Handles a UTF-8 byte-order mark, quoted fields (with `""`
/// escapes, commas and line breaks inside), CRLF, LF and bare CR line ends (each one line, inside a quoted field
/// too, as `InputFingerprints.lineEnds` counts them) and blank lines (skipped, unless `keepsBlankLines`).
///
/// Written by hand because it is on the per-row path: a record is parsed into field ranges over the
/// chunk, with no allocation per row, which no CSV library here offers. The chunk and the field list are memory the
/// reader allocates and frees itself, not arrays: reading them per row then costs no reference counting (an array
/// property is retained and released around each `withUnsafeBufferPointer`) and no uniqueness check.
/// Not thread-safe: one reader, one owner.
package final class CSVReader {
    /// One field's place within the current chunk.
    package struct Field {
        var start: Int
        var end: Int
        /// Quoted in the file: the bytes exclude the quotes but may still hold `""` pairs.
        var quoted: Bool
        var hasEscapedQuotes: Bool
    }

    /// A growable list of fields in memory its owner frees (`deallocate()`): appending costs no uniqueness check.
    struct FieldList {
        private(set) var base: UnsafeMutablePointer<Field>
        private(set) var capacity: Int
        var count = 0

        init(capacity: Int) {
            self.capacity = max(capacity, 1)
            self.base = .allocate(capacity: self.capacity)
        }

        var fields: UnsafeBufferPointer<Field> { UnsafeBufferPointer(start: self.base, count: self.count) }

        @inline(__always)
        mutating func append(_ field: Field) {
            if self.count == self.capacity { self.grow() }
            (self.base + self.count).initialize(to: field)
            self.count += 1
        }

        private mutating func grow() {
            let larger = UnsafeMutablePointer<Field>.allocate(capacity: self.capacity * 2)
            larger.moveInitialize(from: self.base, count: self.count)
            self.base.deallocate()
            self.base = larger
            self.capacity *= 2
        }

        func deallocate() {
            self.base.deallocate()
        }
    }

    let path: String
    private let descriptor: Int32
    // The state read and written for every row is exempt from dynamic exclusivity checks: one owner uses a reader
    // from one thread, and no method hands a property out `inout` while another touches it. The checks were about a
    // tenth of a 10 M-row send's CPU (`swift_beginAccess` on these, the row reader's and the shard's properties).
    /// The chunk read from the file, `capacity` bytes (it grows only for a record longer than it).
    @exclusivity(unchecked) private var buffer: UnsafeMutablePointer<UInt8>
    @exclusivity(unchecked) private var capacity: Int
    @exclusivity(unchecked) private var position = 0
    @exclusivity(unchecked) private var filled = 0
    @exclusivity(unchecked) private var atEndOfFile = false
    @exclusivity(unchecked) private var line = 1
    @exclusivity(unchecked) private var startedFile = false
    private let maximumRecordBytes: Int
    /// Set when the file is still being written (`GrowingInput`): its end is waited past, not taken for the input's.
    private let growing: GrowingInput?

    @exclusivity(unchecked) private var fieldList: FieldList
    /// The fields of the record `next()` last returned; valid until the next call.
    package var fields: UnsafeBufferPointer<Field> { self.fieldList.fields }
    /// The file offset of the record `next()` last returned.
    @exclusivity(unchecked) private(set) var recordOffset = 0
    /// The file offset of `buffer[0]`.
    @exclusivity(unchecked) private var bufferOffset = 0

    /// Opens `path` for reading: the file of that name, or its spool among `spools` (`-`: standard input's).
    ///
    /// - Throws: `InputError` naming the file when it cannot be opened.
    package init(
        path: String,
        spools: InputSpools = InputSpools(),
        chunkSize: Int = 1 << 20,
        maximumRecordBytes: Int = 1 << 20
    ) throws(InputError) {
        // A spool is opened under its input's name: the name stays `-` (or `postgres`) in every message.
        let opened = spools.path(of: path)
        let descriptor = open(opened, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw InputError(
                file: path,
                line: nil,
                message: "cannot open the file: \(String(cString: strerror(errno)))"
            )
        }
        self.path = path
        self.descriptor = descriptor
        // Allocated only once the file is open: an init that throws runs no deinit, which would free them.
        self.capacity = max(chunkSize, 4096)
        self.buffer = .allocate(capacity: self.capacity)
        self.fieldList = FieldList(capacity: 16)
        self.maximumRecordBytes = maximumRecordBytes
        self.growing = spools.growing(of: path)
    }

    deinit {
        close(self.descriptor)
        self.buffer.deallocate()
        self.fieldList.deallocate()
    }

    /// Reads on from byte `offset`, the start of a record on line `line` (a checkpoint): what is buffered is
    /// dropped, and no byte-order mark is looked for there.
    ///
    /// - Throws: `InputError` when the file cannot be positioned.
    func seek(offset: Int, line: Int) throws(InputError) {
        guard lseek(self.descriptor, off_t(offset), SEEK_SET) == off_t(offset) else {
            throw InputError(
                file: self.path,
                line: line,
                message: "cannot read on from byte \(offset): \(String(cString: strerror(errno)))"
            )
        }
        self.position = 0
        self.filled = 0
        self.bufferOffset = offset
        self.atEndOfFile = false
        self.startedFile = true
        self.line = line
        self.fieldList.count = 0
    }

    /// A blank line is a record of one empty field (`isBlankRecord`) rather than passed over: a token file's blank
    /// line is a row without a token (a NULL in a one-column export), refused with its line, never lost.
    package var keepsBlankLines = false

    /// Whether the current record is a blank line: one field, empty and unquoted.
    package var isBlankRecord: Bool {
        guard self.fieldList.count == 1 else { return false }
        let only = self.fieldList.base.pointee
        return only.start == only.end && !only.quoted
    }

    /// Reads the next record (a non-blank one, unless `keepsBlankLines`).
    ///
    /// - Returns: the line the record starts on, or nil at the end of the file. The record's fields are in
    ///   `fields`, their bytes readable through `withField`.
    /// - Throws: `InputError` for a read error, a quote that is never closed, or text after a closing quote.
    package func next() throws(InputError) -> Int? {
        while true {
            if let line = try self.parseRecord() {
                if !self.keepsBlankLines && self.isBlankRecord { continue }
                return line
            }
            if self.atEndOfFile { return nil }
            try self.refill()
        }
    }

    /// `next()` for the common record, without the general scan: one line of unquoted fields that ends in LF within the
    /// bytes read, with no quote or CR in it, and not blank. Returns its line, its fields in `fields` as `next()`
    /// leaves them; nil, with nothing consumed, for any other record or when no whole line is buffered: `next()` reads
    /// it then (once per chunk read from the file, or per unusual record).
    ///
    /// Every byte of a line of hex tokens is at least `0` (0x30), and every byte that ends a field or starts a quote
    /// is below `-` (0x2D): eight bytes at a time are passed over with one test for a byte below 0x2D, and a word that
    /// has one is left at its first such byte (a comma ends a field, LF the record, a quote or CR hands the record to
    /// `next()`, anything else below 0x2D, a space say, is a byte of the field), not walked a byte at a time.
    @inline(__always)
    package func nextPlain() -> Int? {
        let start = self.position
        let end = self.filled
        guard self.startedFile, start < end else { return nil }
        let base = self.buffer
        var fields = self.fieldList
        defer { self.fieldList = fields }  // it may have grown: the list's storage moves with it
        fields.count = 0
        let ones: UInt64 = 0x0101_0101_0101_0101
        let below: UInt64 = ones &* 0x2D
        let highs: UInt64 = 0x8080_8080_8080_8080
        var cursor = start
        var fieldStart = start
        while true {
            // A word has a byte below 0x2D exactly when `(word - 0x2D…2D) & ~word & 0x80…80` is nonzero (bytes at or
            // above 0x80 set no bit: `~word` clears it).
            // The lowest bit set is exact (a borrow only runs upward, from a byte below 0x2D into those after it):
            // the cursor goes straight to that byte rather than a byte at a time through the word.
            while cursor &+ 8 <= end {
                let word = UInt64(littleEndian: UnsafeRawPointer(base + cursor).loadUnaligned(as: UInt64.self))
                let found = (word &- below) & ~word & highs
                if found != 0 {
                    cursor &+= found.trailingZeroBitCount &>> 3
                    break
                }
                cursor &+= 8
            }
            guard cursor < end else { return nil }
            let byte = base[cursor]
            if byte >= 0x2D {
                cursor &+= 1
                continue
            }
            switch byte {
            case UInt8(ascii: ","):
                fields.append(Field(start: fieldStart, end: cursor, quoted: false, hasEscapedQuotes: false))
                cursor &+= 1
                fieldStart = cursor
            case UInt8(ascii: "\n"):
                guard cursor > start else { return nil }  // a blank line: `next()` passes over it
                fields.append(Field(start: fieldStart, end: cursor, quoted: false, hasEscapedQuotes: false))
                self.recordOffset = self.bufferOffset + start
                let recordLine = self.line
                self.line &+= 1
                self.position = cursor &+ 1
                return recordLine
            case UInt8(ascii: "\""), UInt8(ascii: "\r"):
                return nil
            default:
                cursor &+= 1
            }
        }
    }

    /// Calls `body` with the bytes of field `index` of the current record, quotes removed and `""` pairs
    /// undone (into a temporary copy only when the field has such pairs).
    func withField<Result>(_ index: Int, _ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        if let bytes = self.plainField(index) { return try body(bytes) }
        var unescaped: [UInt8] = []
        Self.append(self.fields[index], of: UnsafePointer(self.buffer), to: &unescaped)
        return try unescaped.withUnsafeBytes(body)
    }

    /// The bytes of field `index` of the current record, quotes removed, when it has no `""` pairs (nil when it
    /// has: `withField` undoes them). Valid until the next call of `next()` or `seek`.
    @inline(__always)
    func plainField(_ index: Int) -> UnsafeRawBufferPointer? {
        precondition(index >= 0 && index < self.fieldList.count)
        let field = self.fieldList.base[index]
        if field.hasEscapedQuotes { return nil }
        return UnsafeRawBufferPointer(start: self.buffer + field.start, count: field.end - field.start)
    }

    /// Where the fields of `columns` (0-based; -1 or past the record: missing) of the current record lie: two
    /// bounds a column into `bounds` (as `PayloadFields` reads them), and the bytes they index; nil when one of them
    /// has `""` pairs to undo (`appendField` copies it). Valid until the next call of `next()` or `seek`.
    @inline(__always)
    func fieldBounds(columns: [Int], into bounds: UnsafeMutableBufferPointer<UInt32>) -> UnsafeRawBufferPointer? {
        precondition(bounds.count >= 2 * columns.count, "two bounds a column")
        let fields = self.fieldList
        guard self.filled < Int(PayloadFields.missing) else { return nil }
        var slot = 0
        for column in columns {
            if column >= 0 && column < fields.count {
                let field = fields.base[column]
                if field.hasEscapedQuotes { return nil }
                bounds[slot] = UInt32(truncatingIfNeeded: field.start)
                bounds[slot &+ 1] = UInt32(truncatingIfNeeded: field.end)
            } else {
                bounds[slot] = PayloadFields.missing
                bounds[slot &+ 1] = 0
            }
            slot &+= 2
        }
        return UnsafeRawBufferPointer(start: self.buffer, count: self.filled)
    }

    /// Appends the bytes of field `index` of the current record to `out`, quotes removed and `""` pairs undone.
    func appendField(_ index: Int, to out: inout [UInt8]) {
        precondition(index >= 0 && index < self.fieldList.count)
        Self.append(self.fieldList.base[index], of: UnsafePointer(self.buffer), to: &out)
    }

    /// Appends the bytes of `field`, found in the record at `base`, to `out`, quotes removed and `""` pairs undone.
    static func append(_ field: Field, of base: UnsafePointer<UInt8>, to out: inout [UInt8]) {
        if field.hasEscapedQuotes {
            var cursor = field.start
            while cursor < field.end {
                out.append(base[cursor])
                cursor += base[cursor] == UInt8(ascii: "\"") ? 2 : 1
            }
        } else {
            out.append(contentsOf: UnsafeBufferPointer(start: base + field.start, count: field.end - field.start))
        }
    }

    /// The text of field `index` of the current record.
    package func string(_ index: Int) -> String {
        self.withField(index) { String(decoding: $0, as: UTF8.self) }
    }

    /// Moves unread bytes to the front of the buffer and reads more after them.
    private func refill() throws(InputError) {
        let unread = self.filled - self.position
        if self.position > 0 {
            if unread > 0 { memmove(self.buffer, self.buffer + self.position, unread) }
            self.bufferOffset += self.position
            self.position = 0
            self.filled = unread
        }
        if self.filled == self.capacity {
            // One record fills the whole buffer: grow, up to the record limit.
            guard self.capacity < self.maximumRecordBytes else {
                throw InputError(
                    file: self.path,
                    line: self.line,
                    message: "a record longer than \(self.maximumRecordBytes) bytes (is a quote never closed?)"
                )
            }
            let larger = UnsafeMutablePointer<UInt8>.allocate(capacity: self.capacity * 2)
            larger.initialize(from: self.buffer, count: self.filled)
            self.buffer.deallocate()
            self.buffer = larger
            self.capacity *= 2
        }
        var count: Int
        reading: while true {
            repeat {
                count = read(self.descriptor, self.buffer + self.filled, self.capacity - self.filled)
            } while count < 0 && errno == EINTR
            guard count >= 0 else {
                throw InputError(
                    file: self.path,
                    line: self.line,
                    message: "read failed: \(String(cString: strerror(errno)))"
                )
            }
            // The end of a file still being written is only the end of what has arrived: wait for more (once per
            // time the reader catches up with the writer, never per row).
            guard count == 0, let growing = self.growing else { break }
            switch growing.wait(beyond: self.bufferOffset + self.filled) {
            case .more:
                continue reading
            case .ended:
                break reading
            case .failed(let message):
                throw InputError(file: self.path, line: self.line, message: message)
            }
        }
        if count == 0 { self.atEndOfFile = true }
        self.filled += count
        if !self.startedFile && (self.filled >= 3 || self.atEndOfFile) {
            self.startedFile = true
            if self.filled >= 3 && self.buffer[0] == 0xEF && self.buffer[1] == 0xBB && self.buffer[2] == 0xBF {
                self.position = 3
            }
        }
    }

    /// Parses one record from `position`; nil when the buffer ends first (and the file has more).
    private func parseRecord() throws(InputError) -> Int? {
        guard self.startedFile else { return nil }
        if self.position >= self.filled && self.atEndOfFile { return nil }
        // The field list (a pointer and two counts) is copied out and back so that the loop works on locals.
        var fields = self.fieldList
        fields.count = 0
        let outcome = Self.scan(
            UnsafeBufferPointer(start: self.buffer, count: self.filled),
            from: self.position,
            to: self.filled,
            atEndOfFile: self.atEndOfFile,
            into: &fields
        )
        self.fieldList = fields
        switch outcome {
        case .needMore:
            return nil
        case .record(let end, let lines):
            self.recordOffset = self.bufferOffset + self.position
            let recordLine = self.line
            self.line += lines
            self.position = end
            return recordLine
        case .unclosedQuote:
            throw InputError(file: self.path, line: self.line, message: "a quoted field is not closed")
        case .textAfterQuote(let lines):
            throw InputError(
                file: self.path,
                line: self.line + lines,
                message: "text after a closing quote (a quote inside a quoted field is written \"\")"
            )
        }
    }

    /// Parses the record at the start of `bytes` (a piece of a file read at a record's offset): its fields,
    /// or nil when the record does not end within `bytes` and `complete` is false.
    static func fields(ofRecordIn bytes: UnsafeBufferPointer<UInt8>, complete: Bool) -> [Field]? {
        var fields = FieldList(capacity: 16)
        defer { fields.deallocate() }
        switch Self.scan(bytes, from: 0, to: bytes.count, atEndOfFile: complete, into: &fields) {
        case .record: return Array(fields.fields)
        default: return nil
        }
    }

    private enum ScanOutcome {
        case needMore
        case record(end: Int, lines: Int)
        case unclosedQuote
        case textAfterQuote(lines: Int)
    }

    /// Whether any of the 8 bytes of `word` is a comma, LF or CR. Each byte is XOR-ed with the separator, so that a
    /// match is a zero byte; `(x - 0x01…01) & ~x & 0x80…80` is nonzero exactly when `x` has a zero byte.
    @inline(__always)
    private static func hasFieldEnd(_ word: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        @inline(__always)
        func hasZero(_ value: UInt64) -> UInt64 { (value &- ones) & ~value & highs }
        let comma = word ^ (ones &* UInt64(UInt8(ascii: ",")))
        let newline = word ^ (ones &* UInt64(UInt8(ascii: "\n")))
        let carriageReturn = word ^ (ones &* UInt64(UInt8(ascii: "\r")))
        return hasZero(comma) | hasZero(newline) | hasZero(carriageReturn) != 0
    }

    /// Splits the record at `cursor` into `fields`.
    private static func scan(
        _ bytes: UnsafeBufferPointer<UInt8>,
        from start: Int,
        to end: Int,
        atEndOfFile: Bool,
        into fields: inout FieldList
    ) -> ScanOutcome {
        let quote = UInt8(ascii: "\"")
        let comma = UInt8(ascii: ",")
        let newline = UInt8(ascii: "\n")
        let carriageReturn = UInt8(ascii: "\r")
        var cursor = start
        var lines = 0

        while true {
            if cursor < end && bytes[cursor] == quote {
                let fieldStart = cursor + 1
                var scan = fieldStart
                var escaped = false
                var closed = false
                while scan < end {
                    let byte = bytes[scan]
                    if byte == quote {
                        if scan + 1 < end && bytes[scan + 1] == quote {
                            escaped = true
                            scan += 2
                            continue
                        }
                        if scan + 1 == end && !atEndOfFile { break }  // cannot tell yet
                        closed = true
                        break
                    }
                    // A line break inside the field: LF, CRLF (once) or a bare CR, as between records.
                    if byte == newline || (byte == carriageReturn && (scan + 1 == end || bytes[scan + 1] != newline)) {
                        lines += 1
                    }
                    scan += 1
                }
                guard closed else { return atEndOfFile ? .unclosedQuote : .needMore }
                fields.append(Field(start: fieldStart, end: scan, quoted: true, hasEscapedQuotes: escaped))
                cursor = scan + 1
                if cursor < end, bytes[cursor] != comma, bytes[cursor] != newline, bytes[cursor] != carriageReturn {
                    return .textAfterQuote(lines: lines)
                }
            } else {
                let fieldStart = cursor
                // Eight bytes at a time while none of them ends the field (a token's 64 digits are 8 steps, not 64).
                if let base = bytes.baseAddress {
                    while cursor &+ 8 <= end {
                        let word = UnsafeRawPointer(base + cursor).loadUnaligned(as: UInt64.self)
                        if Self.hasFieldEnd(word) { break }
                        cursor &+= 8
                    }
                }
                while cursor < end {
                    let byte = bytes[cursor]
                    if byte == comma || byte == newline || byte == carriageReturn { break }
                    cursor += 1
                }
                if cursor == end && !atEndOfFile { return .needMore }
                fields.append(Field(start: fieldStart, end: cursor, quoted: false, hasEscapedQuotes: false))
            }

            // After a field: a comma, a line end, or the end of the file.
            if cursor >= end {
                if !atEndOfFile { return .needMore }
                break
            }
            let separator = bytes[cursor]
            if separator == comma {
                cursor += 1
                continue
            }
            // A line end: LF, CRLF or a bare CR (old Mac files), each one line, so that every record has a line
            // of its own (the journal finds a row by its line).
            if separator == carriageReturn {
                guard cursor + 1 < end || atEndOfFile else { return .needMore }
                cursor += 1
                if cursor < end && bytes[cursor] == newline { cursor += 1 }
                lines += 1
            } else if separator == newline {
                cursor += 1
                lines += 1
            }
            break
        }
        return .record(end: cursor, lines: lines)
    }
}
