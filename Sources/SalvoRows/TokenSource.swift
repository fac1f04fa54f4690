import APNSWire
import Dispatch
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#endif

/// One row of a token file: the token, the line it came from (reports name the line), and where it is, so
/// that it can be read again.
public struct TokenRow: Hashable, Sendable {
    public var token: DeviceToken
    public var line: Int
    public var reference: RowReference

    public init(token: DeviceToken, line: Int, reference: RowReference = RowReference(file: 0, offset: 0)) {
        self.token = token
        self.line = line
        self.reference = reference
    }
}

/// Where a row is: which input file, and the byte offset of its record. 8 bytes, so that rows in flight
/// can be journaled without their tokens (`TokenSource.token(at:)` reads a token again when needed).
public struct RowReference: Hashable, Sendable, BitwiseCopyable {
    public let rawValue: UInt64

    public init(file: Int, offset: Int) {
        precondition(file >= 0 && file < 1 << 16 && offset >= 0 && offset < 1 << 48)
        self.rawValue = UInt64(file) << 48 | UInt64(offset)
    }

    public init(rawValue: UInt64) {
        self.rawValue = rawValue
    }

    public var file: Int { Int(self.rawValue >> 48) }
    public var offset: Int { Int(self.rawValue & (1 << 48 - 1)) }
}

/// A row of the input that will not be sent, and why.
public struct InputReject: Hashable, Sendable, Codable {
    public var file: String
    public var line: Int
    /// The token field as written (cut to 80 characters).
    public var value: String
    public var reason: String
}

/// Which column holds the token.
public enum TokenColumn: Hashable, Sendable, CustomStringConvertible {
    /// The column with this header (the file must have a header row).
    case name(String)
    /// The column at this 1-based position.
    case number(Int)

    public var description: String {
        switch self {
        case .name(let name): "'\(name)'"
        case .number(let number): "column \(number)"
        }
    }
}

/// How a token column writes a token.
public enum TokenEncoding: String, Hashable, Sendable, CaseIterable {
    /// 64 hex digits, either case; spaces and Apple's `<…>` allowed.
    case hex
    /// The 32 raw bytes in base64 (43 characters, or 44 ending in `=`).
    case base64

    /// Parses one field.
    @inlinable
    public func token(_ text: UnsafeRawBufferPointer) throws(DeviceTokenError) -> DeviceToken {
        switch self {
        case .hex: try DeviceToken(hexUTF8: text)
        case .base64: try DeviceToken(base64UTF8: text)
        }
    }
}

/// How a token file's first row is read.
public enum HeaderMode: String, Hashable, Sendable, CaseIterable {
    /// The first row names the columns.
    case present
    /// Every row is data.
    case absent
    /// A header when the token column of the first row is not a token (the default with `.number`).
    case auto
}

/// Reads tokens from CSV files for a job, validating every row, and hands out the good ones in chunks.
///
/// Two ways to read: `open()` reads each file's header and first chunk at once (a file whose first chunk holds
/// no token is refused: the wrong file or the wrong column), then validates each row as `nextChunk` takes it,
/// so the input is read once; the rows that will not be sent (bad hex, wrong length, with `dedupe` a token
/// already taken) are collected with file, line and reason, and the complete `summary` is known once the last
/// row is taken. `validate()` reads the whole input first (for `salvo check`, and a journaled job, whose
/// journal is sized by it), and `nextChunk` then reads the good rows again. Memory stays bounded by the chunk
/// size and the list of rejected lines; only `dedupe` keeps a set of every token (filled as rows are taken, so
/// a repeated token is never handed out twice).
///
/// A journaled, opened source keeps checkpoints (`settledCheckpoint()`): places before which every row is done
/// with. A run that resumes the job starts there (`resume(at:)`) and sends at once; the rows before are read
/// again beside the sending, only for the summary (`PrefixReplay`).
///
/// Thread-safe (hence `@unchecked Sendable`): every mutable field lives in `state`, behind its lock, which
/// shards on different queues take once per chunk, not per row.
public final class TokenSource: @unchecked Sendable {
    public let files: [String]
    /// The files that hold inputs named otherwise (`-`, `postgres`).
    public let spools: InputSpools
    public let options: Options
    /// Tokens not to send (Apple's rule, with `Options.registeredAt` when given): their rows are counted as
    /// suppressed.
    public let suppression: SuppressionList?
    /// A payload per row: rows are measured while validating (refused with their line when they cannot be
    /// rendered or are over the limit), and their fields handed out with each chunk.
    public let payloads: RowPayloads?
    /// The rules a row read in order must pass to go out (partition, payload, duplicate, suppression), for
    /// `validate()` and `take` alike.
    let admission: RowAdmission
    /// Rows of each file that `open()` reads at once: a file whose first chunk holds no token is refused.
    public let firstChunkRows: Int
    /// Rows read between two checkpoints of a journaled, opened source (the last segment of a file is shorter).
    public let checkpointRows: Int
    /// `firstChunkRows` unless told otherwise (`send` and `check` apply the same rule).
    public static let defaultFirstChunkRows = 1000
    /// `checkpointRows` unless told otherwise: 1024 rows, so that a resumed run reads again at most about a
    /// thousand rows per file already settled, and a job of 10 M rows keeps at most 10,000 segments.
    public static let defaultCheckpointRows = 1024
    /// Every mutable field, behind one lock (internal for the extensions in other files of the type).
    let state: NIOLockedValueBox<State>

