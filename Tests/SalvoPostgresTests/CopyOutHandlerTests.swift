import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import PostgresNIO
import SalvoRows
import SalvoTestTraits
import Testing

@testable import SalvoPostgres

/// The parts of the copy that need no server: COPY's NULL in a CSV record, the backend messages' framing, the
/// description of the columns, and the query as it is wrapped.
@Suite("COPY … TO STDOUT reading", .tags(.pure), .runs(.pure)) struct CopyOutHandlerTests {
    static func isNull(_ record: String, _ index: Int) -> Bool {
        Array(record.utf8).withUnsafeBytes { CopyOutHandler.fieldIsNull($0, index: index) }
    }

    @Test("a NULL is an empty unquoted field; \"\" is an empty string; quoted commas and quotes are one field")
    func nullFields() {
        #expect(Self.isNull(",en\n", 0))
        #expect(!Self.isNull("\"\",en\n", 0))
        #expect(!Self.isNull("aa,en\n", 0))
        #expect(Self.isNull("1,,en\n", 1))
        #expect(Self.isNull("1,\n", 1))
        #expect(!Self.isNull("1,\"a,b\",\n", 1))
        #expect(Self.isNull("1,\"a,\"\"b\"\"\",\n", 2))
        #expect(Self.isNull("\"two\nlines\",,x\n", 1))
        #expect(!Self.isNull("\"two\nlines\",y,x\n", 1))
        #expect(Self.isNull("1,2\r\n", 2) == false, "past the last field is not a NULL")
    }

    @Test("backend messages are split whole; a message cut by a read waits for the rest")
    func framing() {
        var buffer = ByteBuffer()
        buffer.writeInteger(UInt8(ascii: "d"))
        buffer.writeInteger(UInt32(4 + 3))
        buffer.writeString("ab\n")
        buffer.writeInteger(UInt8(ascii: "C"))
        buffer.writeInteger(UInt32(4 + 7))
        buffer.writeString("COPY 1")  // cut: the terminating zero is missing
        let first = CopyOutHandler.nextMessage(&buffer)
        #expect(first?.0 == UInt8(ascii: "d"))
        #expect(first.map { String(buffer: $0.1) } == "ab\n")
        #expect(CopyOutHandler.nextMessage(&buffer) == nil)
        #expect(buffer.readableBytes == 1 + 4 + 6, "the cut message is left whole")
        buffer.writeInteger(UInt8(0))
        #expect(CopyOutHandler.nextMessage(&buffer)?.0 == UInt8(ascii: "C"))
        #expect(buffer.readableBytes == 0)

        // Lengths no message can have: refused, not waited for.
        for length in [UInt32(3), CopyOutHandler.largestMessage + 1, .max] {
            var bad = ByteBuffer()
            bad.writeInteger(UInt8(ascii: "d"))
            bad.writeInteger(length)
            #expect(CopyOutHandler.unreadableLength(bad) == length)
        }
        var fine = ByteBuffer()
        fine.writeInteger(UInt8(ascii: "d"))
        #expect(CopyOutHandler.unreadableLength(fine) == nil, "a header not all there yet")
        fine.writeInteger(UInt32(4 + 3))
        #expect(CopyOutHandler.unreadableLength(fine) == nil)
    }

    @Test("RowDescription gives each column's name and type; ErrorResponse its fields")
    func descriptions() {
        // The message's body: past its type and length.
        let message = CopyOutExchangeTests.description([("token", .text), ("n", .int4)])
        let body = message.getSlice(at: message.readerIndex + 5, length: message.readableBytes - 5)!
        #expect(
            CopyOutHandler.rowDescription(body)
                == [.init(name: "token", type: .text), .init(name: "n", type: .int4)]
        )
        #expect(CopyOutHandler.rowDescription(body.getSlice(at: 0, length: 9)!) == nil, "a cut description")

        var error = ByteBuffer()
        for (code, value) in [("S", "ERROR"), ("C", "22012"), ("M", "division by zero")] {
            error.writeString(code)
            error.writeString(value)
            error.writeInteger(UInt8(0))
        }
        error.writeInteger(UInt8(0))
        let fields = CopyOutHandler.errorFields(error)
        #expect(fields[UInt8(ascii: "C")] == "22012" && fields[UInt8(ascii: "M")] == "division by zero")
    }

    @Test("the query loses the semicolons and spaces that end it; an empty one or one with a NUL is refused")
    func statements() throws {
        #expect(try PostgresSpool.statement("SELECT 1 ;; \n") == "SELECT 1")
        #expect(try PostgresSpool.statement("SELECT 1 -- one") == "SELECT 1 -- one")
        #expect(throws: JobError.self) { try PostgresSpool.statement(" ;\n") }
        #expect(throws: JobError.self) { try PostgresSpool.statement("SELECT '\u{0}'") }
    }

    @Test("only text types may hold tokens; others are named as PostgreSQL names them")
    func tokenTypes() {
        #expect(PostgresColumnType.holdsText(.varchar) && PostgresColumnType.holdsText(.bpchar))
        #expect(PostgresColumnType.holdsText(PostgresDataType(20_000)), "citext, an enum: defined at run time")
        #expect(!PostgresColumnType.holdsText(.bytea) && !PostgresColumnType.holdsText(.int4))
        #expect(PostgresColumnType.name(.int4) == "integer")
    }
}

