import Foundation
import NIOCore
import PostgresNIO

/// How a column of a query's result is written into the CSV spool, chosen by its type.
///
/// The server sends every column in its binary form; each is written as PostgreSQL's own text form would show it (what
/// `\copy … TO STDOUT CSV` writes), except that times are in UTC: `2026-11-23 17:29:49.5+00`. Text columns are copied
/// byte for byte. A type outside this list is refused by name with the cast that makes it text, rather than written
/// as something it is not; one the server defines at run time (an enum, `citext`, whose identifiers are 16384 or more)
/// is copied as text when its bytes are printable UTF-8.
enum PostgresColumnFormat: Sendable {
    case text
    case jsonb
    case bool
    case int2
    case int4
    case int8
    case oid
    case float4
    case float8
    case numeric
    case uuid
    case bytea
    case date
    case timestamp
    case timestamptz
    /// A type made by `CREATE TYPE` or an extension: its binary form, for enums and `citext`, is its text.
    case userDefined

    /// The first identifier PostgreSQL gives a type made at run time (`FirstNormalObjectId`).
    static let firstUserDefined: UInt32 = 16384

    init?(_ type: PostgresDataType) {
        switch type {
        case .text, .varchar, .bpchar, .name, .char, .json, .xml: self = .text
        case .jsonb: self = .jsonb
        case .bool: self = .bool
        case .int2: self = .int2
        case .int4: self = .int4
        case .int8: self = .int8
        case .oid: self = .oid
        case .float4: self = .float4
        case .float8: self = .float8
        case .numeric: self = .numeric
        case .uuid: self = .uuid
        case .bytea: self = .bytea
        case .date: self = .date
        case .timestamp: self = .timestamp
        case .timestamptz: self = .timestamptz
        default:
            guard type.rawValue >= Self.firstUserDefined else { return nil }
            self = .userDefined
        }
    }

    /// Whether a column of this type may hold the tokens: text (`text`, `varchar`, `char(n)`, `name`) or a type
    /// defined at run time whose values are text (`citext`, a domain over text reports its base type).
    var holdsText: Bool {
        switch self {
        case .text, .userDefined: true
        default: false
        }
    }

    /// The type's name as PostgreSQL writes it, for messages.
    static func name(_ type: PostgresDataType) -> String {
        if type.rawValue >= Self.firstUserDefined { return "a type defined in the database (oid \(type.rawValue))" }
        return type.knownSQLName?.lowercased() ?? "oid \(type.rawValue)"
    }

