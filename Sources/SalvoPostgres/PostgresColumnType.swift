import PostgresNIO

/// What a column's type means to a query's copy: whether it may hold the tokens, and its name in messages. Every
/// column is written by the server in its own text form (`COPY … TO STDOUT`), so only the token column is judged.
enum PostgresColumnType {
    /// The first identifier PostgreSQL gives a type made at run time (`FirstNormalObjectId`).
    static let firstUserDefined: UInt32 = 16384

    /// Whether a column of this type may hold the tokens: text (`text`, `varchar`, `char(n)`, `name`, `"char"`,
    /// `json`, `xml`) or a type defined at run time, whose values are text for `citext` and enums (a domain over
    /// text reports its base type).
    static func holdsText(_ type: PostgresDataType) -> Bool {
        switch type {
        case .text, .varchar, .bpchar, .name, .char, .json, .xml: true
        default: type.rawValue >= Self.firstUserDefined
        }
    }

    /// The type's name as PostgreSQL writes it, for messages.
    static func name(_ type: PostgresDataType) -> String {
        if type.rawValue >= Self.firstUserDefined { return "a type defined in the database (oid \(type.rawValue))" }
        return type.knownSQLName?.lowercased() ?? "oid \(type.rawValue)"
    }
}