    struct State {
        var summary: Summary?
        /// Rejected lines per file, to skip on the sending pass.
        var rejectedLines: [Set<Int>] = []
        /// The token column of each file, for reading a row again.
        var columns: [Int] = []
        /// The column of each of `payloads.templates.columns`, per file.
        var payloadColumns: [[Int]] = []
        /// One descriptor per file, opened by `validate()` and kept for the job: rows are read again through
        /// it (`pread`, no shared offset), never by opening the file per row.
        var descriptors: [Int32] = []
        var fileIndex = 0
        var reader: RowReader?
        var finished = false
        var journal: RowJournal?
        /// `journal` held no mark when it was attached (`RowJournal.holdsNoMark`).
        var journalHeldNoMark = false
        /// Rows the journal holds as written but unsettled (uncertain after a crash) are sent again.
        var resendWritten = true
        /// Opened with `open()`: rows are validated as `nextChunk` takes them, into `pass`.
        var streaming = false
        /// An opened source's rows taken so far (from the checkpoint on, when resumed).
        var pass = Pass()
        /// Bytes of the files before the current one, and of the whole input (for an estimate of the valid rows
        /// while streaming); each file's size.
        var bytesBefore = 0
        var totalBytes = 0
        var fileSizes: [Int] = []
        /// Tokens per byte in the first chunk `open()` read: the estimate before the first row is taken.
        var firstChunkRate = 0.0
        /// The files still being written when opened (`GrowingInput`): their sizes are read again for each estimate.
        var growingFiles: [Int] = []
        /// The repeats among the hashes once every row was taken, counted on a thread of their own (the summary's
        /// `duplicates` when read).
        var pendingRepeats: RepeatCount?
        /// A journaled, opened source: the segment being read, for checkpoints.
        var tracking: Tracking?
        /// Where `resume(at:)` asked an opened source to start.
        var resumePoint: InputCheckpoint?
        /// A source opened at a checkpoint: the rows before it, read again off the sending path.
        var resumed: Resumed?
        /// A valid row before the checkpoint was found unsettled in the journal: the checkpoint cannot be trusted.
        var checkpointRefuted = false
        /// When the first row was handed out (uptime nanoseconds).
        var firstRowAt: UInt64?
        /// The input failed after some rows of a chunk were read: those rows were handed out first (they are counted
        /// valid, and would otherwise be in no list), and every later step fails with this.
        var failure: InputError?

        /// The summary, with the repeats counted.
        mutating func resolvedSummary() -> Summary? {
            if let pending = self.pendingRepeats {
                self.summary?.duplicates = pending.wait()
                self.pendingRepeats = nil
            }
            return self.summary
        }
    }

    public init(
        files: [String],
        spools: InputSpools = InputSpools(),
        options: Options = Options(),
        suppression: SuppressionList? = nil,
        payloads: RowPayloads? = nil,
        firstChunkRows: Int = TokenSource.defaultFirstChunkRows,
        checkpointRows: Int = TokenSource.defaultCheckpointRows
    ) {
        self.files = files
        self.spools = spools
        self.options = options
        self.suppression = suppression
        self.payloads = payloads
        self.admission = RowAdmission(
            files: files,
            partition: options.partition,
            dedupe: options.dedupe,
            suppression: suppression,
            payloads: payloads
        )
        self.firstChunkRows = max(1, firstChunkRows)
        self.checkpointRows = max(1, checkpointRows)
        self.state = NIOLockedValueBox(State())
    }

