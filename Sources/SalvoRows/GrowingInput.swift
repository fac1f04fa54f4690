import Foundation

/// An input file that another part of the process is still writing (the rows of a PostgreSQL query as they arrive):
/// its reader, at the end of what is written so far, waits for more instead of taking it for the end of the input,
/// so that the job sends the first rows while the last are still coming.
///
/// The writer says how far the file is written (`wrote(through:)`, once those bytes are in the file) and how the
/// writing ended (`finish()`, or `fail(_:)` with the reason, which the reader throws as an input error naming the
/// line it had reached). A reader waits at most `stallLimit` for a writer that has gone quiet: then the input fails,
/// so no job waits on its input without a bound.
///
/// Named in the job's `InputSpools` with the file it grows; a file without one is read as written.
public final class GrowingInput: @unchecked Sendable {
    /// What a reader at the end of the written bytes is told.
    public enum Wait: Equatable, Sendable {
        /// More bytes are in the file: read again.
        case more
        /// The writing ended: what the file holds is the whole input.
        case ended
        /// The writing failed, with the reason; the input ends there.
        case failed(String)
    }

    /// The longest a reader waits for the writer's next bytes.
    public let stallLimit: Duration
    /// How the writer names itself in a stall's message ("the query's rows").
    public let writerName: String
    // `condition` guards everything below.
    private let condition = NSCondition()
    private var written = 0
    private var ended = false
    private var failure: String?

    public init(writerName: String, stallLimit: Duration = .seconds(120)) {
        self.writerName = writerName
        self.stallLimit = stallLimit
    }

    /// The file holds `bytes` bytes now (they were written before this call).
    public func wrote(through bytes: Int) {
        self.condition.lock()
        if bytes > self.written {
            self.written = bytes
            self.condition.broadcast()
        }
        self.condition.unlock()
    }

    /// The writing is complete: the file is the whole input.
    public func finish() {
        self.condition.lock()
        self.ended = true
        self.condition.broadcast()
        self.condition.unlock()
    }

    /// The writing failed: readers stop at what was written, with `message`.
    public func fail(_ message: String) {
        self.condition.lock()
        if self.failure == nil && !self.ended { self.failure = message }
        self.condition.broadcast()
        self.condition.unlock()
    }

    /// Blocks until the file holds more than `offset` bytes, the writing has ended, or it failed — or until the
    /// writer has been quiet for `stallLimit`, which is a failure.
    public func wait(beyond offset: Int) -> Wait {
        self.condition.lock()
        defer { self.condition.unlock() }
        let seconds =
            Double(self.stallLimit.components.seconds) + Double(self.stallLimit.components.attoseconds) * 1e-18
        let deadline = Date(timeIntervalSinceNow: seconds)
        while true {
            if self.written > offset { return .more }
            if let failure = self.failure { return .failed(failure) }
            if self.ended { return .ended }
            if !self.condition.wait(until: deadline) && self.written <= offset && !self.ended && self.failure == nil {
                return .failed("\(self.writerName) stopped arriving: nothing new for \(Int(seconds)) s")
            }
        }
    }

    /// Whether the writing has ended or failed (the file will not grow again).
    public var isSettled: Bool {
        self.condition.lock()
        defer { self.condition.unlock() }
        return self.ended || self.failure != nil
    }
}
