import SalvoRows
import SalvoTestSupport
import SalvoTestTraits
import Testing

@testable import SalvoHTTP2

/// A flight of 1,000 streams over TLS, with either engine: a batch of requests (up to 512, ~75 KiB) is more than the
/// channel's high water mark (64 KiB), so the channel turns unwritable while it is written and writable again
/// while it is flushed, inside the write; the requests written then must follow the batch, once. NIOHTTP2's server
/// refuses a request on a stream id it has seen (a connection error), so a batch sent twice would cost
/// connections and resends.
@Suite(.tags(.network), .runs(.network), .serialized, .timeLimit(.minutes(1))) struct LargeFlightTests {
    @Test(arguments: HTTP2Engine.allCases) func batchesOverTheWriteBufferGoOutOnceInOrder(
        engine: HTTP2Engine
    ) async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let count = 2000
        let file = try TokenFile(count: count, seed: 83, in: folder)
        let ledger = ServerLedger()
        let server = try await startServer { request in
            _ = ledger.request(request)
            ledger.delivered(request)
            return .ok(apnsID: nil)
        }
        var configuration = jobConfigurationForTests(
            engine: engine,
            port: server.port,
            authentication: clientCertificate,
            connections: 2
        )
        // NIOHTTP2 in a debug build on loaded cores answers 1,000 open streams slowly: no deadline may cut them
        // here, or rows in flight go again.
        configuration.client.requestTimeout = .seconds(60)
        let result = try await HTTP2Job.run(configuration: configuration, source: file.source, summary: file.summary)
        await server.stop()

        #expect(result.stopped == nil)
        #expect(result.report.confirmed == count)
        #expect(result.report.resent == 0, "\(result.connectionErrors)")
        #expect(server.connectionCount == 2, "\(result.connectionErrors)")
        let snapshot = ledger.snapshot
        #expect(snapshot.delivered.count == count && snapshot.delivered.values.allSatisfy { $0 == 1 })
        #expect(server.requestCount == count)
    }
}
