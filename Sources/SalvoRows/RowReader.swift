import APNSWire

/// Reads one file's rows: the token column of each record, parsed, or the reason it cannot be.
final class RowReader {
    /// A row: trivially copied (no reference counted, no value witness called per row), so the reason of a reject is
    /// held apart, in `lastReject`.
    enum Row {
        case token(TokenRow)
        /// The token column holds no token: why is `lastReject`, until the next row.
        case reject
    }

    /// A row's registration time: known (nil when not given), or a field that is not a time.
    enum Registration {
        case known(Int64?)
        case unreadable(InputReject)
    }

    let path: String
    let fileIndex: Int
    private let csv: CSVReader
    // Per-row state, exempt from dynamic exclusivity checks as `CSVReader`'s is (one owner, one thread).
    @exclusivity(unchecked) private var column: Int?
    private let options: TokenSource.Options
    /// `options.encoding`, held apart: reading it through `options` copies the whole struct per row.
    private let encoding: TokenEncoding
    /// A row read while the header was told apart, handed out first; `hasPending` says whether there is one without
    /// copying it (a copy of a `Row` is an outlined copy, every row).
    @exclusivity(unchecked) private var pending: Row? {
        didSet { self.hasPending = self.pending != nil }
    }
    @exclusivity(unchecked) private var hasPending = false
    /// The 0-based index of `options.registeredAt`, once the header is read.
    @exclusivity(unchecked) private var registrationColumn: Int?
    /// The header row's names; nil when the file has none.
    private(set) var headerNames: [String]?

    /// Why the row `next()` returned last is `.reject`.
    private(set) var lastReject: InputReject?

    /// The 0-based index of the token column.
    var tokenColumn: Int { self.column ?? 0 }

    /// The byte offset of the record `next()` returned last.
    var recordOffset: Int { self.csv.recordOffset }

    /// Reads on from `offset`, the start of a record on line `line` (after the header, which was read): a row held
    /// back while the header was told apart is dropped, as it lies before.
    func seek(offset: Int, line: Int) throws(InputError) {
        self.pending = nil
        try self.csv.seek(offset: offset, line: line)
    }

    init(
        path: String,
        spools: InputSpools = InputSpools(),
        fileIndex: Int,
        options: TokenSource.Options
    ) throws(InputError) {
        self.path = path
        self.fileIndex = fileIndex
        self.options = options
        self.encoding = options.encoding
        self.csv = try CSVReader(path: path, spools: spools)
        try self.readHeader()
        // After the header (blank lines before it are passed over): every blank line is a row, refused.
        self.csv.keepsBlankLines = true
    }

    private func readHeader() throws(InputError) {
        guard let line = try self.csv.next() else { return }
        switch self.options.column {
        case .name(let name):
            guard self.options.header != .absent else {
                throw InputError(file: self.path, line: nil, message: "a column chosen by name needs a header row")
            }
            let names = (0..<self.csv.fields.count).map { self.csv.string($0).trimmingSpaces }
            // Header names are matched without regard to case ("Token", "TOKEN").
            let wanted = name.lowercased()
            if let index = names.firstIndex(where: { $0.lowercased() == wanted }) {
                self.column = index
                self.headerNames = names
                self.registrationColumn = try self.registrationIndex(names: names, line: line)
                return
            }
            // No header at all: a plain list whose first row already holds a token is data from its first row.
            if self.options.header == .auto,
                let index = (0..<self.csv.fields.count).first(where: { self.isToken(field: $0) })
            {
                self.column = index
                self.pending = self.row(line: line)
                self.registrationColumn = try self.registrationIndex(names: nil, line: line)
                return
            }
            throw InputError(
                file: self.path,
                line: line,
                message: "no column named '\(name)' in the header (it has: \(names.joined(separator: ", ")))"
            )
        case .number(let number):
            guard number >= 1 else {
                throw InputError(file: self.path, line: nil, message: "column numbers start at 1 (got \(number))")
            }
            self.column = number - 1
            switch self.options.header {
            case .present:
                break
            case .absent:
                self.pending = self.row(line: line)
            case .auto:
                // The first row is data when its token column holds a token.
                let first = self.row(line: line)
                if case .token = first { self.pending = first }
            }
            let names =
                self.pending == nil ? (0..<self.csv.fields.count).map { self.csv.string($0).trimmingSpaces } : nil
            self.headerNames = names
            self.registrationColumn = try self.registrationIndex(names: names, line: line)
        }
    }

    /// Where `options.registeredAt` is, given the header's names (nil: the file has no header row).
    private func registrationIndex(names: [String]?, line: Int) throws(InputError) -> Int? {
        switch self.options.registeredAt {
        case nil:
            return nil
        case .number(let number):
            guard number >= 1 else {
                throw InputError(file: self.path, line: nil, message: "column numbers start at 1 (got \(number))")
            }
            return number - 1
        case .name(let name):
            guard let names else {
                throw InputError(
                    file: self.path,
                    line: nil,
                    message: "--registered-at '\(name)' needs a header row; give the column's number instead"
                )
            }
            guard let index = names.firstIndex(where: { $0.lowercased() == name.lowercased() }) else {
                throw InputError(
                    file: self.path,
                    line: line,
                    message: "no column named '\(name)' in the header (it has: \(names.joined(separator: ", ")))"
                )
            }
            return index
        }
    }

