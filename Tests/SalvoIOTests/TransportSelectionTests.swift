import Dispatch
import Foundation
import NIOCore
import SalvoIO
import SalvoTestTraits
import Testing

@Suite("Choosing a transport", .tags(.network), .runs(.network))
struct TransportSelectionTests {
    @Test("a transport named by the caller, or the probe, decides the transport")
    func selection() async throws {
        #expect(try TransportKind.select(requested: nil, uringRefusal: nil) == .uring)
        #expect(try TransportKind.select(requested: nil, uringRefusal: "EPERM") == .socket)
        #expect(try TransportKind.select(requested: "socket", uringRefusal: nil) == .socket)
        #expect(try TransportKind.select(requested: "uring", uringRefusal: nil) == .uring)
        #expect(throws: SalvoIOError.self) { try TransportKind.select(requested: "uring", uringRefusal: "EPERM") }
        #expect(throws: SalvoIOError.self) { try TransportKind.select(requested: "carrier-pigeon", uringRefusal: nil) }
        #expect(try TransportKind.select(requested: "auto", uringRefusal: nil) == .uring)
        #expect(TransportKind(named: "io_uring") == .uring && TransportKind(named: "Socket") == .socket)
        #expect(TransportKind(named: "auto") == nil)
    }

    @Test("the forced fallback, chosen by name, carries a TLS conversation")
    func forcedFallbackWorks() async throws {
        let forced = try TransportKind.select(requested: "socket", uringRefusal: TransportKind.uringRefusal)
        let context = try IOContext(queue: DispatchQueue(label: "test.forced"), transport: forced)
        #expect(context.transport == .socket)

        let server = try TestServer(transport: .socket, tls: try TLSFixtures.server()) { result in
            if case .success(let connection) = result {
                connection.onPlaintext = { try? connection.write($0) }
            }
        }
        defer { server.stop() }
        let echoed = Waiter<String>()
        let connected = Waiter<Result<TLSConnection, SalvoIOError>>()
        context.queue.async {
            TLSConnection.connect(
                host: "127.0.0.1",
                port: server.port,
                tls: try! TLSFixtures.client(),
                context: context
            ) { result in
                if case .success(let connection) = result {
                    connection.onPlaintext = { echoed.fulfill(String(buffer: $0)) }
                    try? connection.write(ByteBuffer(string: "over the fallback"))
                }
                connected.fulfill(result)
            }
        }
        let connection = try #require(try await connected.wait()?.get())
        #expect(connection.transportKind == .socket)
        #expect(await echoed.wait() == "over the fallback")
        connection.queue.async { connection.close() }
    }

    @Test("the probe's answer is consistent with setting up a ring")
    func probe() async throws {
        // No transport named: the probe decides (SalvoIO reads no environment variable).
        let probed = try IOContext(queue: DispatchQueue(label: "test.probed"))
        #expect(probed.transport == TransportKind.probed)
        #expect(probed.transport == (TransportKind.uringRefusal == nil ? .uring : .socket))
        if let refusal = TransportKind.uringRefusal {
            print("io_uring refused: \(refusal)")
            #expect(throws: SalvoIOError.self) {
                _ = try IOContext(queue: DispatchQueue(label: "test.probe"), transport: .uring)
            }
        } else {
            let context = try IOContext(queue: DispatchQueue(label: "test.probe"), transport: .uring)
            #expect(context.transport == .uring)
        }
    }
}
