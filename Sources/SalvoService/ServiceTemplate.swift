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
        let columns = self.template.columns
        var bytes: [UInt8] = []
        var bounds: [UInt32] = []
        bounds.reserveCapacity(2 * columns.count)
        for column in columns {
            guard let value = fields[column] else {
                bounds.append(PayloadFields.missing)
                bounds.append(PayloadFields.missing)
                continue
            }
            bounds.append(UInt32(bytes.count))
            bytes.append(contentsOf: value.utf8)
            bounds.append(UInt32(bytes.count))
        }
        return bytes.withUnsafeBytes { raw in
            bounds.withUnsafeBufferPointer { bounds in
                let row = PayloadFields(bytes: raw, bounds: bounds, sendTime: now)
                switch self.template.renderedCount(row) {
                case .failure(let error):
                    let field = columns.first { error.message.contains("'\($0)'") }
                    return .failure(RenderFailure(field: field, reason: Self.reason(error, field: field)))
                case .success(let count):
                    var out = [UInt8](repeating: 0, count: count)
                    let written = out.withUnsafeMutableBytes { self.template.render(row, into: $0) }
                    return .success(Array(out.prefix(written)))
                }
            }
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
