import Dispatch
import Foundation
import NIOConcurrencyHelpers

/// The rows of a resumed job before its checkpoint, read again on a thread of their own while the rows after it are
/// sent: the sending needs none of them (every one is settled or never to be sent), the whole input's summary needs
/// all of them (valid and bad rows, suppressed ones, the journal's tally for the report, the tokens' hashes for the
/// repeats). `TokenSource.take` reads each row by the same rules as on the sending path.
///
/// Thread-safe (hence `@unchecked Sendable`): the outcome is written once, under the lock, before `done` is
/// signalled.
final class PrefixReplay: @unchecked Sendable {
    /// What the rows before the checkpoint hold.
    struct Found {
        var pass: TokenSource.Pass
        /// The last line of a row before the checkpoint in the checkpoint's own file (0: none).
        var lastLineInCheckpointFile: Int
        /// A valid row before the checkpoint that the journal does not hold as done (file index and line): the
        /// checkpoint is wrong.
        var unsettled: (file: Int, line: Int)?
    }

    private let done = DispatchSemaphore(value: 0)
    /// The outcome, its hashes apart (in `hashes`), so that copies of it never share their array.
    private let outcome = NIOLockedValueBox<Result<Found, InputError>?>(nil)
    private let hashes = NIOLockedValueBox(RepeatHashes())

    /// Starts reading `source`'s rows before `checkpoint` (the thread holds the source until it is done).
    ///
    /// - Parameter hashCapacity: room for the hashes of the whole input's valid rows (an estimate), so that the rows
    ///   after the checkpoint join these without a second array.
    init(
        source: TokenSource,
        checkpoint: InputCheckpoint,
        journal: RowJournal?,
        resendWritten: Bool,
        payloadColumns: [[Int]],
        hashCapacity: Int
    ) {
        let thread = Thread { [self] in
            var result = Result { () throws(InputError) -> Found in
                try source.replay(
                    to: checkpoint,
                    journal: journal,
                    resendWritten: resendWritten,
                    payloadColumns: payloadColumns,
                    hashCapacity: hashCapacity
                )
            }
            var hashes = RepeatHashes()
            if case .success(var found) = result {
                swap(&hashes, &found.pass.hashes)
                result = .success(found)
            }
            self.hashes.withLockedValue { swap(&$0, &hashes) }
            self.outcome.withLockedValue { $0 = result }
            self.done.signal()
        }
        // Below the connections' threads: the rows after the checkpoint are what the job is waiting for.
        thread.qualityOfService = .utility
        thread.start()
    }

    /// Whether the rows are read.
    var isDone: Bool { self.outcome.withLockedValue { $0 != nil } }

    /// The outcome once done, nil before.
    var outcomeIfDone: Result<Found, InputError>? { self.outcome.withLockedValue { $0 } }

    /// Takes the hashes of the valid rows read (once done; the outcome's `pass.hashes` is empty), so that the caller
    /// holds the only reference and can append to them in place.
    func takeHashes() -> RepeatHashes {
        self.hashes.withLockedValue { hashes in
            var taken = RepeatHashes()
            swap(&taken, &hashes)
            return taken
        }
    }

    /// Waits until the rows are read.
    func wait() -> Result<Found, InputError> {
        self.done.wait()
        self.done.signal()
        return self.outcome.withLockedValue { $0! }
    }
}

extension TokenSource {
    /// A source opened at a checkpoint.
    struct Resumed {
        let checkpoint: InputCheckpoint
        /// Bytes of the input before the checkpoint.
        let bytesBefore: Int
        /// Reading the rows before the checkpoint; nil until the first chunk is asked for.
        var replay: PrefixReplay?
        /// Whether those rows are folded into `State.pass`.
        var merged = false
    }

