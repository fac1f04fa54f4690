extension TokenSource {
    /// The segment of a journaled, opened source being read, for checkpoints (`CheckpointTrail`): where it starts,
    /// its rows so far and the rows of it the journal must come to hold as settled, and the counts before the
    /// current row. A value in the source's locked state, updated per row with a few integer operations.
    struct Tracking {
        let trail: CheckpointTrail
        let rowsPerSegment: Int
        var file: Int
        var firstLine: Int
        var rows = 0
        var expected = 0
        /// The counts before the current row (its place is filled in when a segment ends there).
        var counts: InputCheckpoint

        init(trail: CheckpointTrail, rowsPerSegment: Int, from point: InputCheckpoint) {
            self.trail = trail
            self.rowsPerSegment = rowsPerSegment
            self.file = point.file
            self.firstLine = point.line
            self.counts = point
        }

        /// Before the row at `line` and `offset` of the current file: a full segment ends there.
        mutating func willRead(line: Int, offset: Int) {
            guard self.rows >= self.rowsPerSegment else { return }
            var end = self.counts
            end.file = self.file
            end.offset = offset
            end.line = line
            self.close(endLine: line, end: end)
        }

        /// After the row: it was valid (`valid` 1); the journal must come to hold it as settled (`settles` 1: it was
        /// handed out, or the journal held it as settled already, whether or not it is valid in this run); and it was
        /// left written unsent (`keptWritten` 1: an uncertain row the run reports, which never settles).
        mutating func didRead(valid: Int, settles: Int, keptWritten: Int) {
            self.rows += 1
            self.counts.rows += 1
            self.counts.validRows += valid
            self.expected += settles
            if keptWritten > 0 { self.counts.passesUncertain = true }
        }

        /// The current file ended: its last segment ends there, and the next starts at the next file's top.
        mutating func fileEnded() {
            var end = self.counts
            end.file = self.file + 1
            end.offset = 0
            end.line = 0
            self.close(endLine: Int.max, end: end)
            self.file += 1
            self.firstLine = 0
        }

        private mutating func close(endLine: Int, end: InputCheckpoint) {
            self.trail.append(
                CheckpointTrail.Segment(
                    file: self.file,
                    firstLine: self.firstLine,
                    endLine: endLine,
                    expected: self.expected,
                    end: end
                )
            )
            self.firstLine = endLine
            self.rows = 0
            self.expected = 0
        }
    }

    /// The furthest checkpoint before which the attached journal holds every row this source handed out (and every
    /// row earlier runs settled) as settled; nil when the source keeps none (not opened, no journal, `dedupe`).
    ///
    /// Reads the journal's marks as they are now: the caller syncs the journal after this and before recording the
    /// checkpoint, so that a checkpoint on the disk never passes a mark that is not.
    public func settledCheckpoint() -> InputCheckpoint? {
        let (trail, journal) = self.state.withLockedValue { state in
            state.streaming ? (state.tracking?.trail, state.journal) : (nil, nil)
        }
        guard let trail, let journal else { return nil }
        return trail.advance(journal: journal)
    }

    /// Starts an opened source at `checkpoint` (from the journal's last sync): `open()` reads on from there, so the
    /// first rows go without reading through the settled ones; the rows before it are read again on a thread of
    /// their own for the summary (`PrefixReplay`). Call after `attach` and before `open()`.
    ///
    /// - Returns: false, and the source starts at the top, with `dedupe` (every token before the checkpoint must
    ///   count as taken before a later row can go, so they are read first), when the checkpoint passes rows left
    ///   uncertain and this run sends them again, or when it lies past the input.
    @discardableResult
    public func resume(at checkpoint: InputCheckpoint) -> Bool {
        self.state.withLockedValue { state in
            guard state.journal != nil, !self.options.dedupe, checkpoint.file <= self.files.count,
                checkpoint.offset >= 0, checkpoint.line >= 0, !(checkpoint.passesUncertain && state.resendWritten)
            else { return false }
            state.resumePoint = checkpoint
            return true
        }
    }

    /// Whether the source was opened at a checkpoint.
    public var resumedAt: InputCheckpoint? { self.state.withLockedValue { $0.resumed?.checkpoint } }

    /// Whether reading the rows before the checkpoint again found a valid row the journal does not hold as settled:
    /// the checkpoint is wrong (the job stops; the caller discards it, and the next run reads from the top).
    public var checkpointRefuted: Bool { self.state.withLockedValue { $0.checkpointRefuted } }

    /// `open()` found the input large and a checkpoint to start at: reading starts there.
    func start(at point: InputCheckpoint, reader: RowReader?, state: inout State) {
        state.fileIndex = point.file
        state.reader = reader
        state.bytesBefore = state.fileSizes.prefix(point.file).reduce(0, +)
        state.pass.offset = point.file < self.files.count ? point.offset : 0
        state.resumed = Resumed(checkpoint: point, bytesBefore: state.bytesBefore + state.pass.offset)
        if let tracking = state.tracking {
            state.tracking = Tracking(
                trail: CheckpointTrail(reached: point),
                rowsPerSegment: tracking.rowsPerSegment,
                from: point
            )
        }
    }
}
