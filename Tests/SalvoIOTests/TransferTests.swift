import Dispatch
import NIOCore
import SalvoIO
import SalvoTestTraits
import Testing

/// Bulk transfers, back-pressure and connection endings. Serialized: these tests move hundreds of MiB
/// and would only slow each other down on a small machine.
@Suite("Transfers over both transports", .tags(.network), .runs(.network), .serialized)
struct TransferTests {
    static let bulkSize = 256 * 1024 * 1024

    @Test("256 MiB each way arrive intact and in order", arguments: [TransportKind.uring, .socket])
    func bulkBothWays(transport: TransportKind) async throws {
        guard Transports.available(transport) else { return }
        let size = Self.bulkSize
        let serverSent = Waiter<StreamSender>()
        let serverReceiver = StreamReceiver(expected: size)
        let server = try TestServer(transport: transport, tls: try TLSFixtures.server()) { result in
            guard case .success(let connection) = result else { return }
            let sender = StreamSender(connection: connection, total: size, seed: 2)
            connection.onPlaintext = { serverReceiver.receive($0) }
            connection.onWritable = { sender.pump() }
            sender.start()
            serverSent.fulfill(sender)
        }
        defer { server.stop() }

        let clientReceiver = StreamReceiver(expected: size)
        let clientSent = Waiter<StreamSender>()
        let clientEnd = Waiter<ConnectionEnd>()
        let (_, result) = try await connectClient(
            transport: transport,
            port: server.port,
            tls: try TLSFixtures.client()
        ) {
            connection in
            let sender = StreamSender(connection: connection, total: size, seed: 1)
            connection.onPlaintext = { clientReceiver.receive($0) }
            connection.onWritable = { sender.pump() }
            connection.onClose = { clientEnd.fulfill($0) }
            sender.start()
            clientSent.fulfill(sender)
        }
        let client = try #require(try result?.get())
        let clientSender = try #require(await clientSent.wait())
        let serverSender = try #require(await serverSent.wait())

        let sentByClient = try #require(await clientSender.done.wait(seconds: 45))
        let sentByServer = try #require(await serverSender.done.wait(seconds: 45))
        let receivedByServer = try #require(await serverReceiver.done.wait(seconds: 45))
        let receivedByClient = try #require(await clientReceiver.done.wait(seconds: 45))
        #expect(sentByClient == receivedByServer)
        #expect(sentByServer == receivedByClient)
        #expect(sentByClient != sentByServer)
        #expect(await server.queue.onQueue { serverReceiver.received } == size)
        #expect(await client.queue.onQueue { clientReceiver.received } == size)

        let statistics = await client.queue.onQueue { client.statistics }
        // One send per flushed batch: large plaintext writes are not split into many submissions.
        #expect(statistics.sends <= size / BatchSource.batchSize + 2)
        #expect(statistics.bytesSent > size)
        client.queue.async { client.close() }
        #expect(await clientEnd.wait()?.reason == .closedLocally)
    }

    @Test(
        "a slow reader forces partial sends; nothing is lost or reordered",
        arguments: [TransportKind.uring, .socket]
    )
    func slowReader(transport: TransportKind) async throws {
        guard Transports.available(transport) else { return }
        let size = 24 * 1024 * 1024
        let receiver = StreamReceiver(expected: size)
        let server = try TestServer(transport: transport, tls: try TLSFixtures.server()) { result in
            guard case .success(let connection) = result else { return }
            var sincePause = 0
            var pauses = 0
            connection.onPlaintext = { buffer in
                receiver.receive(buffer)
                sincePause += buffer.readableBytes
                // Stall for 40 ms after every 2 MiB (at most 20 times) so the sender's socket buffer fills.
                if sincePause >= 2 * 1024 * 1024, pauses < 20 {
                    sincePause = 0
                    pauses += 1
                    connection.pauseReading()
                    connection.queue.asyncAfter(deadline: .now() + .milliseconds(40)) { connection.resumeReading() }
                }
            }
        }
        defer { server.stop() }

        var options = ConnectionOptions()
        options.sendBufferSize = 256 * 1024
        let sent = Waiter<StreamSender>()
        let (_, result) = try await connectClient(
            transport: transport,
            port: server.port,
            tls: try TLSFixtures.client(),
            options: options
        ) { connection in
            let sender = StreamSender(connection: connection, total: size, seed: 3)
            connection.onWritable = { sender.pump() }
            sender.start()
            sent.fulfill(sender)
        }
        let client = try #require(try result?.get())
        let sender = try #require(await sent.wait())
        let sentDigest = try #require(await sender.done.wait(seconds: 30))
        let receivedDigest = try #require(await receiver.done.wait(seconds: 30))
        #expect(sentDigest == receivedDigest)
        let statistics = await client.queue.onQueue { client.statistics }
        print("slow reader over \(transport): \(statistics)")
        #expect(statistics.partialSends > 0, "\(statistics)")
        client.queue.async { client.close() }
    }

