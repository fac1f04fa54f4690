import APNSWire
import SalvoBinary
import SalvoHTTP2
import SalvoRows

/// One bulk send: the token files, how to read them, which protocol carries them, and where the results go.
public struct SendRequest: Sendable {
    /// Which provider interface, with its job configuration.
    public enum Interface: Sendable {
        /// The binary provider interface (commands 0, 1, 2).
        case binary(BinaryJobConfiguration)
        /// The HTTP/2 provider API.
        case http2(HTTP2JobConfiguration)
    }

    /// CSV files of device tokens, sent in order.
    public var files: [String]
    /// The files that hold the inputs among `files` that are not files of their name: `-` (standard input) and
    /// `postgres` (a query's rows), spooled by the caller before the job.
    public var inputSpools = InputSpools()
    public var input: TokenSource.Options
    public var interface: Interface
    public var outputs: SendOutputs
    /// A suppression file (`SuppressionList`): rows whose token it lists are counted as suppressed, never sent.
    public var suppress: String?
    /// Where the job keeps its journal, so that the same request run again resumes it (nil: no journal).
    public var journal: SendJournal?
    /// A payload per row, rendered from the row's columns (nil: the interface's one payload for every row). Rows
    /// that cannot be rendered, or render over the format's limit, are refused with their line.
    public var payloads: PayloadTemplates?
    /// The files `payloads` came from, with their sizes and hashes (`PayloadTemplateFiles.files`): a journaled job
    /// keeps them, and refuses to resume when one changed, appeared or is gone.
    public var payloadFiles: [JournalManifest.Input] = []
    /// The options that change what is sent and are not in the request's values as such, as the user wrote them
    /// (`SendJournal.settings`'s kind): with the request's own, the report's `job` fingerprint, which `report merge`
    /// compares between partitions.
    public var settings: [String: String] = [:]
    /// Rows of each file read before the first connection: a file whose first chunk holds no token is refused at
    /// once. The other rows are validated as they are sent (`TokenSource.open()`).
    public var firstChunkRows = 1000
    /// Where the tokens the service reported gone are recorded once the job's outcomes are final (`--write-back`),
    /// beside the `unregistered` file; nil: nowhere else.
    public var writeBack: (any GoneTokenRecorder)?

    public init(
        files: [String],
        input: TokenSource.Options = TokenSource.Options(),
        interface: Interface,
        outputs: SendOutputs = SendOutputs(),
        suppress: String? = nil,
        journal: SendJournal? = nil,
        payloads: PayloadTemplates? = nil
    ) {
        self.files = files
        self.input = input
        self.interface = interface
        self.outputs = outputs
        self.suppress = suppress
        self.journal = journal
        self.payloads = payloads
    }

    /// The settings that change what is sent, by name, for the journal to compare between runs: the caller's
    /// (as the user wrote them: a relative expiry stays relative), the protocol, the gateway, the payload's hash
    /// and how the input is read.
    func journalSettings(_ journal: SendJournal) -> [String: String] {
        var settings = journal.settings
        settings["gateway"] = self.gateway
        settings["input"] = String(describing: self.input)
        settings["suppress"] = self.suppress ?? ""
        switch self.interface {
        case .binary(let configuration):
            settings["protocol"] = "binary"
            settings["payload"] = JobJournal.sha256(configuration.template.payload.bytes)
            settings["format"] = String(describing: configuration.template.command)
        case .http2(let configuration):
            settings["protocol"] = "h2"
            settings["payload"] = JobJournal.sha256(configuration.payload.bytes)
            // The expiry as the user wrote it is the caller's: a relative one gives another time on every run.
            var headers = configuration.headers
            headers.expiration = nil
            settings["headers"] = String(describing: headers)
        }
        return settings
    }

    /// The most a payload may hold on this interface: the binary command's limit, or the push type's over HTTP/2.
    public var payloadLimit: PayloadLimit {
        switch self.interface {
        case .binary(let configuration): configuration.template.command.payloadLimit
        case .http2(let configuration): (configuration.headers.pushType ?? .alert).payloadLimit
        }
    }

    /// "HOST:PORT" of the gateway.
    public var gateway: String {
        switch self.interface {
        case .binary(let configuration): "\(configuration.host):\(configuration.port)"
        case .http2(let configuration): "\(configuration.client.host):\(configuration.client.port)"
        }
    }

    /// What the job does with rows whose fate is unknown.
    public var onUncertain: OnUncertain {
        switch self.interface {
        case .binary(let configuration): configuration.onUncertain
        case .http2(let configuration): configuration.onUncertain
        }
    }

    /// Connections the job opens.
    public var connections: Int {
        switch self.interface {
        case .binary(let configuration): configuration.connections
        case .http2(let configuration): configuration.client.connections
        }
    }
}

/// A job's journal: the folder, and the settings (as the user wrote them) that change what is sent and are not in
/// the request's values as such (a relative `--expiry +3600`, the priority).
public struct SendJournal: Hashable, Sendable {
    public var directory: String
    public var settings: [String: String]
    /// How long to wait for another run that holds the journal to end (`--wait-for-journal`; 0: refuse at once).
    public var waitSeconds: Double = 0
    /// Begin the job again in the folder, whatever it holds (`--journal-restart`): rows an earlier run delivered
    /// may be sent again.
    public var restart = false

    public init(directory: String, settings: [String: String] = [:], waitSeconds: Double = 0, restart: Bool = false) {
        self.directory = directory
        self.settings = settings
        self.waitSeconds = waitSeconds
        self.restart = restart
    }
}

/// Where a send writes its results; nil: not written.
public struct SendOutputs: Hashable, Sendable {
    /// The `JobReport` as JSON.
    public var report: String?
    /// Refused rows as CSV: bad input rows, then the gateway's refusals (`RejectedRow.csvHeader`).
    public var rejects: String?
    /// A suppression file (`SuppressionList`) to merge the unregistered and invalid tokens into.
    public var unregistered: String?
    /// Every valid row not settled, as a token file (`UnsettledRow.csvHeader`): sending it again retries exactly
    /// those rows.
    public var unsettled: String?

    public init(
        report: String? = nil,
        rejects: String? = nil,
        unregistered: String? = nil,
        unsettled: String? = nil
    ) {
        self.report = report
        self.rejects = rejects
        self.unregistered = unregistered
        self.unsettled = unsettled
    }

    /// Where the unsettled file goes when only the report is named: next to it, `report.json` →
    /// `report.unsettled.csv` (the report's extension, if any, replaced).
    public static func unsettledPath(nextTo report: String) -> String {
        let nameStart = report.lastIndex(of: "/").map { report.index(after: $0) } ?? report.startIndex
        // A dot that starts the name (".report") is not an extension.
        guard let dot = report[nameStart...].lastIndex(of: "."), dot > nameStart else {
            return report + ".unsettled.csv"
        }
        return String(report[..<dot]) + ".unsettled.csv"
    }

    /// Every path with the option that names it, in a fixed order.
    var named: [(option: String, path: String)] {
        [
            ("--report", self.report), ("--rejects", self.rejects), ("--unregistered", self.unregistered),
            ("--unsettled", self.unsettled),
        ]
        .compactMap { option, path in path.map { (option, $0) } }
    }
}
