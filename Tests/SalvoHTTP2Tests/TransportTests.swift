import APNSWire
import Crypto
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import SalvoRows
import SalvoTestSupport
import SalvoTestTraits
import Testing

@testable import SalvoHTTP2

/// The client's transports for testing servers: cleartext HTTP/2 with prior knowledge (loopback only), and TLS
/// without an ALPN offer.
@Suite(.tags(.network), .runs(.network), .serialized, .timeLimit(.minutes(1))) struct TransportTests {
    static func providerToken() throws -> APNSAuthentication {
        let signer = try JWTSigner(privateKey: P256.Signing.PrivateKey(), keyID: "ABC123DEFG", teamID: "DEF123GHIJ")
        return .token(try ProviderToken(signer: signer))
    }

    @Test func cleartextModeSpeaksHTTP2WithPriorKnowledgeToALoopbackServer() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try TokenFile(count: 150, seed: 31, in: folder)
        let ledger = ServerLedger()
        let schemes = NIOLockedValueBox<[String: Int]>([:])
        var options = HTTP2LoopbackServer.Options()
        options.cleartext = true
        let server = try await startServer(mutualTLS: false, options: options) { request in
            _ = ledger.request(request)
            schemes.withLockedValue { $0[request.header(":scheme") ?? "", default: 0] += 1 }
            ledger.delivered(request)
            return .ok(apnsID: newAPNSID())
        }
        var configuration = jobConfigurationForTests(
            port: server.port,
            authentication: try Self.providerToken(),
            connections: 2
        )
        configuration.client.cleartext = true
        let result = try await HTTP2Job.run(configuration: configuration, source: file.source, summary: file.summary)
        await server.stop()

        #expect(result.stopped == nil, "\(result.connectionErrors)")
        #expect(result.report.confirmed == 150)
        let snapshot = ledger.snapshot
        #expect(snapshot.delivered.count == 150)
        #expect(snapshot.delivered.values.allSatisfy { $0 == 1 })
        #expect(schemes.withLockedValue { $0 } == ["http": 150])
        #expect(server.connectionCount == 2)
        #expect(server.alpnH2ConnectionCount == 0)
    }

    @Test func cleartextModeIsRefusedUnlessTheHostIsALoopbackAddress() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try TokenFile(count: 1, seed: 32, in: folder)
        let token = try Self.providerToken()
        for host in ["192.0.2.10", "api.push.apple.com", "localhost", "128.0.0.1", "::2", "::ffff:10.0.0.1"] {
            var configuration = jobConfigurationForTests(port: 2197, authentication: token)
            configuration.client.host = host
            configuration.client.cleartext = true
            let error = await #expect(throws: HTTP2ClientError.self, "\(host)") {
                try await HTTP2Job.run(configuration: configuration, source: file.source, summary: file.summary)
            }
            #expect(error?.code == .configuration)
            #expect(error?.message.contains("loopback") == true, "\(error?.message ?? "")")
            // The same host over TLS is a valid configuration.
            configuration.client.cleartext = false
            #expect(throws: Never.self) { try configuration.client.validate() }
        }
        for host in ["127.0.0.1", "127.45.6.7", "127.255.255.255", "::1"] {
            var client = HTTP2ClientConfiguration(host: host, port: 2197, authentication: token)
            client.cleartext = true
            #expect(throws: Never.self, "\(host)") { try client.validate() }
        }
        // A client certificate needs TLS.
        var client = HTTP2ClientConfiguration(host: "127.0.0.1", port: 2197, authentication: clientCertificate)
        client.cleartext = true
        let error = #expect(throws: HTTP2ClientError.self) { try client.validate() }
        #expect(error?.code == .configuration)
        #expect(error?.message.contains("certificate") == true)
    }

    @Test func withoutAnALPNOfferTheClientSpeaksHTTP2OverTLSAllTheSame() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try TokenFile(count: 100, seed: 33, in: folder)
        for offersALPN in [false, true] {
            let ledger = ServerLedger()
            let server = try await startServer { request in
                _ = ledger.request(request)
                ledger.delivered(request)
                return .ok(apnsID: newAPNSID())
            }
            var configuration = jobConfigurationForTests(
                port: server.port,
                authentication: clientCertificate,
                connections: 2
            )
            configuration.client.offersALPN = offersALPN
            let source = TokenSource(files: file.source.files)
            let result = try await HTTP2Job.run(
                configuration: configuration,
                source: source,
                summary: try source.validate()
            )
            await server.stop()

            #expect(result.stopped == nil, "\(result.connectionErrors)")
            #expect(result.report.confirmed == 100)
            #expect(result.report.reconnects == 0)
            #expect(ledger.snapshot.delivered.count == 100)
            #expect(ledger.snapshot.delivered.values.allSatisfy { $0 == 1 })
            #expect(server.connectionCount == 2)
            // The server chose `h2` with ALPN only when the client offered it.
            #expect(server.alpnH2ConnectionCount == (offersALPN ? 2 : 0))
        }
    }
}