    /// The current record's registration time (`Options.registeredAt`): nil when no column is chosen or the field
    /// is empty; a reject naming the value when it is neither UNIX seconds nor ISO 8601.
    func registrationTime(line: Int) -> Registration {
        guard let column = self.registrationColumn, column < self.csv.fields.count else { return .known(nil) }
        let value = self.csv.string(column)
        if value.trimmingSpaces.isEmpty { return .known(nil) }
        if let time = self.csv.withField(column, UnixTime.parse) { return .known(time) }
        return .unreadable(
            InputReject(
                file: self.path,
                line: line,
                value: value.count > 80 ? String(value.prefix(77)) + "..." : value,
                reason: "registration time is not UNIX seconds or ISO 8601"
            )
        )
    }

    /// Renders the current record's payload into `fields` with the templates of `payloads`, reading the fields of
    /// `columns` (0-based; -1 or past the record: missing) where they lie in the reader's buffer, or from a copy
    /// when one has `""` pairs to undo. The row is held once `fields.keep` is called.
    @inline(__always)
    func renderPayload(
        columns: [Int],
        payloads: RowPayloads,
        into fields: inout RowFields
    ) -> Result<(template: Int, count: Int), PayloadRowError> {
        let csv = self.csv
        return fields.render(payloads) { bounds in
            csv.fieldBounds(columns: columns, into: bounds)
        } copy: { column, scratch in
            let index = columns[column]
            guard index >= 0 && index < csv.fields.count else { return false }
            csv.appendField(index, to: &scratch)
            return true
        }
    }

    /// Whether field `index` of the current record holds a token.
    private func isToken(field index: Int) -> Bool {
        self.csv.withField(index) { bytes in (try? self.options.encoding.token(bytes)) != nil }
    }

    /// The next row; nil at the end of the file.
    ///
    /// Inlined into the loops that take rows, as `row(line:)` is: a `Row` returned through memory from a call was
    /// written in pieces and read back whole, a store the processor cannot forward (about a twentieth of a send's CPU
    /// in the stalls after those calls).
    @inline(__always)
    func next() throws(InputError) -> Row? {
        if self.hasPending, let pending = self.pending {
            self.pending = nil
            return pending
        }
        // The common record first (one line of unquoted fields), the general reader for any other.
        if let line = self.csv.nextPlain() { return self.row(line: line) }
        guard let line = try self.csv.next() else { return nil }
        return self.row(line: line)
    }

    /// The current record's row. The common case inline: a plain field of 64 hex digits; any other field (and every
    /// reject) is `parsedRow(line:)`'s.
    @inline(__always)
    private func row(line: Int) -> Row {
        let column = self.column!
        if case .hex = self.encoding, column < self.csv.fields.count, let bytes = self.csv.plainField(column),
            let token = DeviceToken(compactHex: bytes)
        {
            return .token(
                TokenRow(
                    token: token,
                    line: line,
                    reference: RowReference(file: self.fileIndex, offset: self.csv.recordOffset)
                )
            )
        }
        return self.parsedRow(line: line)
    }

    /// The current record's row by the general rules: a quoted field, the other encodings and forms of a token, and
    /// the reason a field is not one. Kept out of line: it is the rare case, and long.
    @inline(never)
    private func parsedRow(line: Int) -> Row {
        let column = self.column!
        if self.csv.isBlankRecord {
            return self.rejected(
                InputReject(
                    file: self.path,
                    line: line,
                    value: "",
                    reason: "a blank line: no token (a NULL token is written so by a one-column export)"
                )
            )
        }
        guard column < self.csv.fields.count else {
            return self.rejected(
                InputReject(
                    file: self.path,
                    line: line,
                    value: "",
                    reason: "the row has \(self.csv.fields.count) column(s); the token is in column \(column + 1)"
                )
            )
        }
        // The field's bytes in place (a field with `""` pairs is undone into a copy first), parsed with typed throws:
        // no closure, no `Result`, no reference counted per row.
        let token: DeviceToken
        do throws(DeviceTokenError) {
            if let bytes = self.csv.plainField(column) {
                token = try self.encoding.token(bytes)
            } else {
                let parsed = self.csv.withField(column) { bytes in
                    Result { () throws(DeviceTokenError) in try self.encoding.token(bytes) }
                }
                token = try parsed.get()
            }
        } catch {
            var value = self.csv.string(column)
            if value.count > 80 { value = String(value.prefix(77)) + "..." }
            return self.rejected(InputReject(file: self.path, line: line, value: value, reason: error.description))
        }
        return .token(
            TokenRow(
                token: token,
                line: line,
                reference: RowReference(file: self.fileIndex, offset: self.csv.recordOffset)
            )
        )
    }
}

extension RowReader {
    private func rejected(_ reject: InputReject) -> Row {
        self.lastReject = reject
        return .reject
    }
}

extension String {
    var trimmingSpaces: String {
        var text = Substring(self)
        while text.first == " " { text = text.dropFirst() }
        while text.last == " " { text = text.dropLast() }
        return String(text)
    }
}
