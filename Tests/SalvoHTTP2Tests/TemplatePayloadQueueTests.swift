import APNSWire
import Foundation
import NIOCore
import NIOEmbedded
import SalvoRows
import SalvoTestTraits
import Testing

@testable import SalvoHTTP2

/// Rows with payloads of their own (a payload template) on their way through the work queue: rendered once per
/// chunk into one buffer that the chunk's rows share, and never more of them waiting than a fixed number of rows and
/// bytes, however slowly they are taken and however many rows the input has.
@Suite(.tags(.pure), .runs(.pure)) struct TemplatePayloadQueueTests {
    static let template = #"{"aps":{"alert":"Hello {{name}}, {{count}} new"},"campaign":"c-0001"}"#

    /// A validated source over `count` rows with a name and a count per row, rendered with `template`.
    static func source(rows count: Int, in folder: TemporaryFolder) throws -> (TokenSource, [DeviceToken]) {
        let file = try TokenFile(count: count, seed: 71, in: folder)
        var lines = ["token,name,count"]
        for (index, token) in file.tokens.enumerated() {
            lines.append("\(token.hexString),\(Self.name(line: index + 2)),\(index % 97)")
        }
        let path = folder.file("templated.csv")
        try (lines.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        let template = try PayloadTemplate(json: Array(Self.template.utf8), file: "template.json")
        let source = TokenSource(
            files: [path],
            payloads: RowPayloads(templates: PayloadTemplates(template), limit: .http2)
        )
        try source.validate()
        return (source, file.tokens)
    }

    /// Names of different lengths, so that the rows' bodies do too.
    static func name(line: Int) -> String { "user-" + String(repeating: "x", count: line % 13) + "\(line)" }

    static func expectedBody(line: Int) -> String {
        #"{"aps":{"alert":"Hello \#(Self.name(line: line)), \#((line - 2) % 97) new"},"campaign":"c-0001"}"#
    }

    /// Where a body's bytes start in memory.
    static func address(_ buffer: ByteBuffer) -> UInt {
        buffer.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress) }
    }

    /// How many runs of bodies lying end to end in memory `bodies` make: 1 when they are consecutive slices of one
    /// buffer. A buffer copied for each row (a write after a slice was cut) leaves each body in a storage of its own.
    static func contiguousRuns(_ bodies: [ByteBuffer]) -> Int {
        var runs = bodies.isEmpty ? 0 : 1
        for (previous, next) in zip(bodies, bodies.dropFirst())
        where Self.address(previous) + UInt(previous.readableBytes) != Self.address(next) {
            runs += 1
        }
        return runs
    }

    @Test func aChunksRowsShareOneBufferRenderedOnceAndEachBodyIsItsOwnRow() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let (source, _) = try Self.source(rows: 3000, in: folder)
        var chunks = 0
        var rows = 0
        while let items = try source.nextItems(maximumRows: 1024) {
            chunks += 1
            let bodies = items.map { $0.payload! }
            // One storage for the chunk, the bodies end to end in it.
            #expect(Self.contiguousRuns(bodies) == 1)
            let total = bodies.reduce(0) { $0 + $1.readableBytes }
            #expect(bodies[0].storageCapacity >= total && bodies[0].storageCapacity < 2 * total)
            for item in items {
                #expect(String(buffer: item.payload!) == Self.expectedBody(line: item.row.line))
            }
            rows += items.count
        }
        #expect(chunks == 3 && rows == 3000)
    }

    /// A connection takes rows while their own bodies fit its send window: in order, never past the window, and
    /// none when the first does not fit.
    @Test func rowsAreTakenWhileTheirBodiesFitTheBytesAsked() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let (source, _) = try Self.source(rows: 100, in: folder)
        let loop = EmbeddedEventLoop()
        let queue = HTTP2WorkQueue(source: source, finished: loop.makePromise(of: Void.self))
        let now = NIODeadline.uptimeNanoseconds(1_000_000_000)
        queue.waitForReadAhead()
        let first = Self.expectedBody(line: 2).utf8.count
        #expect(queue.take(maximum: 10, maximumBytes: first - 1, now: now).isEmpty)
        var lines: [Int] = []
        var window = 1000
        while lines.count < 100 {
            let taken = queue.take(maximum: 50, maximumBytes: window, now: now)
            let bytes = taken.reduce(0) { $0 + $1.payload!.readableBytes }
            #expect(!taken.isEmpty && bytes <= window)
            // The next row would not have fitted.
            if taken.count < 50, lines.count + taken.count < 100 {
                let next = Self.expectedBody(line: taken.last!.row.line + 1).utf8.count
                #expect(bytes + next > window)
            }
            lines += taken.map(\.row.line)
            window = window == 1000 ? 3000 : 1000
        }
        #expect(lines == Array(2...101))
        #expect(queue.readyCounts.bytes == 0)
        queue.complete(finals: 100, retries: [])
        loop.run()
        #expect(queue.isDone)
    }

    /// A consumer that takes a few rows at a time and holds many in flight (a server answering slowly): the rows
    /// and bytes ready never pass two chunks' worth, whatever the input's size; each chunk holds at most the byte
    /// budget at the longest body; a retry waiting for its backoff keeps a body of its own, not its chunk.
    @Test(arguments: [2000, 20000]) func renderedRowsWaitingStayUnderAFixedCapWhileASlowConsumerTakesThem(
        rows count: Int
    ) throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let (source, tokens) = try Self.source(rows: count, in: folder)
        let loop = EmbeddedEventLoop()
        let budget = 256 * 1024
        let queue = HTTP2WorkQueue(
            source: source,
            chunkRows: 4096,
            readyByteBudget: budget,
            finished: loop.makePromise(of: Void.self)
        )
        // 256 KiB at APNs' 4 KiB limit: 64 rows a chunk, however many were asked for.
        #expect(queue.chunkRows == budget / PayloadLimit.http2.bytes)
        let rowCap = 2 * queue.chunkRows
        let byteCap = 2 * budget
        let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
        var inFlight: [HTTP2WorkItem] = []
        var seen = Set<DeviceToken>()
        var retried: HTTP2WorkItem?
        var step = 0
        while seen.count < count {
            step += 1
            #expect(step < 100 * count, "the queue stopped handing out rows")
            if step >= 100 * count { break }
            queue.waitForReadAhead()
            let ready = queue.readyCounts
            #expect(ready.rows <= rowCap && ready.bytes <= byteCap)
            let now = start + .milliseconds(Int64(step))
            let taken = queue.take(maximum: 5, now: now)
            // Taken together, a batch's bodies lie end to end in one chunk's buffer, or two where it crosses a
            // chunk's end.
            #expect(Self.contiguousRuns(taken.filter { $0.attempts == 0 }.map { $0.payload! }) <= 2)
            for item in taken {
                #expect(String(buffer: item.payload!) == Self.expectedBody(line: item.row.line))
                if item.attempts > 0 {
                    // The retry: a body of its own, a copy of its bytes alone.
                    #expect(item.payload!.storageCapacity < 2 * item.payload!.readableBytes)
                    #expect(item.row == retried?.row)
                }
            }
            inFlight.append(contentsOf: taken)
            // Answers come slower than requests go: a fifth of a batch at a time, up to 500 rows in flight.
            let answered = inFlight.count > 500 || taken.isEmpty ? min(inFlight.count, 20) : 1
            var finals = 0
            var retries: [HTTP2WorkItem] = []
            for item in inFlight.prefix(answered) {
                if retried == nil && item.row.line == count / 2 {
                    var again = item
                    again.attempts = 1
                    again.notBefore = now + .milliseconds(50)
                    retried = again
                    retries.append(again)
                } else {
                    finals += 1
                    seen.insert(item.row.token)
                }
            }
            inFlight.removeFirst(answered)
            queue.complete(finals: finals, retries: retries)
        }
        #expect(seen == Set(tokens))
        let counts = queue.readyCounts
        #expect(counts.rows == 0 && counts.bytes == 0)
        #expect(counts.peakRows <= rowCap && counts.peakBytes <= byteCap)
        #expect(counts.peakRows > 0 && counts.peakBytes > 0)
        queue.waitForReadAhead()
        #expect(queue.isDone)
    }
}
