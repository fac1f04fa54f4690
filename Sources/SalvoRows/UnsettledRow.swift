/// A valid row the job did not settle, for the unsettled file: a token file of its own (`token` first), so that
/// `salvo send FILE` sends exactly these rows again.
public struct UnsettledRow: Hashable, Sendable, Codable {
    /// Why the row has no end.
    public enum Outcome: String, Hashable, Sendable, Codable, CaseIterable {
        /// Written on a connection that ended with no answer, and not resent (`--on-uncertain report`, or the
        /// retries ran out): it may or may not have arrived.
        case uncertain
        /// Written, and unanswered when the job stopped (a signal, a fatal error).
        case unanswered
        /// Never written, or given back to be written again, when the job stopped.
        case unsent
        /// Sent alone, it made the gateway drop the connection with no answer, again and again (command 0 has no
        /// error response): it may or may not have arrived, and is not sent again.
        case connectionDropped = "uncertain: connection dropped"
    }

    public var token: String
    /// The input file the row came from.
    public var file: String
    public var line: Int
    public var outcome: Outcome

    public init(token: String, file: String, line: Int, outcome: Outcome) {
        self.token = token
        self.file = file
        self.line = line
        self.outcome = outcome
    }

    /// The CSV header of the unsettled file: the token column is the one `salvo send` reads by default.
    public static let csvHeader = "token,file,line,outcome"

    /// One CSV line (fields quoted where needed).
    public var csvLine: String {
        [self.token, self.file, String(self.line), self.outcome.rawValue].map(csvField).joined(separator: ",")
    }
}