    /// Writes `value` (the column's binary form) as text into `writer`.
    ///
    /// - Returns: nil when written; else why the value could not be read (nothing was written).
    func write(_ value: ByteBuffer, cell: PostgresCell, to writer: CSVSpoolWriter) -> String? {
        var value = value
        switch self {
        case .text:
            value.withUnsafeReadableBytes { writer.field($0) }
        case .jsonb:
            guard value.readInteger(as: UInt8.self) == 1 else { return "not jsonb version 1" }
            value.withUnsafeReadableBytes { writer.field($0) }
        case .userDefined:
            let printable = value.withUnsafeReadableBytes { bytes in
                !bytes.contains { $0 < 0x20 && $0 != 0x09 && $0 != 0x0A && $0 != 0x0D }
                    && String(validating: bytes, as: UTF8.self) != nil
            }
            guard printable else { return "its binary form is not text" }
            value.withUnsafeReadableBytes { writer.field($0) }
        case .bool:
            guard let flag = value.readInteger(as: UInt8.self) else { return "empty" }
            writer.byte(flag == 0 ? UInt8(ascii: "f") : UInt8(ascii: "t"))
        case .int2:
            guard let number = value.readInteger(as: Int16.self) else { return "not 2 bytes" }
            writer.integer(Int64(number))
        case .int4:
            guard let number = value.readInteger(as: Int32.self) else { return "not 4 bytes" }
            writer.integer(Int64(number))
        case .int8:
            guard let number = value.readInteger(as: Int64.self) else { return "not 8 bytes" }
            writer.integer(number)
        case .oid:
            guard let number = value.readInteger(as: UInt32.self) else { return "not 4 bytes" }
            writer.integer(Int64(number))
        case .float4:
            guard let bits = value.readInteger(as: UInt32.self) else { return "not 4 bytes" }
            writer.string(Self.floatText(Double(Float(bitPattern: bits))))
        case .float8:
            guard let bits = value.readInteger(as: UInt64.self) else { return "not 8 bytes" }
            writer.string(Self.floatText(Double(bitPattern: bits)))
        case .numeric:
            guard let decimal = try? cell.decode(Decimal.self) else { return "not a number Salvo can read" }
            writer.string(decimal.description)
        case .uuid:
            guard value.readableBytes == 16 else { return "not 16 bytes" }
            value.withUnsafeReadableBytes { bytes in
                for (index, byte) in bytes.enumerated() {
                    if index == 4 || index == 6 || index == 8 || index == 10 { writer.byte(UInt8(ascii: "-")) }
                    writer.byte(Self.hexDigit(byte >> 4))
                    writer.byte(Self.hexDigit(byte & 0x0F))
                }
            }
        case .bytea:
            writer.ascii("\\x")
            value.withUnsafeReadableBytes { bytes in
                for byte in bytes {
                    writer.byte(Self.hexDigit(byte >> 4))
                    writer.byte(Self.hexDigit(byte & 0x0F))
                }
            }
        case .date:
            guard let days = value.readInteger(as: Int32.self) else { return "not 4 bytes" }
            if days == Int32.max || days == Int32.min {
                writer.ascii(days == Int32.max ? "infinity" : "-infinity")
            } else {
                writer.string(Self.dateText(days: Int64(days) + Self.daysFrom1970To2000))
            }
        case .timestamp, .timestamptz:
            guard let microseconds = value.readInteger(as: Int64.self) else { return "not 8 bytes" }
            if microseconds == Int64.max || microseconds == Int64.min {
                writer.ascii(microseconds == Int64.max ? "infinity" : "-infinity")
            } else {
                writer.string(Self.timestampText(microseconds, zoned: self == .timestamptz))
            }
        }
        return nil
    }

    /// Days from 1970-01-01 to 2000-01-01, PostgreSQL's epoch.
    static let daysFrom1970To2000: Int64 = 10_957

    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
    }

    /// PostgreSQL's text for a float: `NaN`, `Infinity`, `-Infinity`, else the shortest exact decimal.
    static func floatText(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value < 0 ? "-Infinity" : "Infinity" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return String(value)
    }

    /// `YYYY-MM-DD` of a day counted from 1970-01-01 (Howard Hinnant's `civil_from_days`).
    static func dateText(days: Int64) -> String {
        let shifted = days + 719_468
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        return "\(Self.padded(year, 4))-\(Self.padded(month, 2))-\(Self.padded(day, 2))"
    }

    /// `YYYY-MM-DD HH:MM:SS[.ffffff]` (and `+00` when `zoned`) of microseconds from 2000-01-01 00:00 UTC.
    static func timestampText(_ microseconds: Int64, zoned: Bool) -> String {
        let perDay: Int64 = 86_400_000_000
        var days = microseconds / perDay
        var within = microseconds % perDay
        if within < 0 {
            within += perDay
            days -= 1
        }
        let seconds = within / 1_000_000
        let fraction = within % 1_000_000
        var text = Self.dateText(days: days + Self.daysFrom1970To2000)
        text +=
            " \(Self.padded(seconds / 3600, 2)):\(Self.padded(seconds / 60 % 60, 2)):\(Self.padded(seconds % 60, 2))"
        if fraction > 0 {
            var digits = Self.padded(fraction, 6)
            while digits.hasSuffix("0") { digits.removeLast() }
            text += "." + digits
        }
        return zoned ? text + "+00" : text
    }

    private static func padded(_ value: Int64, _ width: Int) -> String {
        let digits = String(value)
        return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
    }
}
