import Foundation
import SalvoBinary
import SalvoRows

/// The one way a job's record reaches its paths: every output file made and renamed into place, and the journal's
/// finish, pass through here, so that a record written without the job (a second signal's deadline, `close`) is never
/// overwritten or joined by the job's own writing afterwards.
///
/// Two locks: `passing` is held for the whole of each pass (a rename is quick; a file's contents are written outside
/// it), `state` for a moment to read or set `closed`. `close` sets `closed`, then takes `passing` and keeps it until
/// the process ends: a pass in progress ends first, and every later one is refused.
///
/// `@unchecked Sendable`: `closed` and `completed` are guarded by `state`.
public final class OutputGate: @unchecked Sendable {
    private let passing = NSLock()
    private let state = NSLock()
    private var closed = false
    private var completed = false

    public init() {}

    /// How `close` found the job's record.
    public enum Closing: Sendable, Equatable {
        /// No pass of the job's will happen from now on.
        case closed
        /// The job had written its whole record (`pass(completing: true)`): the gate stays open, nothing to do.
        case completed
        /// A pass in progress did not end within the limit: it may still land (nothing else will).
        case busy
    }

    /// Runs `body` (a rename over an output, a new temporary file beside one, the journal's finish) unless the gate
    /// is closed; with `completing`, a body that returns marks the job's record whole.
    ///
    /// - Returns: false, without running `body`, once the gate is closed.
    public func pass(completing: Bool = false, _ body: () throws(JobError) -> Void) throws(JobError) -> Bool {
        // Refused at once when closed (not left waiting on the gate `close` holds); checked again once in.
        guard !self.isClosed else { return false }
        self.passing.lock()
        defer { self.passing.unlock() }
        guard !self.isClosed else { return false }
        try body()
        if completing { self.state.withLock { self.completed = true } }
        return true
    }

    /// Runs `body` unless the gate is closed, which is thrown as the output's failure.
    public func passOrThrow(_ path: String, _ body: () throws(JobError) -> Void) throws(JobError) {
        guard try self.pass(body) else { throw Self.closedError(path) }
    }

    /// Whether `close` has begun: the job's passes are refused.
    public var isClosed: Bool { self.state.withLock { self.closed } }

    /// Whether the job has written its whole record.
    public var isComplete: Bool { self.state.withLock { self.completed } }

    /// Ends every pass of the job's: waits at most `limit` for one in progress, then holds the gate until the process
    /// ends. A job whose record is whole is left as it is (`.completed`).
    public func close(within limit: Duration) -> Closing {
        let already = self.state.withLock { () -> Bool in
            if self.completed { return true }
            self.closed = true
            return false
        }
        if already { return .completed }
        let (seconds, attoseconds) = limit.components
        let wait = Double(seconds) + Double(attoseconds) / 1e18
        guard self.passing.lock(before: Date(timeIntervalSinceNow: wait)) else { return .busy }
        // The pass that just ended may have been the one that completed the record.
        if self.isComplete {
            self.passing.unlock()
            return .completed
        }
        // Held from here to the process's end.
        return .closed
    }

    /// The failure of an output the gate refused.
    static func closedError(_ path: String) -> JobError {
        JobError(.output, "\(path): not written: the job was cut short")
    }
}