/// A `CopyOutHandler` on an `EmbeddedChannel` (connected, unless asked otherwise), writing into a temporary spool,
/// its outcome kept once it comes. `described` judges the columns as `PostgresSpool.copy` does: the token column by
/// name, the header written.
final class CopyHarness {
    let channel = EmbeddedChannel()
    let file: SpoolFile
    let writer: CSVSpoolWriter
    private let result = NIOLockedValueBox<CopyOutHandler.Outcome?>(nil)

    init(
        connected: Bool = true,
        silenceLimit: TimeAmount = .seconds(120),
        firstRowLimit: TimeAmount = .minutes(15),
        describeOnly: Bool = false
    ) throws {
        if connected { try self.channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 5432)).wait() }
        self.file = try SpoolFile.temporary(prefix: "salvo-copy-test", what: "a test spool")
        let writer = CSVSpoolWriter(descriptor: self.file.descriptor, name: self.file.name, hashing: false)
        self.writer = writer
        let promise = self.channel.eventLoop.makePromise(of: CopyOutHandler.Outcome.self)
        promise.futureResult.whenSuccess { [result] outcome in result.withLockedValue { $0 = outcome } }
        let handler = CopyOutHandler(
            query: "SELECT token, n FROM t",
            copyStatement: describeOnly ? nil : "COPY (\nSELECT token, n FROM t\n) TO STDOUT (FORMAT csv)",
            described: { columns throws(JobError) in
                let table = try ResultTable(columns, tokenColumn: .name("token"))
                table.writeHeader(to: writer)
                return table.tokenIndex
            },
            writer: writer,
            firstRow: nil,
            promise: promise,
            silenceLimit: silenceLimit,
            firstRowLimit: firstRowLimit
        )
        try self.channel.pipeline.syncOperations.addHandler(handler)
    }

    var outcome: CopyOutHandler.Outcome? { self.result.withLockedValue { $0 } }

    /// The types of the messages the handler sent since the last call.
    func sent() throws -> [UInt8] {
        var types: [UInt8] = []
        while var out = try self.channel.readOutbound(as: ByteBuffer.self) {
            while let (type, _) = CopyOutHandler.nextMessage(&out) { types.append(type) }
        }
        return types
    }

    /// `messages` handed over in pieces of `piece` bytes.
    func deliver(_ messages: [ByteBuffer], piece: Int = 1 << 16) throws {
        var all = ByteBuffer()
        for var message in messages { all.writeBuffer(&message) }
        while all.readableBytes > 0 {
            try self.channel.writeInbound(all.readSlice(length: min(piece, all.readableBytes))!)
        }
    }

    /// What the spool holds.
    func text() throws -> String {
        self.writer.flush()
        return try String(contentsOfFile: self.file.path, encoding: .utf8)
    }

    func close() {
        _ = try? self.channel.finish()
        self.file.discard()
    }
}

