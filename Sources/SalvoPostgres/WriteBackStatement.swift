import SalvoRows

/// The statement a write-back runs once per batch of gone tokens, with the batch as arrays: the default table's
/// `INSERT … ON CONFLICT (token) DO NOTHING`, or the user's own statement with named parameters.
///
/// The user's statement (`--write-back-sql`) names its values as `:tokens` (`text[]`, 64 lowercase hex digits each),
/// `:reasons` (`text[]`), `:reported_at` (`timestamptz[]`, NULL where the service gave no time) and `:job` (`text`):
/// the arrays hold one element per token, in the same order, for `UNNEST`. A colon directly followed by a name is a
/// parameter, except inside quotes, comments and after another colon (`x::text` is a cast). Its idempotency is the
/// statement's own (`ON CONFLICT DO NOTHING`, a `WHERE` that skips rows already marked).
///
/// Pure: the text and the parameters' order, tested without a server.
public struct WriteBackStatement: Hashable, Sendable {
    /// A value the statement takes, bound in `parameters` order as `$1`, `$2`, ….
    public enum Parameter: String, Hashable, Sendable, CaseIterable {
        case tokens
        case reasons
        case reportedAt = "reported_at"
        case job

        /// The placeholder's type, cast where it stands: the timestamps travel as an array literal (`text`), which
        /// holds NULL elements.
        var cast: String {
            switch self {
            case .tokens, .reasons: "::text[]"
            case .reportedAt: "::text::timestamptz[]"
            case .job: "::text"
            }
        }
    }

    /// The SQL with `$n` placeholders.
    public let sql: String
    /// The values to bind, in placeholder order.
    public let parameters: [Parameter]
    /// What the report and messages call the destination: the table, or `--write-back-sql`.
    public let target: String

    /// The table layout `--write-back TABLE` expects (`salvo_gone_tokens` by default), for the documentation and the
    /// tests: the token is its key, so a token is recorded once.
    public static func createTable(_ table: String = defaultTable) -> String {
        """
        CREATE TABLE \(table) (
            token       text PRIMARY KEY,
            reason      text NOT NULL,
            reported_at timestamptz,
            job         text,
            written_at  timestamptz NOT NULL DEFAULT now()
        )
        """
    }

    public static let defaultTable = "salvo_gone_tokens"

