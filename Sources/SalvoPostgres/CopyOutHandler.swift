import NIOCore
import PostgresNIO
import SalvoRows

/// `COPY (query) TO STDOUT (FORMAT csv)` on a connection PostgresNIO opened and logged in: the server writes the CSV,
/// and each row's bytes go from the socket into the spool with one copy.
///
/// Written by hand because PostgresNIO 1.33 has no `COPY … TO STDOUT`: reading a query's rows through its row
/// interface costs about 0.6 µs of client CPU a row in the driver's state machine and per-cell values (a million
/// rows took three times as long as the same rows from a file). Here PostgresNIO still does everything but the
/// copy — TCP, TLS, the login (SCRAM and the rest), closing — and this handler, placed in front of PostgresNIO's own,
/// holds the connection for the time of two exchanges, whose messages it reads itself:
///
/// 1. **Describe**: Parse, Describe and Sync for the query as the user wrote it — its columns' names and types,
///    without running it — so a query without a usable token column is refused before anything is read, and a syntax
///    error's position is the user's own.
/// 2. **Copy**: the query wrapped in `COPY (…) TO STDOUT`: one CopyData message per row, then CommandComplete
///    (`COPY n`) and ReadyForQuery.
///
/// Nothing reaches PostgresNIO's handler meanwhile (it stays idle, ready for a query); once ReadyForQuery ends the
/// copy, this handler passes everything on, and the connection closes as any other. Touched only on the channel's
/// event loop (made on the caller's thread and handed to the loop once, hence unchecked).
final class CopyOutHandler: ChannelInboundHandler, RemovableChannelHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// A column as RowDescription names it.
    struct Column: Equatable {
        var name: String
        var type: PostgresDataType
    }

    /// What the describe step decides: the CSV's token column (for counting NULL tokens) and whether to copy.
    typealias Described = ([Column]) throws(JobError) -> Int

    /// What became of the copy.
    enum Outcome {
        /// Every row copied.
        case copied(Copied)
        /// Without a copy statement: the query's columns, as the server described them (and `described` took).
        case described([String])
        /// The server refused or failed the query (its ErrorResponse's fields by code), in `phase`.
        case serverError(fields: [UInt8: String], phase: Phase)
        /// The decision after describing the query, the spool's writer, or a message that cannot be read.
        case failed(JobError)
        /// The connection ended (closed, reset, a TLS error) before ReadyForQuery.
        case connectionLost(String)
    }

    enum Phase { case describe, copy }

    /// What a whole copy wrote.
    struct Copied {
        var rows: Int
        /// Rows whose token is NULL (an empty unquoted field), and the first ten of them (1-based).
        var nullTokens: Int
        var firstNullRows: [Int]
        /// The columns' names, in order.
        var columns: [String]
    }

    private enum State {
        case describing(columns: [Column]?, error: [UInt8: String]?)
        case copying(error: [UInt8: String]?)
        /// Ended: everything passes on to PostgresNIO's handler.
        case done
    }

    private let query: String
    private let copyStatement: String?
    private let described: Described
    private let writer: CSVSpoolWriter?
    private let promise: EventLoopPromise<Outcome>
    /// Called once, after the first row is in the file (flushed), with the columns' names.
    private var firstRow: (([String]) -> Void)?
    private var state: State = .describing(columns: nil, error: nil)
    /// Bytes of a message that a read cut in two.
    private var pending: ByteBuffer?
    private var tokenIndex = 0
    private var names: [String] = []
    private var rows = 0
    private var nullTokens = 0
    private var firstNullRows: [Int] = []
    private var ended = false
    /// The longest the server may stay silent once rows flow, and before the first row (a query may sort or scan for
    /// minutes before it has one): then the copy ends as a lost connection.
    private let silenceLimit: TimeAmount
    private let firstRowLimit: TimeAmount
    /// When the server last sent anything, and the check that ends a copy it has not fed for `silenceLimit`.
    private var lastHeard = NIODeadline.uptimeNanoseconds(0)
    private var silenceCheck: Scheduled<Void>?

    /// - Parameters:
    ///   - query: the user's query (one statement, no trailing `;`).
    ///   - copyStatement: `COPY (query) TO STDOUT …`; nil: the exchange ends once the query is described (and
    ///     `described` took its columns), and nothing is run.
    ///   - writer: where the rows go; nil only without a copy statement.
    ///   - described: judges the columns; returns the token column's index, or throws to end without copying.
    ///   - silenceLimit: the longest the server may send nothing once rows flow (a server gone quiet mid-copy).
    ///   - firstRowLimit: the longest it may send nothing before the first row.
    init(
        query: String,
        copyStatement: String?,
        described: @escaping Described,
        writer: CSVSpoolWriter?,
        firstRow: (([String]) -> Void)?,
        promise: EventLoopPromise<Outcome>,
        silenceLimit: TimeAmount = .seconds(120),
        firstRowLimit: TimeAmount = .minutes(15)
    ) {
        self.silenceLimit = silenceLimit
        self.firstRowLimit = firstRowLimit
        self.query = query
        self.copyStatement = copyStatement
        self.described = described
        self.writer = writer
        self.firstRow = firstRow
        self.promise = promise
    }

    func handlerAdded(context: ChannelHandlerContext) {
        guard context.channel.isActive else {
            // Closed before the handler came: no inactive event will reach it.
            return self.finish(.connectionLost("the server closed the connection"))
        }
        self.lastHeard = context.eventLoop.now
        self.scheduleSilenceCheck(context: context, after: self.allowedSilence)
        var message = context.channel.allocator.buffer(capacity: self.query.utf8.count + 32)
        Self.frontend(UInt8(ascii: "P"), into: &message) { body in
            body.writeInteger(UInt8(0))  // the unnamed statement
            body.writeString(self.query)
            body.writeInteger(UInt8(0))
            body.writeInteger(Int16(0))  // no parameter types
        }
        Self.frontend(UInt8(ascii: "D"), into: &message) { body in
            body.writeInteger(UInt8(ascii: "S"))
            body.writeInteger(UInt8(0))
        }
        Self.frontend(UInt8(ascii: "S"), into: &message) { _ in }
        context.writeAndFlush(self.wrapOutboundOut(message), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if self.ended {
            // After the exchange: everything is PostgresNIO's.
            context.fireChannelRead(data)
            return
        }
        self.lastHeard = context.eventLoop.now
        var incoming = self.unwrapInboundIn(data)
        if var pending = self.pending {
            // Only the rest of the cut message is copied, never a whole read.
            self.pending = nil
            while Self.missingBytes(pending) > 0 && incoming.readableBytes > 0 {
                var part = incoming.readSlice(length: min(Self.missingBytes(pending), incoming.readableBytes))!
                pending.writeBuffer(&part)
            }
            guard Self.missingBytes(pending) == 0 else {
                if let length = Self.unreadableLength(pending) { return self.refuse(length: length, context: context) }
                self.pending = pending
                return
            }
            self.process(&pending, context: context)
            if self.ended {
                if incoming.readableBytes > 0 { context.fireChannelRead(self.wrapInboundOut(incoming)) }
                return
            }
        }
        self.process(&incoming, context: context)
        if self.ended {
            if incoming.readableBytes > 0 { context.fireChannelRead(self.wrapInboundOut(incoming)) }
        } else if incoming.readableBytes > 0 {
            // The start of a message the next read completes, in a buffer of its own (the read's may be reused).
            var pending = context.channel.allocator.buffer(capacity: max(64, incoming.readableBytes))
            pending.writeBuffer(&incoming)
            self.pending = pending
        }
    }

    /// Every whole message in `buffer`, until the exchange ends.
    private func process(_ buffer: inout ByteBuffer, context: ChannelHandlerContext) {
        while !self.ended {
            if case .copying(nil) = self.state {
                self.rows(from: &buffer, context: context)
                if self.ended { return }
            }
            guard let (type, body) = Self.nextMessage(&buffer) else {
                if let length = Self.unreadableLength(buffer) { self.refuse(length: length, context: context) }
                return
            }
            self.receive(type, body, context: context)
        }
    }

    /// The largest message taken: a row (one CopyData) of a token file is far below it, and a server that announces
    /// more is not waited for with the bytes held.
    static let largestMessage: UInt32 = 1 << 28

    /// The length the message at the front of `buffer` announces when no message can have it (below its own 4 bytes,
    /// or above `largestMessage`); nil when it is readable or its header is not all there yet.
    static func unreadableLength(_ buffer: ByteBuffer) -> UInt32? {
        guard let length: UInt32 = buffer.getInteger(at: buffer.readerIndex + 1) else { return nil }
        return length < 4 || length > Self.largestMessage ? length : nil
    }

    /// Ends the exchange on a message that cannot be read, and closes the connection.
    private func refuse(length: UInt32, context: ChannelHandlerContext) {
        self.finish(.failed(JobError(.input, "the server sent a message that cannot be read (length \(length))")))
        context.close(promise: nil)
    }

    /// How many more bytes the message at the front of `buffer` needs to be whole (while its length cannot be read
    /// yet, the rest of its header).
    static func missingBytes(_ buffer: ByteBuffer) -> Int {
        guard buffer.readableBytes >= 5, let length: UInt32 = buffer.getInteger(at: buffer.readerIndex + 1) else {
            return 5 - buffer.readableBytes
        }
        return max(0, 1 + Int(length) - buffer.readableBytes)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if self.ended { context.fireChannelReadComplete() }
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.finish(.connectionLost("the server closed the connection"))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.finish(.connectionLost(PostgresFailure.describe(error)))
        context.fireErrorCaught(error)
    }

    /// Completes the copy once; later calls do nothing. From then on the handler passes everything on.
    private func finish(_ outcome: Outcome) {
        guard !self.ended else { return }
        self.ended = true
        self.state = .done
        self.silenceCheck?.cancel()
        self.silenceCheck = nil
        self.promise.succeed(outcome)
    }

    /// The silence allowed now: `firstRowLimit` until the first row, `silenceLimit` after it.
    private var allowedSilence: TimeAmount { self.rows == 0 ? self.firstRowLimit : self.silenceLimit }

    /// Ends the exchange (and closes the connection) once the server has been silent for the allowed time; checked
    /// when that time since the last bytes would be up, so a copy that flows costs one timer, not one per read.
    private func scheduleSilenceCheck(context: ChannelHandlerContext, after delay: TimeAmount) {
        self.silenceCheck?.cancel()
        self.silenceCheck = context.eventLoop.assumeIsolated().scheduleTask(in: delay) { [self] in
            guard !self.ended else { return }
            let silent = context.eventLoop.now - self.lastHeard
            let allowed = self.allowedSilence
            guard silent >= allowed else {
                return self.scheduleSilenceCheck(context: context, after: allowed - silent)
            }
            let seconds = allowed.nanoseconds / 1_000_000_000
            self.finish(
                .connectionLost(
                    "the server sent nothing for \(seconds) s"
                        + (self.rows == 0 ? ", before the query's first row" : "")
                )
            )
            context.close(promise: nil)
        }
    }

    /// The rows (CopyData messages) at the front of `buffer`, each written into the spool as it came: a CSV record
    /// ending in a line feed. The hot loop of a copy — a million rows are a million messages — so it reads the bytes
    /// in place, with no value made per row.
    private func rows(from buffer: inout ByteBuffer, context: ChannelHandlerContext) {
        let copyData = UInt8(ascii: "d")
        let rowsBefore = self.rows
        let consumed = buffer.withUnsafeReadableBytes { bytes -> Int in
            var at = 0
            while at + 5 <= bytes.count && bytes[at] == copyData {
                let length = Int(UInt32(bigEndian: bytes.loadUnaligned(fromByteOffset: at + 1, as: UInt32.self)))
                guard length >= 4, at + 1 + length <= bytes.count else { break }
                let record = UnsafeRawBufferPointer(rebasing: bytes[(at + 5)..<(at + 1 + length)])
                self.rows += 1
                if Self.fieldIsNull(record, index: self.tokenIndex) {
                    self.nullTokens += 1
                    if self.firstNullRows.count < 10 { self.firstNullRows.append(self.rows) }
                }
                self.writer?.raw(record)
                at += 1 + length
            }
            return at
        }
        guard consumed > 0 else { return }
        buffer.moveReaderIndex(forwardBy: consumed)
        if rowsBefore == 0 && self.rows > 0 {
            // Rows flow: from now on the shorter silence is allowed.
            self.scheduleSilenceCheck(context: context, after: self.silenceLimit)
        }
        if let firstRow = self.firstRow {
            self.firstRow = nil
            self.writer?.flush()
            if self.writer?.failure == nil { firstRow(self.names) }
        }
        if let failure = self.writer?.failure {
            // The file cannot be written: the copy is cut (closing the connection ends the query).
            self.finish(.failed(failure))
            context.close(promise: nil)
        }
    }

    private func receive(_ type: UInt8, _ body: ByteBuffer, context: ChannelHandlerContext) {
        switch (self.state, type) {
        case (.describing(_, let error), UInt8(ascii: "T")):
            guard let columns = Self.rowDescription(body) else {
                return self.finish(
                    .failed(JobError(.input, "the server's description of --query's columns cannot be read"))
                )
            }
            self.state = .describing(columns: columns, error: error)
        case (.describing(let columns, nil), UInt8(ascii: "E")):
            self.state = .describing(columns: columns, error: Self.errorFields(body))
        case (.copying(nil), UInt8(ascii: "E")):
            self.state = .copying(error: Self.errorFields(body))
        case (.describing(let columns, let error), UInt8(ascii: "Z")):
            if let error {
                return self.finish(.serverError(fields: error, phase: .describe))
            }
            guard let columns else {
                return self.finish(
                    .failed(
                        JobError(
                            .input,
                            "--query returns no rows (it is not a query that returns rows): nothing to send"
                        )
                    )
                )
            }
            self.startCopy(columns, context: context)
        case (.copying(let error), UInt8(ascii: "Z")):
            self.writer?.flush()
            if let error {
                return self.finish(.serverError(fields: error, phase: .copy))
            }
            if let failure = self.writer?.failure { return self.finish(.failed(failure)) }
            self.finish(
                .copied(
                    Copied(
                        rows: self.rows,
                        nullTokens: self.nullTokens,
                        firstNullRows: self.firstNullRows,
                        columns: self.names
                    )
                )
            )
        default:
            // ParseComplete, ParameterDescription, NoData, CopyOutResponse, CopyDone, CommandComplete, notices,
            // parameter changes and notifications: nothing to act on. Rows after an error are not written.
            break
        }
    }

    private func startCopy(_ columns: [Column], context: ChannelHandlerContext) {
        do throws(JobError) {
            self.tokenIndex = try self.described(columns)
        } catch {
            return self.finish(.failed(error))
        }
        self.names = columns.map(\.name)
        guard let copyStatement = self.copyStatement else {
            // Described only: the connection is idle (after ReadyForQuery), PostgresNIO's again.
            return self.finish(.described(self.names))
        }
        self.state = .copying(error: nil)
        var message = context.channel.allocator.buffer(capacity: copyStatement.utf8.count + 8)
        Self.frontend(UInt8(ascii: "Q"), into: &message) { body in
            body.writeString(copyStatement)
            body.writeInteger(UInt8(0))
        }
        context.writeAndFlush(self.wrapOutboundOut(message), promise: nil)
    }

    /// Whether field `index` of one CSV record (COPY's form: fields quoted only when they must be, a line feed at the
    /// end) is empty and unquoted: COPY writes a NULL so, and an empty string as `""`.
    static func fieldIsNull(_ record: UnsafeRawBufferPointer, index: Int) -> Bool {
        let comma = UInt8(ascii: ",")
        let quote = UInt8(ascii: "\"")
        let lineFeed: UInt8 = 0x0A
        var at = 0
        var field = 0
        while field < index {
            if at < record.count && record[at] == quote {
                at += 1
                while at < record.count {
                    if record[at] == quote {
                        if at + 1 < record.count && record[at + 1] == quote {
                            at += 2
                            continue
                        }
                        at += 1
                        break
                    }
                    at += 1
                }
            }
            while at < record.count && record[at] != comma && record[at] != lineFeed { at += 1 }
            guard at < record.count && record[at] == comma else { return false }
            at += 1
            field += 1
        }
        return at >= record.count || record[at] == comma || record[at] == lineFeed || record[at] == 0x0D
    }

    /// Splits the next whole backend message (type byte, length, body) off `buffer`, nil when it holds less.
    static func nextMessage(_ buffer: inout ByteBuffer) -> (UInt8, ByteBuffer)? {
        guard let type: UInt8 = buffer.getInteger(at: buffer.readerIndex),
            let length: UInt32 = buffer.getInteger(at: buffer.readerIndex + 1),
            length >= 4, buffer.readableBytes >= 1 + Int(length)
        else { return nil }
        buffer.moveReaderIndex(forwardBy: 5)
        let body = buffer.readSlice(length: Int(length) - 4)!
        return (type, body)
    }

    /// A frontend message: its type, its length, then what `body` writes.
    private static func frontend(_ type: UInt8, into buffer: inout ByteBuffer, _ body: (inout ByteBuffer) -> Void) {
        buffer.writeInteger(type)
        let lengthAt = buffer.writerIndex
        buffer.writeInteger(UInt32(0))
        body(&buffer)
        buffer.setInteger(UInt32(buffer.writerIndex - lengthAt), at: lengthAt)
    }

    /// RowDescription: a count, then per column its name, table, attribute, type, size, modifier and format.
    static func rowDescription(_ body: ByteBuffer) -> [Column]? {
        var body = body
        guard let count: Int16 = body.readInteger(), count >= 0 else { return nil }
        var columns: [Column] = []
        for _ in 0..<count {
            guard let name = body.readNullTerminatedString(),
                body.readInteger(as: UInt32.self) != nil,
                body.readInteger(as: Int16.self) != nil,
                let type: UInt32 = body.readInteger(),
                body.readSlice(length: 2 + 4 + 2) != nil
            else { return nil }
            columns.append(Column(name: name, type: PostgresDataType(type)))
        }
        return columns
    }

    /// ErrorResponse: fields, each a code byte and a string, up to a zero byte.
    static func errorFields(_ body: ByteBuffer) -> [UInt8: String] {
        var body = body
        var fields: [UInt8: String] = [:]
        while let code: UInt8 = body.readInteger(), code != 0, let value = body.readNullTerminatedString() {
            fields[code] = value
        }
        return fields
    }
}