/// The handler's two exchanges on an `EmbeddedChannel`, the server's bytes cut at every size: what it asks, what it
/// writes, and how it ends.
@Suite("COPY … TO STDOUT exchange", .tags(.pure), .runs(.pure)) struct CopyOutExchangeTests {
    /// A backend message: type, length, body.
    static func message(_ type: Character, _ body: (inout ByteBuffer) -> Void = { _ in }) -> ByteBuffer {
        var content = ByteBuffer()
        body(&content)
        var buffer = ByteBuffer()
        buffer.writeInteger(type.asciiValue!)
        buffer.writeInteger(UInt32(4 + content.readableBytes))
        buffer.writeBuffer(&content)
        return buffer
    }

    static func description(_ columns: [(String, PostgresDataType)]) -> ByteBuffer {
        Self.message("T") { body in
            body.writeInteger(Int16(columns.count))
            for (name, type) in columns {
                body.writeString(name)
                body.writeInteger(UInt8(0))
                body.writeInteger(UInt32(0))
                body.writeInteger(Int16(0))
                body.writeInteger(type.rawValue)
                body.writeInteger(Int16(-1))
                body.writeInteger(Int32(-1))
                body.writeInteger(Int16(0))
            }
        }
    }

    static func ready() -> ByteBuffer { Self.message("Z") { $0.writeString("I") } }

    static func error(_ code: String, _ text: String) -> ByteBuffer {
        Self.message("E") { body in
            for (field, value) in [("S", "ERROR"), ("C", code), ("M", text)] {
                body.writeString(field + value)
                body.writeInteger(UInt8(0))
            }
            body.writeInteger(UInt8(0))
        }
    }

    /// Runs one exchange: `describe` answers the describe step; `copy` (when the handler asks for it) the copy.
    /// Each answer is handed over in pieces of `piece` bytes. Returns the outcome, the file's text and the
    /// messages' types the handler sent.
    static func exchange(
        describe: [ByteBuffer],
        copy: [ByteBuffer],
        piece: Int
    ) throws -> (CopyOutHandler.Outcome?, String, [UInt8]) {
        let harness = try CopyHarness()
        defer { harness.close() }
        var sent = try harness.sent()
        try harness.deliver(describe, piece: piece)
        sent += try harness.sent()
        if sent.last == UInt8(ascii: "Q") { try harness.deliver(copy, piece: piece) }
        sent += try harness.sent()
        return (harness.outcome, try harness.text(), sent)
    }

    static let rows = ["aa,1\n", ",2\n", "\"c,\"\"d\",3\n", "\"\",4\n"]

    @Test("without a copy statement the exchange ends with the query's columns once described, and runs nothing")
    func describedOnly() throws {
        let harness = try CopyHarness(describeOnly: true)
        defer { harness.close() }
        #expect(try harness.sent() == [UInt8(ascii: "P"), UInt8(ascii: "D"), UInt8(ascii: "S")])
        try harness.deliver([Self.message("1"), Self.description([("token", .text), ("n", .int4)]), Self.ready()])
        #expect(try harness.sent().isEmpty, "no copy is asked for")
        guard case .described(let names)? = harness.outcome else {
            Issue.record("\(String(describing: harness.outcome))")
            return
        }
        #expect(names == ["token", "n"])

        let refused = try CopyHarness(describeOnly: true)
        defer { refused.close() }
        _ = try refused.sent()
        try refused.deliver([Self.message("1"), Self.description([("n", .int4)]), Self.ready()])
        #expect(try refused.sent().isEmpty)
        guard case .failed(let error)? = refused.outcome else {
            Issue.record("\(String(describing: refused.outcome))")
            return
        }
        #expect(error.message.contains("no column named 'token'"), "\(error.message)")
    }

    static func copyAnswer(_ rows: [String], failing: Bool = false) -> [ByteBuffer] {
        var messages = [
            Self.message("H") {
                $0.writeInteger(UInt8(0))
                $0.writeInteger(Int16(2))
                $0.writeInteger(Int32(0))
            }
        ]
        for row in rows { messages.append(Self.message("d") { $0.writeString(row) }) }
        if failing {
            messages.append(Self.error("22012", "division by zero"))
        } else {
            messages.append(Self.message("c"))
            messages.append(
                Self.message("C") {
                    $0.writeString("COPY \(rows.count)")
                    $0.writeInteger(UInt8(0))
                }
            )
        }
        messages.append(Self.ready())
        return messages
    }

    @Test(
        "every row written as it came, a NULL token counted, whatever the reads' sizes",
        arguments: [1, 2, 3, 5, 7, 64, 4096]
    )
    func wholeCopy(piece: Int) throws {
        let (outcome, text, sent) = try Self.exchange(
            describe: [
                Self.message("1"), Self.message("t") { $0.writeInteger(Int16(0)) },
                Self.description([("token", .text), ("n", .int4)]), Self.ready(),
            ],
            copy: Self.copyAnswer(Self.rows),
            piece: piece
        )
        #expect(sent == Array("PDSQ".utf8), "Parse, Describe, Sync, then the COPY")
        #expect(text == "token,n\n" + Self.rows.joined())
        guard case .copied(let copied) = outcome else {
            Issue.record("outcome \(String(describing: outcome))")
            return
        }
        #expect(copied.rows == 4 && copied.nullTokens == 1 && copied.firstNullRows == [2])
        #expect(copied.columns == ["token", "n"])
    }

    @Test(
        "a refused description ends before any copy; an error mid-copy ends with the rows before it",
        arguments: [1, 3, 4096]
    )
    func failures(piece: Int) throws {
        let (refused, refusedText, refusedSent) = try Self.exchange(
            describe: [Self.error("42P01", "relation \"t\" does not exist"), Self.ready()],
            copy: [],
            piece: piece
        )
        #expect(refusedSent == Array("PDS".utf8))
        #expect(refusedText.isEmpty)
        guard case .serverError(let fields, .describe) = refused else {
            Issue.record("outcome \(String(describing: refused))")
            return
        }
        #expect(fields[UInt8(ascii: "C")] == "42P01")

        let (notText, _, notTextSent) = try Self.exchange(
            describe: [Self.description([("token", .bytea)]), Self.ready()],
            copy: [],
            piece: piece
        )
        #expect(notTextSent == Array("PDS".utf8), "no COPY for a token column that is not text")
        guard case .failed(let error) = notText else {
            Issue.record("outcome \(String(describing: notText))")
            return
        }
        #expect(error.message.contains("of type bytea, not text"))

        let (midway, midwayText, _) = try Self.exchange(
            describe: [Self.description([("token", .text), ("n", .int4)]), Self.ready()],
            copy: Self.copyAnswer(Array(Self.rows.prefix(2)), failing: true),
            piece: piece
        )
        #expect(midwayText == "token,n\n" + Self.rows.prefix(2).joined())
        guard case .serverError(let midwayFields, .copy) = midway else {
            Issue.record("outcome \(String(describing: midway))")
            return
        }
        #expect(midwayFields[UInt8(ascii: "M")] == "division by zero")
    }

    @Test("after ReadyForQuery ends the copy, the bytes in the same read pass on to the next handler")
    func theRestPassesOn() throws {
        let harness = try CopyHarness()
        defer { harness.close() }
        let channel = harness.channel
        var bytes = ByteBuffer()
        for var message in [Self.error("42601", "syntax error"), Self.ready(), Self.message("N")] {
            bytes.writeBuffer(&message)
        }
        try channel.writeInbound(bytes)
        let passed = try channel.readInbound(as: ByteBuffer.self)
        #expect(passed.map { Array($0.readableBytesView) } == Array(Self.message("N").readableBytesView))
    }

    @Test("a server silent past the limit ends the copy: longer before the first row than between rows")
    func silence() throws {
        for rowsFirst in [false, true] {
            let harness = try CopyHarness(silenceLimit: .seconds(2), firstRowLimit: .seconds(5))
            defer { harness.close() }
            var answer = [Self.description([("token", .text)]), Self.ready()]
            if rowsFirst { answer.append(Self.message("d") { $0.writeString("aa\n") }) }
            try harness.deliver(answer)
            harness.channel.embeddedEventLoop.advanceTime(by: .seconds(rowsFirst ? 1 : 4))
            #expect(harness.outcome == nil, "within the limit")
            harness.channel.embeddedEventLoop.advanceTime(by: .seconds(2))
            guard case .connectionLost(let reason) = harness.outcome else {
                Issue.record("outcome \(String(describing: harness.outcome))")
                continue
            }
            #expect(reason.contains(rowsFirst ? "nothing for 2 s" : "nothing for 5 s, before the query's first row"))
        }
    }

    @Test("a connection closed before the handler came ends the copy at once")
    func closedBefore() throws {
        let harness = try CopyHarness(connected: false)
        defer { harness.close() }
        guard case .connectionLost = harness.outcome else {
            Issue.record("outcome \(String(describing: harness.outcome))")
            return
        }
        #expect(try harness.sent().isEmpty, "nothing sent")
    }
}