    deinit {
        for descriptor in self.state.withLockedValue({ $0.descriptors }) { close(descriptor) }
    }

    /// Keeps the job's rows in `journal` from now on (the connections mark them as they write and settle them):
    /// `nextChunk` skips the rows the journal holds as settled (and, unless `resendWritten`, those it holds as
    /// written).
    /// Attached before `validate()`, validation tallies what the journal holds (`Summary.journaled`). Attached
    /// before the first row is taken, an opened source keeps checkpoints (`settledCheckpoint()`; not with `dedupe`,
    /// whose resumed runs read every row).
    public func attach(_ journal: RowJournal, resendWritten: Bool) {
        self.state.withLockedValue {
            $0.journal = journal
            $0.journalHeldNoMark = journal.holdsNoMark()
            $0.resendWritten = resendWritten
            if !self.options.dedupe {
                $0.tracking = Tracking(
                    trail: CheckpointTrail(reached: .start),
                    rowsPerSegment: self.checkpointRows,
                    from: .start
                )
            }
        }
    }

    /// The journal the rows are recorded in, if any.
    public var journal: RowJournal? { self.state.withLockedValue { $0.journal } }

    /// Reads every file once and returns what will and will not be sent. Call before `nextChunk`.
    ///
    /// - Throws: `InputError` when a file cannot be read or parsed at all (not for bad rows).
    @discardableResult
    public func validate() throws(InputError) -> Summary {
        var summary = Summary(validRows: 0, rejects: [])
        var rejectedLines: [Set<Int>] = []
        var columns: [Int] = []
        // With dedupe, each token's first row: its file index (high 16 bits) and line.
        var seen: [DeviceToken: Int] = [:]
        // Without dedupe, repeated tokens are only counted: 8 bytes a row (the token's 64-bit hash), by bucket, with
        // room for as many rows as the files can hold (else they would be bucketed again, a copy, when counted).
        var hashes = RepeatHashes()
        if !self.options.dedupe {
            let bytes = self.files.reduce(0) { total, file in
                var status = stat()
                return total + (stat(self.spools.path(of: file), &status) == 0 ? Int(status.st_size) : 0)
            }
            hashes.reserveCapacity(self.mostValidRows(inBytes: bytes))
        }
        var descriptors: [Int32] = []
        let journal = self.journal
        var payloadColumns: [[Int]] = []
        var scratch = RowFields()
        defer {
            // Kept for reading rows again; a validation that fails closes what it opened.
            if descriptors.count == self.files.count {
                self.state.withLockedValue { $0.descriptors = descriptors }
            } else {
                for descriptor in descriptors { close(descriptor) }
            }
        }
        for (fileIndex, file) in self.files.enumerated() {
            var rejected = Set<Int>()
            let reader = try RowReader(path: file, spools: self.spools, fileIndex: fileIndex, options: self.options)
            let descriptor = Glibc.open(self.spools.path(of: file), O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0 else {
                throw InputError(file: file, line: nil, message: "cannot open: \(String(cString: strerror(errno)))")
            }
            descriptors.append(descriptor)
            columns.append(reader.tokenColumn)
            let fieldColumns = try self.payloads?.columns(in: file, header: reader.headerNames) ?? []
            payloadColumns.append(fieldColumns)
            var lastLine = 0
            defer { summary.lineCounts.append(lastLine + 1) }
            while let row = try reader.next() {
                switch row {
                case .token(let row):
                    lastLine = max(lastLine, row.line)
                    if let payloads = self.payloads { scratch.removeAll(columnCount: payloads.templates.columns.count) }
                    let verdict = self.admission.admit(
                        row,
                        reader: reader,
                        fileIndex: fileIndex,
                        payloadColumns: fieldColumns,
                        seen: &seen,
                        summary: &summary,
                        fields: &scratch
                    )
                    switch verdict {
                    case .admitted: break
                    case .otherPartition: continue
                    case .setAside:
                        rejected.insert(row.line)
                        continue
                    }
                    if !self.options.dedupe { hashes.append(row.token.stableHash) }
                    if let journal { summary.journaled.count(row, journal.state(file: fileIndex, line: row.line)) }
                case .reject:
                    let reject = reader.lastReject!
                    lastLine = max(lastLine, reject.line)
                    rejected.insert(reject.line)
                    self.admission.refuse(reject, summary: &summary)
                }
            }
            rejectedLines.append(rejected)
        }
        summary.duplicates = Self.repeats(hashes)
        self.state.withLockedValue {
            $0.summary = summary
            $0.rejectedLines = rejectedLines
            $0.columns = columns
            $0.payloadColumns = payloadColumns
        }
        return summary
    }

    /// The next rows to send, at most `maximumRows`, in file order; nil when every row has been handed out.
    ///
    /// - Precondition: `validate()` has returned.
    public func nextChunk(maximumRows: Int) throws(InputError) -> [TokenRow]? {
        var unused = RowFields()
        return try self.nextChunk(maximumRows: maximumRows, fields: &unused)
    }

    /// The next rows to send, as `nextChunk(maximumRows:)`, and with `payloads` their fields, template and rendered
    /// size in `fields` (refilled: what it held before is gone).
    ///
    /// A source opened at a checkpoint hands out the rows after it at once; the rows before it are read again on a
    /// thread of their own, and the call that finds the input's end waits for them (the summary needs them).
    public func nextChunk(maximumRows: Int, fields: inout RowFields) throws(InputError) -> [TokenRow]? {
        if let payloads = self.payloads {
            fields.removeAll(columnCount: payloads.templates.columns.count)
            fields.stampSendTime()
        }
        while true {
            switch self.state.withLockedValue({ self.takeChunk(maximumRows: maximumRows, state: &$0, fields: &fields) })
            {
            case .rows(let rows):
                return rows
            case .failure(let error):
                throw error
            case .waitForReplay(let replay):
                // Outside the lock: the other shards find the end too, and wait the same way.
                _ = replay.wait()
            }
        }
    }

    /// What one locked step of `nextChunk` came to.
    private enum ChunkStep {
        case rows([TokenRow]?)
        case failure(InputError)
        /// The input's end, with the rows before the checkpoint still being read: wait, then step again.
        case waitForReplay(PrefixReplay)
    }

    private func takeChunk(maximumRows: Int, state: inout State, fields: inout RowFields) -> ChunkStep {
        precondition(state.summary != nil || state.streaming, "validate() or open() first")
        if let failure = state.failure { return .failure(failure) }
        let payloads = self.payloads
        if state.streaming && (state.resumed?.merged == false || state.checkpointRefuted) {
            // The rows before the checkpoint: read from the first chunk on; a failure stops the job (a refuted
            // checkpoint for good, though its rows are merged).
            if let failure = self.replayFailure(&state) { return .failure(failure) }
        }
        var rows: [TokenRow] = []
        rows.reserveCapacity(maximumRows)
        // The current file's payload columns, looked up once per file rather than per row.
        var columns: (file: Int, columns: [Int]) = (-1, [])
        // Class references out of `state` are read once per chunk, not per row (each read is a retain and a release);
        // the lock is held for the chunk, so none of them changes meanwhile.
        // A journal that held no mark when it was attached holds none for a row not read yet (every mark since is of
        // a row handed out): its rows are not looked up.
        let journal = state.journalHeldNoMark ? nil : state.journal
        let tracked = state.tracking != nil
        var failure: InputError?
        do throws(InputError) {
            while rows.count < maximumRows && !state.finished {
                if state.reader == nil {
                    guard state.fileIndex < self.files.count else {
                        state.finished = true
                        break
                    }
                    state.reader = try RowReader(
                        path: self.files[state.fileIndex],
                        spools: self.spools,
                        fileIndex: state.fileIndex,
                        options: self.options
                    )
                }
                let reader = state.reader!
                if state.streaming {
                    if payloads != nil && columns.file != state.fileIndex {
                        columns = (state.fileIndex, state.payloadColumns[state.fileIndex])
                    }
                    let ended = try self.takeRows(
                        maximumRows,
                        reader: reader,
                        journal: journal,
                        tracked: tracked,
                        payloadColumns: columns.columns,
                        state: &state,
                        fields: &fields,
                        into: &rows
                    )
                    if ended {
                        self.endFile(&state)
                        state.reader = nil
                        state.fileIndex += 1
                    }
                    continue
                }
                guard let row = try reader.next() else {
                    state.reader = nil
                    state.fileIndex += 1
                    continue
                }
                if case .token(let good) = row, !state.rejectedLines[state.fileIndex].contains(good.line),
                    self.admission.owns(good.token)
                {
                    if let journal {
                        let recorded = journal.state(file: state.fileIndex, line: good.line)
                        if recorded.isSettled || (recorded == .written && !state.resendWritten) { continue }
                    }
                    if let payloads {
                        let columns = state.payloadColumns[state.fileIndex]
                        switch reader.renderPayload(columns: columns, payloads: payloads, into: &fields) {
                        case .success:
                            fields.keep(good.reference)
                        case .failure(let error):
                            throw InputError(
                                file: self.files[state.fileIndex],
                                line: good.line,
                                message: "the file changed during the job: \(error.message)"
                            )
                        }
                    }
                    rows.append(good)
                }
            }
        } catch {
            failure = error
        }
        // An opened source's rows handed out are hashed for the repeat count here, in one loop (`takeTracked`
        // leaves them), before a failure returns or the summary is made.
        if state.streaming && !self.options.dedupe { Self.appendHashes(of: rows[...], to: &state.pass.hashes) }
        if !rows.isEmpty && state.firstRowAt == nil { state.firstRowAt = DispatchTime.now().uptimeNanoseconds }
        if let failure {
            state.failure = failure
            // The rows read before the failure go out (the next step fails): each is counted valid already.
            return rows.isEmpty ? .failure(failure) : .rows(rows)
        }
        if state.finished && state.streaming && state.summary == nil {
            if let resumed = state.resumed, !resumed.merged {
                // Hand out what was read first; the next step waits for the rows before the checkpoint.
                guard rows.isEmpty else { return .rows(rows) }
                guard let replay = resumed.replay, replay.isDone else {
                    return .waitForReplay(self.startReplay(&state))
                }
                if let failure = self.replayFailure(&state) { return .failure(failure) }
            }
            self.finish(&state)
        }
        return .rows(rows.isEmpty ? nil : rows)
    }
}

extension TokenSource {
    /// Opens the input to be validated as `nextChunk` takes its rows, so that it is read once: each file's header
    /// and first chunk (`firstChunkRows` rows) are read now.
    ///
    /// When every file ends within its first chunk the input is small: it is validated whole (as `validate()`)
    /// and that summary returned. Otherwise the summary is nil, `nextChunk` validates each row as it takes it,
    /// and `summary` is complete once the last row has been taken.
    ///
    /// - Throws: `InputError` when a file cannot be read or parsed at all, or when a file's first chunk holds rows
    ///   and no token among them (the wrong file, or the wrong column): nothing of the input is handed out then.
    @discardableResult
    public func open() throws(InputError) -> Summary? {
        var small = true
        var descriptors: [Int32] = []
        var columns: [Int] = []
        var payloadColumns: [[Int]] = []
        var totalBytes = 0
        var fileSizes: [Int] = []
        var growingFiles: [Int] = []
        var firstChunkRate = 0.0
        var opened = false
        defer {
            if !opened { for descriptor in descriptors { close(descriptor) } }
        }
        for (fileIndex, file) in self.files.enumerated() {
            let reader = try RowReader(path: file, spools: self.spools, fileIndex: fileIndex, options: self.options)
            columns.append(reader.tokenColumn)
            payloadColumns.append(try self.payloads?.columns(in: file, header: reader.headerNames) ?? [])
            var rows = 0
            var tokens = 0
            var lastOffset = 0
            var firstReject: InputReject?
            while rows < self.firstChunkRows, let row = try reader.next() {
                rows += 1
                switch row {
                case .token(let row):
                    tokens += 1
                    lastOffset = row.reference.offset
                case .reject: if firstReject == nil { firstReject = reader.lastReject }
                }
            }
            if fileIndex == 0 && lastOffset > 0 { firstChunkRate = Double(tokens) / Double(lastOffset) }
            if rows == self.firstChunkRows, try reader.next() != nil { small = false }
            if tokens == 0, let reject = firstReject {
                var value = reject.value.isEmpty ? "" : ", value '\(reject.value)'"
                if value.count > 100 { value = String(value.prefix(97)) + "..." }
                throw InputError(
                    file: file,
                    line: nil,
                    message:
                        "no valid token in its first \(rows) row(s) (line \(reject.line): \(reject.reason)\(value)): "
                        + "is it the right file, and is the token in \(self.options.column)?"
                )
            }
            let descriptor = Glibc.open(self.spools.path(of: file), O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0 else {
                throw InputError(file: file, line: nil, message: "cannot open: \(String(cString: strerror(errno)))")
            }
            descriptors.append(descriptor)
            var status = stat()
            fileSizes.append(fstat(descriptor, &status) == 0 ? Int(status.st_size) : 0)
            totalBytes += fileSizes.last!
            if self.spools.growing(of: file) != nil { growingFiles.append(fileIndex) }
        }
        if small { return try self.validate() }
        // Resumed at a checkpoint: reading starts there (the header of its file is read as usual).
        let point = self.state.withLockedValue { $0.resumePoint }
        var reader: RowReader?
        if let point, point.file < self.files.count, point.offset > 0 {
            reader = try RowReader(
                path: self.files[point.file],
                spools: self.spools,
                fileIndex: point.file,
                options: self.options
            )
            try reader!.seek(offset: point.offset, line: point.line)
        }
        opened = true
        self.state.withLockedValue { state in
            state.descriptors = descriptors
            state.columns = columns
            state.payloadColumns = payloadColumns
            state.streaming = true
            state.totalBytes = totalBytes
            state.fileSizes = fileSizes
            state.firstChunkRate = firstChunkRate
            state.growingFiles = growingFiles
            var rows = totalBytes
            if let point {
                self.start(at: point, reader: reader, state: &state)
                rows -= state.resumed!.bytesBefore
            }
            // The hashes never regrow: a regrowth near the end of 10 M rows held the old 80 MB and the new at once.
            if !self.options.dedupe { state.pass.hashes.reserveCapacity(self.mostValidRows(inBytes: rows)) }
        }
        return nil
    }

    /// The most valid rows `bytes` of input can hold: a token and a line end each (the last line without one).
    func mostValidRows(inBytes bytes: Int) -> Int {
        bytes / (self.options.encoding == .hex ? 65 : 44) + 1
    }

    /// The whole input's summary: from `validate()`, or once `nextChunk` has taken the last row of an opened
    /// source; nil before.
    public var summary: Summary? { self.state.withLockedValue { $0.resolvedSummary() } }

    /// The input's failure, once reading it failed (every later `nextChunk` throws it); nil while it reads.
    public var failure: InputError? { self.state.withLockedValue { $0.failure } }

    /// The summary when known, else the counts so far (`Summary.isFinal` false): what a job that stopped before
    /// the end of the input read of it (a resumed source's rows before its checkpoint included: this waits for
    /// them).
    public var summarySoFar: Summary {
        let replay = self.state.withLockedValue { state in
            state.streaming && state.summary == nil && state.resumed?.merged == false ? self.startReplay(&state) : nil
        }
        _ = replay?.wait()
        return self.state.withLockedValue { state in
            if let summary = state.resolvedSummary() { return summary }
            if state.resumed?.merged == false { _ = self.replayFailure(&state) }
            var running = state.pass.running
            running.isFinal = false
            running.duplicates = Self.repeats(state.pass.hashes)
            return running
        }
    }

    /// The rows of `summary` this run sends: the valid ones, less those the attached journal holds as settled (and,
    /// unless written rows are sent again, those it holds as written).
    public func rowsToSend(_ summary: Summary) -> Int {
        let resend = self.state.withLockedValue { $0.resendWritten }
        return summary.journaled.rowsToSend(validRows: summary.validRows, resendUncertain: resend)
    }

    /// The valid rows of the whole input: exact once known, else the valid rows so far scaled by the part of the
    /// input read (for progress lines). A source resumed at a checkpoint counts the checkpoint's valid rows before
    /// it and scales what it read after it.
    public var estimatedValidRows: Int {
        self.state.withLockedValue { state in
            if let summary = state.summary { return summary.validRows }
            // A file still being written counts what has arrived so far (one `fstat` per estimate, not per row).
            for index in state.growingFiles where index < state.descriptors.count {
                var status = stat()
                guard fstat(state.descriptors[index], &status) == 0 else { continue }
                state.totalBytes += Int(status.st_size) - state.fileSizes[index]
                state.fileSizes[index] = Int(status.st_size)
            }
            var before = (rows: 0, bytes: 0)
            if let resumed = state.resumed, !resumed.merged {
                before = (resumed.checkpoint.validRows, resumed.bytesBefore)
            }
            let read = state.bytesBefore + state.pass.offset - before.bytes
            let rest = state.totalBytes - before.bytes
            let valid = state.pass.running.validRows
            // Before the first row is taken: the first chunk's density over the rest of the input.
            if read <= 0 { return before.rows + Int(state.firstChunkRate * Double(rest)) }
            guard rest > read else { return before.rows + valid }
            return before.rows + Int(Double(valid) * Double(rest) / Double(read))
        }
    }

    /// When the first row was handed out (`DispatchTime` uptime nanoseconds), nil before: how long a job took to
    /// start sending.
    public var firstRowUptimeNanoseconds: UInt64? { self.state.withLockedValue { $0.firstRowAt } }
}
