/// The payload templates of one job: one template for every row, or one per language picked by a column of the
/// row (server-side localization), with `default` as the last resort.
///
/// A row's language tag finds its template by the tag, then by the tag cut at its last `-` again and again
/// (`pt-BR` → `pt`), then `default` (RFC 4647 lookup; case and `_` for `-` do not matter). Every template is
/// bound to one column list, `columns`, so a row's fields are read once whichever template it takes.
/// Immutable and `Sendable`.
public struct PayloadTemplates: Sendable {
    /// The name of the template every row without a template of its own takes.
    public static let defaultName = "default"

    /// The templates, bound to `columns`.
    public let templates: [PayloadTemplate]
    /// Every column a template names, then the language column (if any), first use first.
    public let columns: [String]
    /// The index in `columns` of the language column; nil with a single template.
    public let languageColumn: Int?
    /// Language tags (lowercased, `-`), parallel to `templates`; `default` for the default.
    @usableFromInline let tags: [[UInt8]]
    @usableFromInline let defaultIndex: Int?
    /// Per template, the rule its rows must meet beyond rendering (a Live Activity's event and dismissal date from
    /// columns: `checkingLiveActivity`); nil when no template has one.
    public internal(set) var rowChecks: [LiveActivityRowCheck?]?

    /// One template for every row.
    public init(_ template: PayloadTemplate) {
        self.templates = [template.bound(to: template.columns)]
        self.columns = template.columns
        self.languageColumn = nil
        self.tags = [Array(Self.defaultName.utf8)]
        self.defaultIndex = 0
    }

    /// One template per language tag (`default` for the fallback), picked by the column `languageColumn`.
    public init(byLanguage: [(tag: String, template: PayloadTemplate)], languageColumn: String) {
        var columns: [String] = []
        for (_, template) in byLanguage {
            for name in template.columns where !columns.contains(where: { $0.lowercased() == name.lowercased() }) {
                columns.append(name)
            }
        }
        let language = columns.firstIndex { $0.lowercased() == languageColumn.lowercased() }
        if language == nil { columns.append(languageColumn) }
        self.columns = columns
        self.languageColumn = language ?? columns.count - 1
        self.templates = byLanguage.map { $0.template.bound(to: columns) }
        self.tags = byLanguage.map { Array(Self.normalized($0.tag).utf8) }
        self.defaultIndex = self.tags.firstIndex(of: Array(Self.defaultName.utf8))
    }

    static func normalized(_ tag: String) -> String {
        String(tag.lowercased().map { $0 == "_" ? "-" : $0 })
    }

    /// The larger of the templates' literal sizes: the least any rendering takes.
    public var literalByteCount: Int { self.templates.map(\.literalByteCount).max() ?? 0 }

    /// The template for a row's language tag: the tag, the tag cut at its last `-` (repeatedly), then the default.
    @inlinable
    public func templateIndex(language: UnsafeRawBufferPointer) -> Int? {
        var count = language.count
        while count > 0 && language[count - 1] == 0x20 { count -= 1 }
        while count > 0 {
            if let index = self.exactIndex(language, count: count) { return index }
            var cut = count - 1
            while cut > 0 && language[cut] != UInt8(ascii: "-") && language[cut] != UInt8(ascii: "_") { cut -= 1 }
            count = cut
        }
        return self.defaultIndex
    }

    @usableFromInline
    func exactIndex(_ language: UnsafeRawBufferPointer, count: Int) -> Int? {
        outer: for (index, tag) in self.tags.enumerated() where tag.count == count {
            for offset in 0..<count {
                var byte = language[offset]
                if byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") { byte |= 0x20 }
                if byte == UInt8(ascii: "_") { byte = UInt8(ascii: "-") }
                if byte != tag[offset] { continue outer }
            }
            return index
        }
        return nil
    }

    /// The template a row takes, or why it has none (no template for its language) or is refused by the template's
    /// row check.
    @inlinable
    func chooseTemplate(_ fields: PayloadFields) -> Result<Int, PayloadRowError> {
        let index: Int
        if let languageColumn = self.languageColumn {
            // A row without the language field (a short row) takes the default, as a tag with no template does.
            let language = fields.field(languageColumn)
            guard let found = language.map({ self.templateIndex(language: $0) }) ?? self.defaultIndex else {
                let tag = fields.field(languageColumn).map { String(decoding: $0, as: UTF8.self) } ?? ""
                return .failure(
                    PayloadRowError(
                        code: .noTemplate,
                        message: "no template for language '\(tag)' and no \(Self.defaultName) template"
                    )
                )
            }
            index = found
        } else {
            index = 0
        }
        if let checks = self.rowChecks, let check = checks[index], let refusal = check.check(fields) {
            return .failure(refusal)
        }
        return .success(index)
    }

    /// The template a row takes and the size it renders to, or why the row cannot go: no template for its
    /// language, a field the template cannot take, a rendering over `limit`.
    @inlinable
    public func measure(
        _ fields: PayloadFields,
        limit: PayloadLimit
    ) -> Result<(template: Int, count: Int), PayloadRowError> {
        let index: Int
        switch self.chooseTemplate(fields) {
        case .failure(let error): return .failure(error)
        case .success(let chosen): index = chosen
        }
        // Without a retain of the template: both shards measure and render with the same one, and a retain per row
        // of one object from two cores bounces its count between them (a fifth of a templated send's CPU).
        let rendered = self.templates.withUnsafeBufferPointer { templates in
            Unmanaged.passUnretained(templates[index])._withUnsafeGuaranteedRef { $0.renderedCount(fields) }
        }
        switch rendered {
        case .failure(let error):
            return .failure(error)
        case .success(let count):
            guard count <= limit.bytes else { return .failure(Self.tooLarge(count, limit)) }
            return .success((index, count))
        }
    }

    /// Renders the row with the template it takes into `out` (at least `limit.bytes` of room) in one pass: the
    /// template and the bytes written, or why the row cannot go (as `measure` would say it). What `measure` and
    /// `PayloadTemplate.render` do in two reads of each field, for rows whose payload is kept once rendered.
    @inlinable
    public func render(
        _ fields: PayloadFields,
        limit: PayloadLimit,
        into out: UnsafeMutableRawBufferPointer
    ) -> Result<(template: Int, count: Int), PayloadRowError> {
        precondition(out.count >= limit.bytes, "no room for a payload at the limit")
        let index: Int
        switch self.chooseTemplate(fields) {
        case .failure(let error): return .failure(error)
        case .success(let chosen): index = chosen
        }
        let area = UnsafeMutableRawBufferPointer(rebasing: out[0..<limit.bytes])
        return self.templates.withUnsafeBufferPointer { templates in
            // Without a retain of the template, as in `measure`.
            Unmanaged.passUnretained(templates[index])._withUnsafeGuaranteedRef { template in
                if let count = template.renderChecked(fields, into: area) { return .success((index, count)) }
                // Refused or over the limit: the measure says which, exactly as it would have said it alone.
                switch template.renderedCount(fields) {
                case .failure(let error):
                    return .failure(error)
                case .success(let count):
                    precondition(count > limit.bytes, "a row that renders within the limit was refused")
                    return .failure(Self.tooLarge(count, limit))
                }
            }
        }
    }

    @usableFromInline
    static func tooLarge(_ count: Int, _ limit: PayloadLimit) -> PayloadRowError {
        PayloadRowError(
            code: .tooLarge,
            message: "the rendered payload is \(count) bytes; \(limit.name) allows at most \(limit.bytes)"
        )
    }
}
