import SalvoBinary
import SalvoRows

extension JobFingerprint {
    /// The fingerprint of `request`'s job: the settings a journal compares between runs (the caller's, the protocol,
    /// the gateway, the payload's hash, the headers, how the input is read), without the partition's index (the
    /// count stays: `partitions`), and the payload template files' hashes.
    public init(_ request: SendRequest) {
        var whole = request
        whole.input.partition = nil
        let callers = request.settings.isEmpty ? request.journal?.settings ?? [:] : request.settings
        var settings = whole.journalSettings(SendJournal(directory: "", settings: callers))
        settings["partitions"] = String(request.input.partition?.count ?? 1)
        self.init(
            settings: settings,
            payloadFiles: Dictionary(request.payloadFiles.map { ($0.path, $0.sha256) }, uniquingKeysWith: { a, _ in a })
        )
    }
}
