import SalvoBinary
import SalvoRows

/// Everything a send did, for both protocols: the report, the refused input rows, the gateway's refusals, the
/// unregistered tokens, and why it stopped early, if it did.
public struct SendResult: Sendable {
    public var report: JobReport
    /// Rows refused before sending (bad hex, wrong length, duplicates), with file, line and reason.
    public var inputRejects: [InputReject]
    /// Rows the gateway or the service refused, in input order.
    public var rejectedRows: [RejectedRow]
    /// Tokens the service called unregistered (HTTP/2 410).
    public var unregistered: [UnregisteredToken]
    /// Why the job stopped before every row had its answer (HTTP/2: credentials refused); nil otherwise.
    public var stopped: String?
    /// Valid rows never answered because the job stopped.
    public var notSent: Int
    /// The error that stopped the job (binary: gateway unreachable, credentials refused, input unreadable); the
    /// result and the files are still written.
    public var error: JobError? = nil
    /// The first connection failures and protocol errors, to explain reconnects.
    public var connectionErrors: [String]
    /// Every valid row the job did not settle, in input order: the unsettled file.
    public var unsettledRows: [UnsettledRow] = []
    /// The valid rows the job never took from its input, after every row above: spilled to a file as they were read
    /// (the unsettled file's tail), or only counted when no unsettled file was asked for.
    public var unsettledTail: UnsettledTail?
    /// The outputs that could not be written whole (the report's own failure among them, which the report cannot
    /// hold): the console names them and the exit status is 3.
    public var outputFailures: [OutputFailure] = []

    /// Every unsettled row: those listed and those of the tail.
    public var unsettledCount: Int { self.unsettledRows.count + (self.unsettledTail?.count ?? 0) }

    /// Whether every row was valid and delivered, and every output written: exit status 0.
    public var isComplete: Bool { self.report.isComplete && self.stopped == nil && self.outputFailures.isEmpty }
}
