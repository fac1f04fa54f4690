import APNSWire
import ArgumentParser
import Foundation
import SalvoBinary
import SalvoConsole
import SalvoRows
import SalvoSend

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

    /// Refuses more than one of the three; `send` needs one of them (`isGiven`), `check` none.
    func validate() throws {
        let given = [self.payload, self.payloadTemplate, self.payloadDir].compactMap { $0 }
        guard given.count <= 1 else {
            throw ValidationError("give one of --payload, --payload-template and --payload-dir")
        }
    }

    /// Whether a payload, a template or a folder of templates is named.
    var isGiven: Bool { self.payload != nil || self.payloadTemplate != nil || self.payloadDir != nil }

    /// The templates, compiled, with their files' hashes (for the journal); nil with `--payload` (or none).
    ///
    /// - Throws: `UserError` naming the file and the position of what is wrong.
    func templates() throws -> PayloadTemplateFiles? {
        do throws(JobError) {
            if let file = self.payloadTemplate { return try PayloadTemplateFiles.load(template: file) }
            guard let folder = self.payloadDir else { return nil }
            return try PayloadTemplateFiles.load(folder: folder, languageColumn: self.languageColumn)
        } catch {
            throw UserError(error.message)
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

    /// With `--push-type liveactivity`: the payload, or each template's structure, checked as a Live Activity
    /// notification (`LiveActivityCheck`) before anything connects. An error refuses the send, naming the file and
    /// the field; a warning (priority 10 is budgeted, a field the event ignores) goes to standard error unless
    /// `quiet`. The templates come back carrying what each row must still meet (an event or a dismissal date from a
    /// column), so such a row is refused with its file and line, not sent.
    func liveActivityChecked(
        _ templates: PayloadTemplates?,
        priority: NotificationPriority,
        quiet: Bool
    ) throws -> PayloadTemplates? {
        let now = Int64(Date().timeIntervalSince1970)
        var reports: [(file: String, report: LiveActivityReport)] = []
        var checked = templates
        if let templates {
            let result = templates.checkingLiveActivity(priority: priority, now: now)
            checked = result.templates
            reports = result.reports
        } else if let file = self.payload {
            let payload: Payload
            do {
                payload = try Payload(jsonBytes: try readFile(file))
            } catch let error as PayloadError {
                throw UserError("\(file): \(error.message)")
            }
            reports = [(file, LiveActivityCheck.check(payload: payload, priority: priority, now: now))]
        }
        let errors = reports.flatMap { file, report in report.errors.map { "\(file): \($0)" } }
        guard errors.isEmpty else {
            throw UserError("not a Live Activity notification APNs would deliver: " + errors.joined(separator: "; "))
        }
        if !quiet {
            // One line per warning, said once even when every template of a folder earns it.
            var said = Set<String>()
            for (file, report) in reports {
                for warning in report.warnings where said.insert(warning.description).inserted {
                    printError("\(file): \(warning)", prefix: "Warning: ")
                }
            }
        }
        return checked
    }
}
