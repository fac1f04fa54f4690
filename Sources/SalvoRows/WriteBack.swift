/// Where the tokens a job found gone are recorded beyond its files: the user's own table (`send --write-back`,
/// `feedback --into-postgres`), so that the next campaign's query leaves them out.
///
/// A job hands over its final list once, after every row's outcome is settled: the tokens the service called
/// unregistered (HTTP/2 410, with the time it gave) and those either interface refused as invalid (binary status 8,
/// HTTP/2 `BadDeviceToken`), the same tokens as the `--unregistered` file. Recording is idempotent: a token already
/// recorded is not written again, so a rerun of the same job writes nothing twice.
public protocol GoneTokenRecorder: Sendable {
    /// Where the tokens go, for the report and messages (`salvo_gone_tokens at 127.0.0.1:5432/app`): never a
    /// password.
    var destination: String { get }

    /// Records `tokens`; never throws: what could not be recorded, and why, is in the returned report.
    func record(_ tokens: [GoneToken]) async -> WriteBackReport
}

/// A token the push service reported gone, as a write-back records it.
public struct GoneToken: Hashable, Sendable, Codable {
    /// 64 lowercase hex digits.
    public var token: String
    /// Why: `Unregistered`, `InvalidToken`, `BadDeviceToken`, `Feedback`.
    public var reason: String
    /// When the service says the device stopped taking notifications (milliseconds since 1970): HTTP/2 410's
    /// timestamp, the feedback service's time; nil when it gave none (an invalid token).
    public var reportedAt: Int64?

    public init(token: String, reason: String, reportedAt: Int64?) {
        self.token = token
        self.reason = reason
        self.reportedAt = reportedAt
    }

    public init(_ token: UnregisteredToken) {
        self.init(token: token.token, reason: token.reason, reportedAt: token.timestamp)
    }

    /// One entry per token, in first-seen order: a token listed twice (a repeated input row) keeps its latest
    /// reported time.
    public static func unique(_ tokens: some Sequence<GoneToken>) -> [GoneToken] {
        var index: [String: Int] = [:]
        var unique: [GoneToken] = []
        for token in tokens {
            guard let at = index[token.token] else {
                index[token.token] = unique.count
                unique.append(token)
                continue
            }
            if let time = token.reportedAt, time > (unique[at].reportedAt ?? Int64.min) { unique[at] = token }
        }
        return unique
    }
}

/// What a write-back did (`JobReport.writeBack`): how many tokens it was given, how many rows it wrote, how many it
/// found recorded already, and how many it could not record, with why.
public struct WriteBackReport: Codable, Hashable, Sendable {
    /// Where the tokens went (`GoneTokenRecorder.destination`).
    public var destination: String
    /// Distinct tokens handed over.
    public var tokens: Int
    /// Rows the statements wrote (inserted, or changed by a `--write-back-sql` statement).
    public var written: Int
    /// Tokens recorded and not written: already there (an earlier run, another job).
    public var alreadyRecorded: Int
    /// Tokens not recorded because a batch failed (the server down, the table missing, no permission): the batches
    /// committed before it stay written.
    public var failed: Int
    /// Why the rest failed; nil when every token was recorded.
    public var error: String?

    public init(
        destination: String,
        tokens: Int,
        written: Int = 0,
        alreadyRecorded: Int = 0,
        failed: Int = 0,
        error: String? = nil
    ) {
        self.destination = destination
        self.tokens = tokens
        self.written = written
        self.alreadyRecorded = alreadyRecorded
        self.failed = failed
        self.error = error
    }

    /// Whether every token is recorded (written now or before).
    public var isComplete: Bool { self.error == nil && self.failed == 0 }

    /// One line for a person.
    public var summary: String {
        var line =
            "\(self.tokens) gone token(s) to \(self.destination): \(self.written) written, "
            + "\(self.alreadyRecorded) already recorded"
        if let error { line += ", \(self.failed) NOT recorded: \(error)" }
        return line
    }

    /// The failure as an output the job could not write whole (exit status 3, the journal not finished).
    public var outputFailure: OutputFailure? {
        guard let error else { return nil }
        return OutputFailure(
            output: OutputFailure.writeBack,
            path: self.destination,
            error: error,
            rowsMissing: self.failed
        )
    }
}

extension OutputFailure {
    /// The `output` of a failed write-back (`WriteBackReport.outputFailure`): its `path` is the destination.
    public static let writeBack = "write-back"
}