    /// Reads the rows before `checkpoint` with `take`, as `nextChunk` would have taken them.
    func replay(
        to checkpoint: InputCheckpoint,
        journal: RowJournal?,
        resendWritten: Bool,
        payloadColumns: [[Int]],
        hashCapacity: Int
    ) throws(InputError) -> PrefixReplay.Found {
        var found = PrefixReplay.Found(pass: Pass(), lastLineInCheckpointFile: 0, unsettled: nil)
        if !self.options.dedupe { found.pass.hashes.reserveCapacity(max(checkpoint.validRows, hashCapacity)) }
        var scratch = RowFields()
        let columnCount = self.payloads?.templates.columns.count ?? 0
        for fileIndex in 0..<min(checkpoint.file + 1, self.files.count) {
            if fileIndex == checkpoint.file && checkpoint.offset == 0 { break }
            let reader = try RowReader(
                path: self.files[fileIndex],
                spools: self.spools,
                fileIndex: fileIndex,
                options: self.options
            )
            found.pass.lastLine = 0
            while let row = try reader.next() {
                if fileIndex == checkpoint.file && reader.recordOffset >= checkpoint.offset { break }
                scratch.removeAll(columnCount: columnCount)
                let taken = self.take(
                    row,
                    reader: reader,
                    fileIndex: fileIndex,
                    payloadColumns: payloadColumns[fileIndex],
                    journal: journal,
                    resendWritten: resendWritten,
                    pass: &found.pass,
                    fields: &scratch
                )
                if let taken, found.unsettled == nil { found.unsettled = (fileIndex, taken.line) }
            }
            if fileIndex < checkpoint.file {
                found.pass.running.lineCounts.append(found.pass.lastLine + 1)
            } else {
                found.lastLineInCheckpointFile = found.pass.lastLine
            }
        }
        return found
    }

    /// The replay of a resumed source, started now if it was not.
    func startReplay(_ state: inout State) -> PrefixReplay {
        if let replay = state.resumed!.replay { return replay }
        let replay = PrefixReplay(
            source: self,
            checkpoint: state.resumed!.checkpoint,
            journal: state.journal,
            resendWritten: state.resendWritten,
            payloadColumns: state.payloadColumns,
            // About 66 bytes a row (a hex token and a line end), as `open()` reserves.
            hashCapacity: self.options.dedupe ? 0 : state.totalBytes / 66 + 1
        )
        state.resumed!.replay = replay
        return replay
    }

    /// Starts the replay if it has not started; once it is done, folds what it found into `state.pass` (once) and
    /// returns nil, or the error that stops the job: the rows before the checkpoint could not be read, or one of
    /// them is valid and not done (the checkpoint is wrong; what they hold is folded in all the same, so that the
    /// summary of the stopped job still counts every row read once).
    func replayFailure(_ state: inout State) -> InputError? {
        guard let outcome = self.startReplay(&state).outcomeIfDone else { return nil }
        let found: PrefixReplay.Found
        switch outcome {
        case .failure(let error):
            return error
        case .success(let value):
            found = value
        }
        self.merge(found, into: &state)
        if let (file, line) = found.unsettled {
            state.checkpointRefuted = true
            return InputError(
                file: self.files[file],
                line: line,
                message:
                    "the journal's checkpoint passes this row, which it does not hold as settled: the checkpoint is "
                    + "discarded; run the same command again to read the input from its top"
            )
        }
        return nil
    }

    /// Folds the rows before the checkpoint into `state.pass`, before the rows read after it (once).
    private func merge(_ found: PrefixReplay.Found, into state: inout State) {
        guard !state.resumed!.merged else { return }
        state.resumed!.merged = true
        let checkpoint = state.resumed!.checkpoint
        var merged = found.pass.running
        var later = state.pass.running
        if checkpoint.file < self.files.count && checkpoint.offset > 0 {
            // The checkpoint's file is shared: its last line is the later of the two parts'.
            if later.lineCounts.isEmpty {
                state.pass.lastLine = max(state.pass.lastLine, found.lastLineInCheckpointFile)
            } else {
                later.lineCounts[0] = max(later.lineCounts[0], found.lastLineInCheckpointFile + 1)
            }
        }
        merged.append(later)
        state.pass.running = merged
        // The rows after the checkpoint join the replay's hashes, reserved for the whole input: no third array.
        var hashes = state.resumed!.replay!.takeHashes()
        hashes.append(contentsOf: state.pass.hashes)
        state.pass.hashes = hashes
    }
}

extension TokenSource.Summary {
    /// Adds the counts of `later`, the summary of the rows read after these: the rejects and the journal's rows in
    /// input order, the files' line counts after these.
    mutating func append(_ later: TokenSource.Summary) {
        self.validRows += later.validRows
        self.rejects += later.rejects
        self.suppressed += later.suppressed
        self.reregistered += later.reregistered
        self.duplicates += later.duplicates
        self.otherPartitions += later.otherPartitions
        self.lineCounts += later.lineCounts
        self.largestPayload = max(self.largestPayload, later.largestPayload)
        self.journaled.confirmed += later.journaled.confirmed
        self.journaled.presumed += later.journaled.presumed
        self.journaled.expired += later.journaled.expired
        self.journaled.rejectedRows += later.journaled.rejectedRows
        self.journaled.uncertainRows += later.journaled.uncertainRows
        self.isFinal = self.isFinal && later.isFinal
    }
}
