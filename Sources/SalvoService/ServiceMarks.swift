import Foundation
import SalvoRows

/// What the sending job did with each row it took, as `send --journal` keeps it: a `RowJournal` (one byte per row in
/// a file mapped shared, a store per mark, no system call) that the job marks written before a request goes out and
/// confirmed or rejected when it is answered. A mark survives the process being killed at any moment, so after a
/// restart a row the store still calls "sending" is told apart: never written (queued again, no doubt), written and
/// unanswered (uncertain), or answered before the store heard (its answer recorded, not sent again).
///
/// Rows are marked at `seq % capacity`: a ring far larger than the rows ever handed to the job at once (the feed,
/// the read-ahead and the streams in flight), each place reset when a row is handed out.
public final class ServiceMarks: Sendable {
    /// Places in the ring.
    public static let capacity = 1 << 20

    let journal: RowJournal
    private let statePath: String
    private let logPath: String

    /// Opens the marks in `directory` (`marks.state`, `marks.rejects`), or makes them.
    public init(directory: String) throws(StoreFailure) {
        self.statePath = directory + "/marks.state"
        self.logPath = directory + "/marks.rejects"
        do {
            self.journal = try RowJournal(
                statePath: self.statePath,
                logPath: self.logPath,
                lineCounts: [Self.capacity]
            )
        } catch {
            throw StoreFailure("\(self.statePath): \(error.message)")
        }
    }

    /// The line a row with this sequence number has in the sending job.
    public static func line(_ seq: Int) -> Int { seq % Self.capacity }

    /// A row about to be handed to the job: its place holds no earlier row's mark.
    func handOut(_ seq: Int) {
        self.journal.mark(file: 0, line: Self.line(seq), .none)
    }

    /// What the job did with each row before the service stopped (the refusals' log read once).
    public func marks() -> @Sendable (Int) -> RowMark {
        let log = (try? String(contentsOfFile: self.logPath, encoding: .utf8)).map(JournalRejectLog.init(text:))
        let journal = self.journal
        return { seq in
            let line = Self.line(seq)
            let state = journal.state(file: 0, line: line)
            guard state == .rejected else { return RowMark(state: state) }
            let record = log?.record(file: 0, line: line)
            return RowMark(state: state, status: record?.status, reason: record?.reason)
        }
    }

    /// Every place cleared and the refusals' log emptied (after a restart has read them).
    func clear() {
        for line in 0..<Self.capacity where self.journal.state(file: 0, line: line) != .none {
            self.journal.mark(file: 0, line: line, .none)
        }
        if let handle = FileHandle(forWritingAtPath: self.logPath) {
            try? handle.truncate(atOffset: 0)
            try? handle.close()
        }
        self.journal.sync()
    }

    /// Writes the marks to the disk (a machine's crash; a killed process loses none anyway).
    func sync() { self.journal.sync() }
}

/// A row's mark after a restart: its state, and for a refused row the status and reason the job logged.
public struct RowMark: Hashable, Sendable {
    public var state: RowState
    public var status: Int?
    public var reason: String?

    public init(state: RowState, status: Int? = nil, reason: String? = nil) {
        self.state = state
        self.status = status
        self.reason = reason
    }
}