    /// Inserts into `table` (laid out as `createTable`), leaving a token already there as it is.
    ///
    /// - Throws: `JobError(.configuration)` when `table` is not a plain name (`name` or `schema.name`: letters,
    ///   digits, `_`), which is used as written (PostgreSQL folds it to lower case, as psql would).
    public init(table: String) throws(JobError) {
        let parts = table.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), parts.allSatisfy(Self.isPlainName) else {
            throw JobError(
                .configuration,
                "--write-back \(table): a table is named name or schema.name (letters, digits "
                    + "and _, not starting with a digit); give --write-back-sql for anything else"
            )
        }
        self.sql = """
            INSERT INTO \(table) (token, reason, reported_at, job) \
            SELECT g.token, g.reason, g.reported_at, $4::text \
            FROM UNNEST($1::text[], $2::text[], $3::text::timestamptz[]) AS g(token, reason, reported_at) \
            ON CONFLICT (token) DO NOTHING
            """
        self.parameters = [.tokens, .reasons, .reportedAt, .job]
        self.target = table
    }

    /// The user's statement, its named parameters replaced by placeholders.
    ///
    /// - Throws: `JobError(.configuration)` for an empty statement, one that never names `:tokens`, an unknown
    ///   parameter, or an unterminated quote or comment.
    public init(sql: String) throws(JobError) {
        var scanner = Scanner(Array(sql.unicodeScalars))
        var output = String.UnicodeScalarView()
        var order: [Parameter] = []
        while let scalar = scanner.peek() {
            switch scalar {
            case "'", "\"":
                output.append(contentsOf: try scanner.quoted(scalar))
            case "-" where scanner.peek(1) == "-":
                output.append(contentsOf: scanner.lineComment())
            case "/" where scanner.peek(1) == "*":
                output.append(contentsOf: try scanner.blockComment())
            case "$" where scanner.dollarTag() != nil:
                output.append(contentsOf: try scanner.dollarQuoted())
            case ":" where scanner.peek(1) == ":":
                // A cast: both colons, and the type name after them is not a parameter.
                output.append(contentsOf: scanner.take(2))
            case ":" where scanner.peek(1).map(Self.startsName) == true:
                scanner.skip(1)
                let name = String(String.UnicodeScalarView(scanner.name()))
                guard let parameter = Parameter(rawValue: name) else {
                    throw JobError(
                        .configuration,
                        "--write-back-sql: :\(name) is not a parameter (known: "
                            + Parameter.allCases.map { ":" + $0.rawValue }.joined(separator: ", ") + ")"
                    )
                }
                if !order.contains(parameter) { order.append(parameter) }
                let number = order.firstIndex(of: parameter)! + 1
                output.append(contentsOf: "$\(number)\(parameter.cast)".unicodeScalars)
            default:
                output.append(scalar)
                scanner.skip(1)
            }
        }
        var text = String(output)
        while let last = text.unicodeScalars.last, last == ";" || last == " " || last == "\n" || last == "\t" {
            text.unicodeScalars.removeLast()
        }
        guard !text.isEmpty else { throw JobError(.configuration, "--write-back-sql is empty") }
        guard order.contains(.tokens) else {
            throw JobError(
                .configuration,
                "--write-back-sql names no :tokens: the statement gets each batch's tokens as :tokens (text[]), "
                    + "e.g. UPDATE devices SET gone = true WHERE token = ANY(:tokens)"
            )
        }
        self.sql = text
        self.parameters = order
        self.target = "--write-back-sql"
    }

    /// `timestamps` (milliseconds since 1970, nil for none) as a PostgreSQL array literal of UTC times
    /// (`{"2026-11-26 16:00:00.123+00",NULL}`), which the statement casts to `timestamptz[]`.
    public static func timestampArray(_ timestamps: some Sequence<Int64?>) -> String {
        var text = "{"
        var first = true
        for timestamp in timestamps {
            if !first { text += "," }
            first = false
            guard let timestamp else {
                text += "NULL"
                continue
            }
            text += "\"" + Self.utc(milliseconds: timestamp) + "\""
        }
        return text + "}"
    }

    /// `2026-11-26 16:00:00.123+00`: ISO 8601 as PostgreSQL reads it, whatever the session's time zone.
    static func utc(milliseconds: Int64) -> String {
        let seconds = milliseconds >= 0 ? milliseconds / 1000 : (milliseconds - 999) / 1000
        let millis = Int(milliseconds - seconds * 1000)
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let second = Int(seconds - days * 86_400)
        let (year, month, day) = Self.civil(days: days)
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let fraction = millis < 10 ? "00\(millis)" : millis < 100 ? "0\(millis)" : "\(millis)"
        return "\(year)-\(two(month))-\(two(day)) \(two(second / 3600)):\(two(second / 60 % 60)):\(two(second % 60))"
            + ".\(fraction)+00"
    }

    /// Year, month and day of the day `days` after 1970-01-01 (proleptic Gregorian; Howard Hinnant's algorithm).
    static func civil(days: Int64) -> (Int64, Int, Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = Int(dayOfYear - (153 * monthIndex + 2) / 5 + 1)
        let month = Int(monthIndex < 10 ? monthIndex + 3 : monthIndex - 9)
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    private static func isPlainName(_ part: Substring) -> Bool {
        guard let first = part.unicodeScalars.first, startsName(first) else { return false }
        return part.unicodeScalars.allSatisfy { startsName($0) || ("0"..."9").contains($0) }
    }

    private static func startsName(_ scalar: Unicode.Scalar) -> Bool {
        ("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar) || scalar == "_"
    }

    /// Walks the statement's text, copying quoted strings, comments and dollar-quoted bodies whole.
    private struct Scanner {
        let text: [Unicode.Scalar]
        var at = 0

        init(_ text: [Unicode.Scalar]) { self.text = text }

        func peek(_ offset: Int = 0) -> Unicode.Scalar? {
            self.at + offset < self.text.count ? self.text[self.at + offset] : nil
        }

        mutating func skip(_ count: Int) { self.at = min(self.at + count, self.text.count) }

        mutating func take(_ count: Int) -> [Unicode.Scalar] {
            let end = min(self.at + count, self.text.count)
            defer { self.at = end }
            return Array(self.text[self.at..<end])
        }

        /// `'…'` or `"…"`, a doubled quote inside it included.
        mutating func quoted(_ quote: Unicode.Scalar) throws(JobError) -> [Unicode.Scalar] {
            let start = self.at
            self.skip(1)
            while let scalar = self.peek() {
                self.skip(1)
                guard scalar == quote else { continue }
                if self.peek() == quote {
                    self.skip(1)
                    continue
                }
                return Array(self.text[start..<self.at])
            }
            throw JobError(.configuration, "--write-back-sql: a \(quote) quote is not closed")
        }

        mutating func lineComment() -> [Unicode.Scalar] {
            let start = self.at
            while let scalar = self.peek(), scalar != "\n" { self.skip(1) }
            return Array(self.text[start..<self.at])
        }

        mutating func blockComment() throws(JobError) -> [Unicode.Scalar] {
            let start = self.at
            self.skip(2)
            var depth = 1
            while depth > 0 {
                guard let scalar = self.peek() else {
                    throw JobError(.configuration, "--write-back-sql: a /* comment is not closed")
                }
                if scalar == "*" && self.peek(1) == "/" {
                    depth -= 1
                    self.skip(2)
                } else if scalar == "/" && self.peek(1) == "*" {
                    depth += 1
                    self.skip(2)
                } else {
                    self.skip(1)
                }
            }
            return Array(self.text[start..<self.at])
        }

        /// The tag of a dollar quote starting here (`$$` or `$name$`), nil when `$` starts something else (`$1`).
        func dollarTag() -> [Unicode.Scalar]? {
            var end = self.at + 1
            while end < self.text.count, self.text[end] != "$" {
                let scalar = self.text[end]
                let allowed =
                    WriteBackStatement.startsName(scalar) || (end > self.at + 1 && ("0"..."9").contains(scalar))
                guard allowed else { return nil }
                end += 1
            }
            guard end < self.text.count else { return nil }
            return Array(self.text[self.at...end])
        }

        mutating func dollarQuoted() throws(JobError) -> [Unicode.Scalar] {
            let start = self.at
            let tag = self.dollarTag()!
            self.skip(tag.count)
            while self.at < self.text.count {
                if self.text[self.at] == "$", self.at + tag.count <= self.text.count,
                    Array(self.text[self.at..<self.at + tag.count]) == tag
                {
                    self.skip(tag.count)
                    return Array(self.text[start..<self.at])
                }
                self.skip(1)
            }
            throw JobError(
                .configuration,
                "--write-back-sql: a \(String(String.UnicodeScalarView(tag))) quote is not closed"
            )
        }

        mutating func name() -> [Unicode.Scalar] {
            let start = self.at
            while let scalar = self.peek(), WriteBackStatement.startsName(scalar) || ("0"..."9").contains(scalar) {
                self.skip(1)
            }
            return Array(self.text[start..<self.at])
        }
    }
}