@Suite(.tags(.pure), .runs(.pure)) struct WriteCoalescingTests {
    @Test func writesBetweenFlushesLeaveAsOneBufferInOrderAndTheirPromisesCompleteWithIt() throws {
        let channel = EmbeddedChannel(handler: WriteCoalescingHandler())
        defer { _ = try? channel.finish() }
        let completed = NIOLockedValueBox<[Int]>([])
        for round in 0..<2 {
            for (index, text) in ["HEADERS", "", "DATA-HEADER", "payload"].enumerated() {
                let promise = channel.eventLoop.makePromise(of: Void.self)
                promise.futureResult.whenSuccess { completed.withLockedValue { $0.append(10 * round + index) } }
                channel.write(IOData.byteBuffer(ByteBuffer(string: "\(text)|")), promise: promise)
            }
            // Nothing leaves before the flush.
            #expect(try channel.readOutbound(as: IOData.self) == nil)
            #expect(completed.withLockedValue { $0.count } == 4 * round)
            channel.flush()
            let out = try #require(try channel.readOutbound(as: IOData.self))
            guard case .byteBuffer(let bytes) = out else {
                Issue.record("expected a byte buffer, got \(out)")
                return
            }
            #expect(String(buffer: bytes) == "HEADERS||DATA-HEADER|payload|")
            #expect(try channel.readOutbound(as: IOData.self) == nil)
            #expect(
                completed.withLockedValue { $0.sorted() } == (0...round).flatMap { r in (0..<4).map { 10 * r + $0 } }
            )
        }
    }
}

/// A gated job's connection asks its gate at every flush whether anything may still leave: while it may, the writes
/// since the last flush leave in order; once nothing may, they are dropped, later writes fail and the connection
/// closes (the frames of rows taken before a stall never leave after it).
@Suite(.tags(.pure), .runs(.pure)) struct WriteFenceTests {
    final class SwitchGate: HTTP2WriteGate {
        let closed = NIOLockedValueBox(false)
        let asked = NIOLockedValueBox(0)

        func withheld(_ lines: [Int]) -> Set<Int> { [] }

        func forbidsEveryWrite() -> Bool {
            self.asked.withLockedValue { $0 += 1 }
            return self.closed.withLockedValue { $0 }
        }
    }

    @Test func writesLeaveAtAFlushWhileTheGateAllowsAndNeverOnceItForbids() throws {
        let gate = SwitchGate()
        let channel = EmbeddedChannel(handler: WriteFenceHandler(gate: gate))
        defer { _ = try? channel.finish() }
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        for text in ["HEADERS", "DATA"] { channel.write(IOData.byteBuffer(ByteBuffer(string: text)), promise: nil) }
        // Held until the flush, then asked once and let go in order.
        #expect(try channel.readOutbound(as: IOData.self) == nil)
        channel.flush()
        #expect(gate.asked.withLockedValue { $0 } == 1)
        #expect(try channel.readOutbound(as: IOData.self) == .byteBuffer(ByteBuffer(string: "HEADERS")))
        #expect(try channel.readOutbound(as: IOData.self) == .byteBuffer(ByteBuffer(string: "DATA")))

        // Frames written before a stall, flushed after it: the gate forbids, nothing leaves, the connection closes.
        let held = channel.eventLoop.makePromise(of: Void.self)
        channel.write(IOData.byteBuffer(ByteBuffer(string: "late DATA")), promise: held)
        gate.closed.withLockedValue { $0 = true }
        channel.flush()
        #expect(try channel.readOutbound(as: IOData.self) == nil)
        #expect(throws: ChannelError.self) { try held.futureResult.wait() }
        #expect(!channel.isActive)
        let after = channel.eventLoop.makePromise(of: Void.self)
        channel.write(IOData.byteBuffer(ByteBuffer(string: "more")), promise: after)
        channel.flush()
        #expect(throws: (any Error).self) { try after.futureResult.wait() }
        #expect(try channel.readOutbound(as: IOData.self) == nil)
    }
}