    @Test(
        "a peer's reset is reported as a reset, its orderly close as a close",
        arguments: [TransportKind.uring, .socket]
    )
    func resetVersusClose(transport: TransportKind) async throws {
        guard Transports.available(transport) else { return }
        for abort in [true, false] {
            let server = try TestServer(transport: transport, tls: try TLSFixtures.server()) { result in
                guard case .success(let connection) = result else { return }
                // Answer the client's first bytes with a stream, then end mid-way: reset or close.
                connection.onPlaintext = { _ in
                    let chunk = ByteBuffer(repeating: 0x5A, count: 256 * 1024)
                    try? connection.write(chunk)
                    connection.queue.asyncAfter(deadline: .now() + .milliseconds(20)) {
                        if abort {
                            connection.abort()
                        } else {
                            connection.close()
                        }
                    }
                }
            }
            defer { server.stop() }
            let end = Waiter<ConnectionEnd>()
            let tls = try TLSFixtures.client()
            let (_, result) = try await connectClient(transport: transport, port: server.port, tls: tls) { connection in
                connection.onClose = { end.fulfill($0) }
                try? connection.write(ByteBuffer(string: "start"))
            }
            _ = try #require(try result?.get())
            let ending = try #require(await end.wait(seconds: 10))
            if abort {
                #expect(ending.reason == .reset, "\(ending)")
                #expect(ending.error?.code == .connectionReset)
            } else {
                #expect(ending.reason == .peerClosed, "\(ending)")
                #expect(ending.peerSentCloseNotify)
            }
        }
    }

    @Test("close finishes within its timeout when the peer stops reading", arguments: [TransportKind.uring, .socket])
    func closeWithStalledPeer(transport: TransportKind) async throws {
        guard Transports.available(transport) else { return }
        let server = try TestServer(transport: transport, tls: try TLSFixtures.server()) { result in
            // Read nothing, ever: the client's sends stall once the socket buffers are full.
            if case .success(let connection) = result {
                connection.pauseReading()
            }
        }
        defer { server.stop() }
        var options = ConnectionOptions()
        options.closeTimeout = .milliseconds(300)
        options.sendBufferSize = 64 * 1024
        let end = Waiter<ConnectionEnd>()
        let stalled = Waiter<Int>()
        let (_, result) = try await connectClient(
            transport: transport,
            port: server.port,
            tls: try TLSFixtures.client(),
            options: options
        ) { connection in
            connection.onClose = { end.fulfill($0) }
            let batch = ByteBuffer(repeating: 0x42, count: 64 * 1024)
            // Bounded: 32 MiB at most, far more than the socket buffers hold.
            for _ in 0..<512 {
                try? connection.write(batch)
            }
            stalled.fulfill(connection.queuedBytes)
        }
        let connection = try #require(try result?.get())
        #expect(try #require(await stalled.wait()) > 0)
        let started = ContinuousClock.now
        connection.queue.async { connection.close() }
        let ending = try #require(await end.wait(seconds: 10))
        #expect(ending.reason == .closedLocally, "\(ending)")
        #expect(ContinuousClock.now - started < .seconds(3))
    }

    @Test("aborting from inside onPlaintext stops delivery at once", arguments: [TransportKind.uring, .socket])
    func abortFromCallback(transport: TransportKind) async throws {
        guard Transports.available(transport) else { return }
        let server = try TestServer(transport: transport, tls: try TLSFixtures.server()) { result in
            guard case .success(let connection) = result else { return }
            connection.onPlaintext = { _ in
                // 4 MiB in 16 writes: far more than one delivery.
                let chunk = ByteBuffer(repeating: 0x61, count: 256 * 1024)
                for _ in 0..<16 {
                    try? connection.write(chunk)
                }
            }
        }
        defer { server.stop() }
        let end = Waiter<(ConnectionEnd, Int)>()
        let (_, result) = try await connectClient(
            transport: transport,
            port: server.port,
            tls: try TLSFixtures.client()
        ) {
            connection in
            var deliveries = 0
            connection.onPlaintext = { _ in
                deliveries += 1
                connection.abort()
            }
            connection.onClose = { end.fulfill(($0, deliveries)) }
            try? connection.write(ByteBuffer(string: "go"))
        }
        _ = try #require(try result?.get())
        let (ending, deliveries) = try #require(await end.wait(seconds: 10))
        #expect(ending.reason == .closedLocally, "\(ending)")
        #expect(deliveries == 1)
    }

    @Test("EOF without close_notify is a peer close, not a reset", arguments: [TransportKind.uring, .socket])
    func eofWithoutCloseNotify(transport: TransportKind) async throws {
        guard Transports.available(transport) else { return }
        let server = try TestServer(transport: transport, tls: try TLSFixtures.server()) { result in
            if case .success(let connection) = result {
                connection.onPlaintext = { try? connection.write($0) }
            }
        }
        defer { server.stop() }
        let proxy = try TCPProxy(forwardingTo: server.port)
        let echoed = Waiter<Void>()
        let end = Waiter<ConnectionEnd>()
        let (_, result) = try await connectClient(transport: transport, port: proxy.port, tls: try TLSFixtures.client())
        {
            connection in
            connection.onPlaintext = { _ in echoed.fulfill(()) }
            connection.onClose = { end.fulfill($0) }
            try? connection.write(ByteBuffer(string: "ping"))
        }
        _ = try #require(try result?.get())
        #expect(await echoed.wait() != nil)
        proxy.cutClientSide()
        let ending = try #require(await end.wait(seconds: 10))
        #expect(ending.reason == .peerClosed, "\(ending)")
        #expect(!ending.peerSentCloseNotify)
        #expect(ending.error == nil)
        // The proxy's thread ends within its lifetime whatever happened; a test that got this far waits for it.
        await proxy.wait()
    }
}
