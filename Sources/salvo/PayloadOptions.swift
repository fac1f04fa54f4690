import APNSWire
import ArgumentParser
import Foundation

/// What `send` sends: one payload for every row, or a payload per row from a template (or a folder of templates,
/// one per language).
struct PayloadOptions: ParsableArguments {
    @Option(help: "The JSON payload file, the same for every row.")
    var payload: String?

    @Option(
        help:
            "A JSON payload whose string values hold {{column}} placeholders, filled from each row's CSV columns (JSON-escaped); \"{{column:int}}\" as a whole value takes a number."
    )
    var payloadTemplate: String?

    @Option(
        help:
            "A folder of templates, one per language (pt-BR.json, pt.json, …, default.json): each row takes the one its --language-column names, then the language without its region (pt-BR → pt), then default.json."
    )
    var payloadDir: String?

    @Option(help: "With --payload-dir: the column that holds each row's language tag.")
    var languageColumn: String = "lang"

    func validate() throws {
        let given = [self.payload, self.payloadTemplate, self.payloadDir].compactMap { $0 }
        guard given.count == 1 else {
            throw ValidationError("give one of --payload, --payload-template and --payload-dir")
        }
    }

    /// The templates, compiled; nil with `--payload`.
    ///
    /// - Throws: `UserError` naming the file and the position of what is wrong.
    func templates() throws -> PayloadTemplates? {
        if let file = self.payloadTemplate {
            return PayloadTemplates(try Self.compile(file))
        }
        guard let folder = self.payloadDir else { return nil }
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasSuffix(".json") }
                .sorted()
        } catch {
            throw UserError("--payload-dir \(folder): cannot list the folder (\(error.localizedDescription))")
        }
        guard !names.isEmpty else { throw UserError("--payload-dir \(folder): the folder holds no .json template") }
        let templates = try names.map { name in
            (tag: String(name.dropLast(".json".count)), template: try Self.compile(folder + "/" + name))
        }
        return PayloadTemplates(byLanguage: templates, languageColumn: self.languageColumn)
    }

    private static func compile(_ file: String) throws -> PayloadTemplate {
        do {
            return try PayloadTemplate(json: try readFile(file), file: file)
        } catch let error as PayloadTemplateError {
            throw UserError(error.description)
        }
    }

    /// The payload every row shares, for `--payload`; with templates, the first template's structure (its probe).
    func sharedPayload(_ templates: PayloadTemplates?) throws -> (payload: Payload, file: String) {
        if let first = templates?.templates.first { return (first.probe, first.file) }
        let file = self.payload!
        do {
            return (try Payload(jsonBytes: try readFile(file)), file)
        } catch let error as PayloadError {
            throw UserError("\(file): \(error.message)")
        }
    }
}
