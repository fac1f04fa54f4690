import DequeModule
import NIOConcurrencyHelpers

/// The segments of a job's input taken so far and not yet settled, in input order, and the furthest checkpoint
/// reached: `TokenSource` closes a segment every `checkpointRows` rows it reads (and at the end of each file), with
/// the rows of it the journal must hold as settled; `advance` moves the checkpoint past every leading segment whose
/// rows the journal now holds so.
///
/// A segment is done when the journal holds as many settled rows in its lines as it expects: the rows handed out
/// and every row the journal held as settled when it was read, valid in this run or not (a row is marked only after
/// it was taken, and a settled row stays settled, so the count only grows, and a row settled by an earlier run and
/// suppressed in this one never stands in for a row not yet settled). Rows a run leaves written (uncertain,
/// reported) are not expected, and the checkpoint says it passes them.
///
/// Thread-safe (hence `@unchecked Sendable`): the source appends under its own lock, the journal's sync advances.
final class CheckpointTrail: @unchecked Sendable {
    struct Segment: Hashable {
        /// The file whose lines `firstLine..<endLine` the segment holds (`endLine` past the journal's: to its end).
        var file: Int
        var firstLine: Int
        var endLine: Int
        /// Rows of it the journal must hold as settled.
        var expected: Int
        /// The checkpoint after it.
        var end: InputCheckpoint
    }

    private struct State {
        var segments: Deque<Segment> = []
        var reached: InputCheckpoint
    }

    private let state: NIOLockedValueBox<State>

    init(reached: InputCheckpoint) {
        self.state = NIOLockedValueBox(State(reached: reached))
    }

    /// The checkpoint reached so far.
    var reached: InputCheckpoint { self.state.withLockedValue { $0.reached } }

    /// Segments not yet settled.
    var pending: Int { self.state.withLockedValue { $0.segments.count } }

    func append(_ segment: Segment) {
        self.state.withLockedValue { $0.segments.append(segment) }
    }

    /// Moves the checkpoint past every leading segment the journal holds as settled, and returns it. Each segment's
    /// lines are counted once it is first; the lock is not held while counting.
    func advance(journal: RowJournal) -> InputCheckpoint {
        while true {
            guard let first = self.state.withLockedValue({ $0.segments.first }) else { break }
            let settled = journal.settledCount(file: first.file, lines: first.firstLine..<first.endLine)
            guard settled >= first.expected else { break }
            self.state.withLockedValue { state in
                // Only `advance` removes segments, and one sync calls it at a time: the first is still `first`.
                if state.segments.first == first {
                    state.segments.removeFirst()
                    state.reached = first.end
                }
            }
        }
        return self.reached
    }
}
