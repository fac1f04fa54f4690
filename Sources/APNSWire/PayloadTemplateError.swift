/// A payload template that cannot be used: the file, where in it (when known), and why. Thrown before anything
/// is sent.
public struct PayloadTemplateError: Error, Hashable, Sendable, CustomStringConvertible {
    public let file: String
    public let position: PayloadTemplate.Position?
    public let message: String

    public init(file: String, position: PayloadTemplate.Position?, message: String) {
        self.file = file
        self.position = position
        self.message = message
    }

    /// `template.json, line 3, column 14: '{{name' is not closed…`, escaped (`TerminalText`): the message may quote
    /// the template's own text.
    public var description: String {
        if let position { return TerminalText.escaped("\(self.file), \(position): \(self.message)") }
        return TerminalText.escaped("\(self.file): \(self.message)")
    }
}

/// Why one row's payload cannot be rendered; the row is refused (with its file and line), the others go.
public struct PayloadRowError: Error, Hashable, Sendable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let description: String
        @usableFromInline init(_ description: String) { self.description = description }

        /// The row has no field for a column the template names.
        public static let missingField = Code("missingField")
        /// A field is not UTF-8 (JSON text must be).
        public static let notUTF8 = Code("notUTF8")
        /// An `:int` slot's field is not a JSON integer.
        public static let notInteger = Code("notInteger")
        /// The rendered payload is over the format's limit.
        public static let tooLarge = Code("tooLarge")
        /// No template for the row's language, and no default.
        public static let noTemplate = Code("noTemplate")
    }

    public let code: Code
    public let message: String
    /// The column (a field's name) at fault, when one is.
    public let column: String?
    public var description: String { self.message }

    public init(code: Code, message: String, column: String? = nil) {
        self.code = code
        self.message = message
        self.column = column
    }

    @usableFromInline
    init(_ code: Code, column: String, value: UnsafeRawBufferPointer? = nil) {
        self.code = code
        self.column = column
        switch code {
        case .missingField: self.message = "the row has no field for column '\(column)'"
        case .notUTF8: self.message = "column '\(column)' is not UTF-8 text"
        default:
            var text = value.map { String(decoding: $0, as: UTF8.self) } ?? ""
            if text.count > 40 { text = String(text.prefix(37)) + "..." }
            self.message = "column '\(column)' is '\(text)', not an integer"
        }
    }
}
