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
/// too, as `JobJournal.lineEnds` counts them) and blank lines (skipped).
///
/// Written by hand because it is on the per-row path: a record is parsed into field ranges over the
/// chunk, with no allocation per row (the field array is reused), which no CSV library here offers.
/// Not thread-safe: one reader, one owner.
final class CSVReader {
    /// One field's place within the current chunk.
    struct Field {
        var start: Int
        var end: Int
        /// Quoted in the file: the bytes exclude the quotes but may still hold `""` pairs.
        var quoted: Bool
        var hasEscapedQuotes: Bool
    }

    let path: String
    private let descriptor: Int32
    // The state read and written for every row is exempt from dynamic exclusivity checks: one owner uses a reader
    // from one thread, and no method hands a property out `inout` while another touches it. The checks were about a
    // tenth of a 10 M-row send's CPU (`swift_beginAccess` on these, the row reader's and the shard's properties).
    @exclusivity(unchecked) private var buffer: [UInt8]
    @exclusivity(unchecked) private var position = 0
    @exclusivity(unchecked) private var filled = 0
    @exclusivity(unchecked) private var atEndOfFile = false
    @exclusivity(unchecked) private var line = 1
    @exclusivity(unchecked) private var startedFile = false
    private let maximumRecordBytes: Int

    /// The fields of the record `next()` last returned; valid until the next call.
    @exclusivity(unchecked) private(set) var fields: [Field] = []
    /// The file offset of the record `next()` last returned.
    @exclusivity(unchecked) private(set) var recordOffset = 0
    /// The file offset of `buffer[0]`.
    @exclusivity(unchecked) private var bufferOffset = 0

    /// Opens `path` for reading.
    ///
    /// - Throws: `InputError` naming the file when it cannot be opened.
    init(path: String, chunkSize: Int = 1 << 20, maximumRecordBytes: Int = 1 << 20) throws(InputError) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw InputError(
                file: path,
                line: nil,
                message: "cannot open the file: \(String(cString: strerror(errno)))"
            )
        }
        self.path = path
        self.descriptor = descriptor
        self.buffer = [UInt8](repeating: 0, count: max(chunkSize, 4096))
        self.maximumRecordBytes = maximumRecordBytes
        self.fields.reserveCapacity(16)
    }

    deinit {
        close(self.descriptor)
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
        self.fields.removeAll(keepingCapacity: true)
    }

    /// Reads the next non-blank record.
    ///
    /// - Returns: the line the record starts on, or nil at the end of the file. The record's fields are in
    ///   `fields`, their bytes readable through `withField`.
    /// - Throws: `InputError` for a read error, a quote that is never closed, or text after a closing quote.
    func next() throws(InputError) -> Int? {
        while true {
            if let line = try self.parseRecord() {
                if self.fields.count == 1 && self.fields[0].start == self.fields[0].end && !self.fields[0].quoted {
                    continue  // a blank line
                }
                return line
            }
            if self.atEndOfFile { return nil }
            try self.refill()
        }
    }

    /// Calls `body` with the bytes of field `index` of the current record, quotes removed and `""` pairs
    /// undone (into a temporary copy only when the field has such pairs).
    func withField<Result>(_ index: Int, _ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        let field = self.fields[index]
        if field.hasEscapedQuotes {
            var unescaped: [UInt8] = []
            var cursor = field.start
            while cursor < field.end {
                unescaped.append(self.buffer[cursor])
                cursor += self.buffer[cursor] == UInt8(ascii: "\"") ? 2 : 1
            }
            return try unescaped.withUnsafeBytes(body)
        }
        return try self.buffer.withUnsafeBytes { all in
            try body(UnsafeRawBufferPointer(rebasing: all[field.start..<field.end]))
        }
    }

    /// Appends the bytes of field `index` of the current record to `out`, quotes removed and `""` pairs undone.
    func appendField(_ index: Int, to out: inout [UInt8]) {
        let field = self.fields[index]
        if field.hasEscapedQuotes {
            var cursor = field.start
            while cursor < field.end {
                out.append(self.buffer[cursor])
                cursor += self.buffer[cursor] == UInt8(ascii: "\"") ? 2 : 1
            }
        } else {
            out.append(contentsOf: self.buffer[field.start..<field.end])
        }
    }

    /// The text of field `index` of the current record.
    func string(_ index: Int) -> String {
        self.withField(index) { String(decoding: $0, as: UTF8.self) }
    }

    /// Moves unread bytes to the front of the buffer and reads more after them.
    private func refill() throws(InputError) {
        let unread = self.filled - self.position
        if self.position > 0 {
            self.buffer.withUnsafeMutableBytes { raw in
                if unread > 0 {
                    raw.baseAddress!.copyMemory(from: raw.baseAddress! + self.position, byteCount: unread)
                }
            }
            self.bufferOffset += self.position
            self.position = 0
            self.filled = unread
        }
        if self.filled == self.buffer.count {
            // One record fills the whole buffer: grow, up to the record limit.
            guard self.buffer.count < self.maximumRecordBytes else {
                throw InputError(
                    file: self.path,
                    line: self.line,
                    message: "a record longer than \(self.maximumRecordBytes) bytes (is a quote never closed?)"
                )
            }
            self.buffer.append(contentsOf: [UInt8](repeating: 0, count: self.buffer.count))
        }
        let count = self.buffer.withUnsafeMutableBytes { raw -> Int in
            while true {
                let count = read(self.descriptor, raw.baseAddress! + self.filled, raw.count - self.filled)
                if count < 0 && errno == EINTR { continue }
                return count
            }
        }
        guard count >= 0 else {
            throw InputError(
                file: self.path,
                line: self.line,
                message: "read failed: \(String(cString: strerror(errno)))"
            )
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
        // The field list is moved out and back so that the loop works on locals: class properties would
        // cost an exclusivity check on every byte.
        var fields: [Field] = []
        swap(&fields, &self.fields)
        defer { swap(&fields, &self.fields) }
        fields.removeAll(keepingCapacity: true)
        let outcome = self.buffer.withUnsafeBufferPointer { bytes in
            Self.scan(
                bytes,
                from: self.position,
                to: self.filled,
                atEndOfFile: self.atEndOfFile,
                into: &fields
            )
        }
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
        var fields: [Field] = []
        switch Self.scan(bytes, from: 0, to: bytes.count, atEndOfFile: complete, into: &fields) {
        case .record: return fields
        default: return nil
        }
    }

    private enum ScanOutcome {
        case needMore
        case record(end: Int, lines: Int)
        case unclosedQuote
        case textAfterQuote(lines: Int)
    }

    /// Splits the record at `cursor` into `fields`.
    private static func scan(
        _ bytes: UnsafeBufferPointer<UInt8>,
        from start: Int,
        to end: Int,
        atEndOfFile: Bool,
        into fields: inout [Field]
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
