import APNSWire
import SalvoBinary
import SalvoRows

extension Preflight {
    /// A payload per row, as `send` loads it (`PayloadTemplateFiles`): each template compiles (JSON, placeholders,
    /// with the file, line and column of what is wrong), its structure with every field empty suits the priority,
    /// and that least rendering is within each interface's limit (every field a row fills makes it longer: the
    /// token files' check measures each row). A folder without `default.json` is a warning: a row whose language has
    /// no template is refused.
    ///
    /// - Returns: the checks, and the templates when they loaded (for the token files' check).
    public static func templates(_ request: Request) -> (results: [CheckResult], templates: PayloadTemplateFiles?) {
        let loaded: PayloadTemplateFiles
        do throws(JobError) {
            if let file = request.payloadTemplate {
                loaded = try PayloadTemplateFiles.load(template: file)
            } else if let folder = request.payloadDir {
                loaded = try PayloadTemplateFiles.load(folder: folder, languageColumn: request.languageColumn)
            } else {
                return ([], nil)
            }
        } catch {
            return ([.fail("payload", error.message)], nil)
        }
        var results: [CheckResult] = []
        var fits = true
        for template in loaded.templates.templates {
            do {
                try template.probe.check(priority: request.priority)
            } catch {
                results.append(.fail("payload", "\(template.file): \(error.message)"))
                fits = false
                continue
            }
            for limit in request.payloadLimits where template.probe.byteCount > limit.bytes {
                results.append(
                    .fail(
                        "payload",
                        "\(template.file): \(template.probe.byteCount) bytes with every field empty, over \(limit): "
                            + "no row would go"
                    )
                )
                fits = false
            }
        }
        let columns = loaded.templates.columns.filter { name in
            loaded.templates.languageColumn.map { loaded.templates.columns[$0] != name } ?? true
        }
        let sizes = loaded.templates.templates.map(\.probe.byteCount)
        let named =
            request.payloadDir.map { "\($0): \(loaded.templates.templates.count) template(s)" }
            ?? (request.payloadTemplate ?? "")
        if fits {
            let size = sizes.min() == sizes.max() ? "\(sizes[0])" : "\(sizes.min()!)–\(sizes.max()!)"
            let within = request.payloadLimits.map(\.description).joined(separator: ", ")
            results.append(
                .ok(
                    "payload",
                    "\(named), placeholders \(columns.isEmpty ? "none" : columns.joined(separator: ", ")): \(size) "
                        + "bytes with every field empty\(within.isEmpty ? "" : ", within \(within)"); each row adds "
                        + "its fields"
                )
            )
        }
        if let folder = request.payloadDir, !loaded.hasDefault {
            results.append(
                .warning(
                    "payload",
                    "\(folder) has no \(PayloadTemplates.defaultName).json: a row whose '\(request.languageColumn)' "
                        + "names a language without a template is refused"
                )
            )
        }
        return (results, loaded)
    }
}
