import Foundation

/// The sample data shipped with Salvo, as package resources: the token sample (`tokens/sample.csv`), the guide's
/// example payloads and the benchmark payload (`payloads/`), and the fault plans (`faults/`). The files are
/// `data/` of the source tree, copied next to the executable when it is built, so the commands that use them run
/// from any folder.
public enum SalvoData {
    /// The path of a shipped file, such as `faults/hostile.json`; nil when it is not shipped.
    public static func path(_ relative: String) -> String? {
        guard let url = Bundle.module.resourceURL?.appendingPathComponent(relative),
            FileManager.default.fileExists(atPath: url.path)
        else { return nil }
        return url.path
    }

    /// The names of the shipped fault plans (`clean`, `demo`, `realistic`, `hostile`), sorted.
    public static var faultPlans: [String] {
        guard let folder = Bundle.module.resourceURL?.appendingPathComponent("faults"),
            let names = try? FileManager.default.contentsOfDirectory(atPath: folder.path)
        else { return [] }
        return names.filter { $0.hasSuffix(".json") }.map { String($0.dropLast(5)) }.sorted()
    }

    /// A fault plan given as a shipped name (`hostile`) or a file path: the path to read.
    public static func faultPlanPath(_ nameOrPath: String) -> String {
        if !nameOrPath.contains("/"), !nameOrPath.hasSuffix(".json"),
            let shipped = Self.path("faults/\(nameOrPath).json")
        {
            return shipped
        }
        if !FileManager.default.fileExists(atPath: nameOrPath), let shipped = Self.path(nameOrPath) { return shipped }
        if !FileManager.default.fileExists(atPath: nameOrPath),
            nameOrPath.hasPrefix("data/"), let shipped = Self.path(String(nameOrPath.dropFirst(5)))
        {
            return shipped
        }
        return nameOrPath
    }
}
