import APNSWire

/// What makes a send one job beyond its input files (which the report lists with their sizes) and its partition: the
/// options that change what is sent and the payload files' hashes. `salvo report merge` refuses parts whose
/// fingerprints differ, naming each difference, so that two partitions sent with other payloads are never merged
/// into one job's "every row delivered".
public struct JobFingerprint: Codable, Hashable, Sendable {
    /// The options that change what is sent, by name, as the user wrote them: protocol, gateway, the payload's
    /// SHA-256, format, expiry, priority, headers, how the input is read (without the partition), the suppression
    /// file.
    public var settings: [String: String]
    /// The payload template files (`--payload-template`, each `.json` of `--payload-dir`) by path, with their SHA-256.
    public var payloadFiles: [String: String]

    public init(settings: [String: String], payloadFiles: [String: String] = [:]) {
        self.settings = settings
        self.payloadFiles = payloadFiles
    }

    /// Every way `other` differs from this one, a phrase each (`payload: 3f2a… against 91bc…`), in name order;
    /// empty when they are one job's.
    public func differences(from other: JobFingerprint) -> [String] {
        var found: [String] = []
        for name in Set(self.settings.keys).union(other.settings.keys).sorted() {
            let mine = self.settings[name]
            let theirs = other.settings[name]
            guard mine != theirs else { continue }
            found.append("\(name): \(Self.shown(mine)) against \(Self.shown(theirs))")
        }
        for path in Set(self.payloadFiles.keys).union(other.payloadFiles.keys).sorted() {
            let mine = self.payloadFiles[path]
            let theirs = other.payloadFiles[path]
            guard mine != theirs else { continue }
            found.append("payload file \(path): \(Self.shown(mine)) against \(Self.shown(theirs))")
        }
        return found
    }

    private static func shown(_ value: String?) -> String {
        guard let value else { return "(none)" }
        guard !value.isEmpty else { return "(empty)" }
        // A hash is told apart by its first digits.
        if value.count == 64, value.allSatisfy(\.isHexDigit) { return "sha256 " + value.prefix(12) + "…" }
        return TerminalText.escaped(value)
    }
}
