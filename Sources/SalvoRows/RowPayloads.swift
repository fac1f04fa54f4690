import APNSWire

/// A payload per row: the job's templates and the format's limit. Each row is measured when the input is validated
/// (a row that cannot be rendered, or renders over `limit`, is refused with its file and line), and rendered
/// straight into the frame or request body when it is sent.
public struct RowPayloads: Sendable {
    public var templates: PayloadTemplates
    public var limit: PayloadLimit

    public init(templates: PayloadTemplates, limit: PayloadLimit) {
        self.templates = templates
        self.limit = limit
    }

    /// The largest payload a row may render to.
    public var maximumByteCount: Int { self.limit.bytes }

    /// The 0-based column of each of `templates.columns` in a file whose header is `names`.
    ///
    /// - Throws: `InputError` naming the file, and the template and position of a placeholder that names no
    ///   column of it (or the language column it lacks).
    public func columns(in file: String, header names: [String]?) throws(InputError) -> [Int] {
        guard let names else {
            throw InputError(
                file: file,
                line: nil,
                message: "payload templates name columns of the header row, and the file has none"
            )
        }
        let lowered = names.map { $0.lowercased() }
        var indices: [Int] = []
        for (index, column) in self.templates.columns.enumerated() {
            if let found = lowered.firstIndex(of: column.lowercased()) {
                indices.append(found)
                continue
            }
            let has = "(it has: \(names.joined(separator: ", ")))"
            if index == self.templates.languageColumn {
                throw InputError(
                    file: file,
                    line: 1,
                    message: "no language column named '\(column)' in the header \(has)"
                )
            }
            let named =
                self.templates.templates.lazy.compactMap { template in
                    template.position(of: column).map { "\(template.file), \($0)" }
                }.first ?? "a payload template"
            throw InputError(
                file: file,
                line: 1,
                message: "\(named): {{\(column)}} names no column of the header \(has)"
            )
        }
        return indices
    }
}
