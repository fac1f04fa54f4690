import APNSWire
import Foundation
import SalvoBinary
import SalvoRows

/// A job's payload templates as read from their files (`--payload-template FILE`, or `--payload-dir DIR` with a
/// language column): compiled, with each file's size and SHA-256 taken from the very bytes compiled. A journaled job
/// keeps the hashes (`JournalManifest.payloadFiles`), so that a template edited, added or removed between runs is
/// refused by name, as a changed token file is, and a campaign never resumes half in one wording and half in
/// another. `send` and `check` both load templates here.
public struct PayloadTemplateFiles: Sendable {
    public var templates: PayloadTemplates
    /// Every template file the job may use, in the order of `templates.templates` (a folder's in name order).
    public var files: [JournalManifest.Input]

    public init(templates: PayloadTemplates, files: [JournalManifest.Input]) {
        self.templates = templates
        self.files = files
    }

    /// One template for every row.
    ///
    /// - Throws: `JobError(.input)` naming the file, and the line and column of what is wrong.
    public static func load(template path: String) throws(JobError) -> PayloadTemplateFiles {
        let (template, file) = try Self.compile(path)
        return PayloadTemplateFiles(templates: PayloadTemplates(template), files: [file])
    }

    /// Every `.json` file of `folder`, one template per language (its name without `.json`; `default.json` the
    /// fallback), picked by the column `languageColumn`.
    ///
    /// - Throws: `JobError(.input)` for a folder that cannot be listed or holds no template, or a template that does
    ///   not compile (naming it).
    public static func load(folder: String, languageColumn: String) throws(JobError) -> PayloadTemplateFiles {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasSuffix(".json") }
                .sorted()
        } catch {
            throw JobError(.input, "--payload-dir \(folder): cannot list the folder (\(error.localizedDescription))")
        }
        guard !names.isEmpty else {
            throw JobError(.input, "--payload-dir \(folder): the folder holds no .json template")
        }
        var templates: [(tag: String, template: PayloadTemplate)] = []
        var files: [JournalManifest.Input] = []
        for name in names {
            let (template, file) = try Self.compile(folder + "/" + name)
            templates.append((String(name.dropLast(".json".count)), template))
            files.append(file)
        }
        return PayloadTemplateFiles(
            templates: PayloadTemplates(byLanguage: templates, languageColumn: languageColumn),
            files: files
        )
    }

    /// Whether a row can fall back to `default.json` (without it, a row whose language has no template is refused).
    public var hasDefault: Bool {
        // No tag at all finds the default, when there is one.
        self.templates.templateIndex(language: UnsafeRawBufferPointer(start: nil, count: 0)) != nil
    }

    private static func compile(_ path: String) throws(JobError) -> (PayloadTemplate, JournalManifest.Input) {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw JobError(.input, "\(path): cannot read the file (does it exist, and may it be read?)")
        }
        let bytes = [UInt8](data)
        do {
            let template = try PayloadTemplate(json: bytes, file: path)
            return (template, JournalManifest.Input(path: path, bytes: bytes.count, sha256: JobJournal.sha256(bytes)))
        } catch {
            throw JobError(.input, error.description)
        }
    }
}
