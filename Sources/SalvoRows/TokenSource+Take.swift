import APNSWire

#if canImport(Glibc)
import Glibc
#endif

extension TokenSource {
    /// What reading rows in order has found so far: an opened source's rows as `nextChunk` takes them, or a resumed
    /// job's rows before its checkpoint as `PrefixReplay` reads them again. `take` fills it.
    struct Pass {
        var running = Summary(validRows: 0, rejects: [])
        /// With `dedupe`, every token taken so far: its file index (high 16 bits) and line.
        var seen: [DeviceToken: Int] = [:]
        /// Without `dedupe`, the hash of every valid row's token, to count repeats at the end.
        var hashes = RepeatHashes()
        /// The highest line number of the current file so far.
        var lastLine = 0
        /// The offset of the current row in its file.
        var offset = 0
    }

    /// Validates one row read in order (`validate()`'s rules, `RowAdmission`, one row at a time) into `pass`: the
    /// row to hand out, or nil when it is refused, suppressed, another partition's, or settled in `journal` (or,
    /// unless `resendWritten`, written in it). With `payloads`, a row handed out keeps its fields in `fields`.
    ///
    /// Reads only the source's immutable fields: `nextChunk` calls it under the lock, `PrefixReplay` on its own.
    ///
    /// - Parameter hashReturned: false when the caller hashes the rows returned (`appendHashes`, once per chunk);
    ///   the valid rows not returned are hashed here either way.
    ///
    /// Inlined into `takeTracked`, its one call there (`PrefixReplay`'s loop, which reads a resumed job's first rows
    /// again beside the sending, calls it): the optional row returned through memory from a call was a store the
    /// processor could not forward to the caller's wider loads, a stall per row.
    @inline(__always)
    func take(
        _ row: RowReader.Row,
        reader: RowReader,
        fileIndex: Int,
        payloadColumns: [Int],
        journal: RowJournal?,
        resendWritten: Bool,
        hashReturned: Bool = true,
        pass: inout Pass,
        fields: inout RowFields
    ) -> TokenRow? {
        switch row {
        case .reject:
            let reject = reader.lastReject!
            pass.lastLine = max(pass.lastLine, reject.line)
            self.admission.refuse(reject, summary: &pass.running)
            return nil
        case .token(let row):
            pass.lastLine = max(pass.lastLine, row.line)
            pass.offset = row.reference.offset
            // The payload is rendered here, once: a row refused below leaves it to be overwritten by the next.
            let verdict = self.admission.admit(
                row,
                reader: reader,
                fileIndex: fileIndex,
                payloadColumns: payloadColumns,
                seen: &pass.seen,
                summary: &pass.running,
                fields: &fields
            )
            guard verdict == .admitted else { return nil }
            let hashed = !self.options.dedupe
            if hashed && hashReturned { pass.hashes.append(row.token.stableHash) }
            // The journal is not bound to a name here: a binding was a retain and a release of it per row.
            if let recorded = journal?.state(file: fileIndex, line: row.line) {
                if recorded != .none { pass.running.journaled.count(row, recorded) }
                if recorded.isSettled || (recorded == .written && !resendWritten) {
                    if hashed && !hashReturned { pass.hashes.append(row.token.stableHash) }
                    return nil
                }
            }
            if self.payloads != nil { fields.keep(row.reference) }
            return row
        }
    }

    /// The rows of the current file into `rows`, until it holds `maximumRows` or the file ends (then true).
    ///
    /// A function of its own, kept out of line: `next()` is inlined into it, where into the whole of `takeChunk` it
    /// was not (nor `takeTracked`, whatever their attributes said; nor is `takeTracked` here). A row returned through
    /// memory from a call is written a field at a time and read back whole, a load the processor cannot forward from
    /// those stores: the stalls after the two calls were a third of `takeChunk`'s samples. (The whole of
    /// `takeTracked` written into this loop measured slower: 0.92 s of user CPU for 10 M rows against 0.86.)
    @inline(never)
    func takeRows(
        _ maximumRows: Int,
        reader: RowReader,
        journal: RowJournal?,
        tracked: Bool,
        payloadColumns: [Int],
        state: inout State,
        fields: inout RowFields,
        into rows: inout [TokenRow]
    ) throws(InputError) -> Bool {
        while rows.count < maximumRows {
            guard let row = try reader.next() else { return true }
            self.takeTracked(
                row,
                reader: reader,
                journal: journal,
                tracked: tracked,
                payloadColumns: payloadColumns,
                state: &state,
                fields: &fields,
                into: &rows
            )
        }
        return false
    }

    /// `take` for the row an opened source's reader just read, counted for checkpoints when the source keeps them;
    /// a row taken is appended to `rows` (appended here, not returned: see `takeRows`). Not hashed yet: the caller
    /// hashes them once its chunk is taken (`appendHashes`).
    ///
    /// - Parameters:
    ///   - reader: `state.reader`, `journal` `state.journal`, `tracked` whether `state.tracking` is set: held by the
    ///     caller for the chunk (each read of a class reference out of `state` is a retain and a release per row).
    ///   - payloadColumns: the current file's (`State.payloadColumns`), held by the caller for the chunk.
    @inline(__always)
    func takeTracked(
        _ row: RowReader.Row,
        reader: RowReader,
        journal: RowJournal?,
        tracked: Bool,
        payloadColumns: [Int],
        state: inout State,
        fields: inout RowFields,
        into rows: inout [TokenRow]
    ) {
        let fileIndex = state.fileIndex
        // One call of `take` for both ways, so that it is inlined once (two calls left one of them out of line: a
        // journaled send called it per row).
        var line = 0
        var valid = 0
        var uncertain = 0
        if tracked {
            switch row {
            case .token(let row): line = row.line
            case .reject: line = reader.lastReject!.line
            }
            state.tracking!.willRead(line: line, offset: reader.recordOffset)
            valid = state.pass.running.validRows
            uncertain = state.pass.running.journaled.uncertainRows.count
        }
        let taken = self.take(
            row,
            reader: reader,
            fileIndex: fileIndex,
            payloadColumns: payloadColumns,
            journal: journal,
            resendWritten: state.resendWritten,
            hashReturned: false,
            pass: &state.pass,
            fields: &fields
        )
        if let taken { rows.append(taken) }
        guard tracked else { return }
        let keptWritten = state.resendWritten ? 0 : state.pass.running.journaled.uncertainRows.count - uncertain
        // Every settled byte of the segment's lines is counted against it: a row settled by an earlier run is
        // expected whatever this run makes of it (suppressed now by a list that grew, say), so that it never stands
        // in for a row handed out and not yet settled.
        let settles: Int
        if taken != nil {
            settles = 1
        } else if journal?.state(file: fileIndex, line: line).isSettled == true {
            settles = 1
        } else {
            settles = 0
        }
        state.tracking!.didRead(
            valid: state.pass.running.validRows - valid,
            settles: settles,
            keptWritten: keptWritten
        )
    }

    /// The current file of an opened source has no more rows.
    func endFile(_ state: inout State) {
        state.pass.running.lineCounts.append(state.pass.lastLine + 1)
        state.pass.lastLine = 0
        state.pass.offset = 0
        state.bytesBefore += state.fileSizes[state.fileIndex]
        state.tracking?.fileEnded()
    }

    /// Every row of an opened source has been taken: its summary is complete.
    func finish(_ state: inout State) {
        if !state.pass.hashes.isEmpty { state.pendingRepeats = RepeatCount(taking: &state.pass.hashes) }
        state.pass.hashes = RepeatHashes()
        state.pass.seen = [:]
        state.summary = state.pass.running
    }
}
