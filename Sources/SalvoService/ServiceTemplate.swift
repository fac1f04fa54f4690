import APNSWire

/// A payload template stored in the service under a name: the same `PayloadTemplate` as `send
/// --payload-template` (`{{field}}` placeholders in string values, `"{{$now}}"`), filled from a notification's
/// `fields` instead of a row's columns.
public struct ServiceTemplate: Sendable {
    public let name: String
    /// The template's JSON text as it was stored.
    public let text: [UInt8]
    let template: PayloadTemplate

    /// Names a template may have: 1 to 64 letters, digits, `.`, `_` and `-`.
    public static func isValidName(_ name: String) -> Bool {
        (1...64).contains(name.utf8.count)
            && name.utf8.allSatisfy { byte in
                (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                    || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
            }
    }

    /// Reads a template.
    ///
    /// - Throws: the reason it cannot be a template (not JSON, no `aps` object, a bad placeholder), as the bulk
    ///   sender words it.
    public init(name: String, text: [UInt8]) throws(FieldError) {
        do {
            self.template = try PayloadTemplate(json: text, file: "template \(name)")
        } catch {
            throw FieldError(field: "template", reason: error.message)
        }
        self.name = name
        self.text = text
    }

    /// The fields the template names (`$now` aside).
    public var fields: [String] { self.template.columns }

    /// The payload for `fields` (by name; a field the template does not name is ignored), or the field that is
    /// missing or unfit and why.
    public func render(_ fields: [String: String], now: Int64 = 0) -> Result<[UInt8], RenderFailure> {
        self.template.render(fields: self.template.columns.map { fields[$0] }, sendTime: now).mapError { error in
            RenderFailure(field: error.column, reason: Self.reason(error, field: error.column))
        }
    }

    /// Why a notification's fields cannot fill the template.
    public struct RenderFailure: Error, Hashable, Sendable {
        /// The field at fault, when one is.
        public var field: String?
        public var reason: String
    }

    /// The bulk sender's wording speaks of a row's columns; a notification has fields.
    private static func reason(_ error: PayloadRowError, field: String?) -> String {
        guard let field else { return error.message }
        switch error.code {
        case .missingField: return "the template names field '\(field)', which the notification does not give"
        case .notUTF8: return "field '\(field)' is not UTF-8 text"
        case .notInteger: return "field '\(field)' fills a number in the template and is not an integer"
        default: return error.message
        }
    }
}
