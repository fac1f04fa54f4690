import Dispatch
import Foundation
import NIOCore
import SalvoIO
import Testing

@Suite("Choosing a transport")
struct TransportSelectionTests {
    @Test("SALVO_TRANSPORT and the probe decide the transport")
    func selection() throws {
        #expect(try TransportKind.select(requested: nil, uringRefusal: nil) == .uring)
        #expect(try TransportKind.select(requested: nil, uringRefusal: "EPERM") == .socket)
        #expect(try TransportKind.select(requested: "socket", uringRefusal: nil) == .socket)
        #expect(try TransportKind.select(requested: "uring", uringRefusal: nil) == .uring)
        #expect(throws: SalvoIOError.self) { try TransportKind.select(requested: "uring", uringRefusal: "EPERM") }
        #expect(throws: SalvoIOError.self) { try TransportKind.select(requested: "carrier-pigeon", uringRefusal: nil) }
    }

    @Test("the forced fallback is chosen from the environment and carries a TLS conversation")
    func forcedFallbackWorks() throws {
        // Other tests always name their transport, so changing the variable here affects no one else. The
        // certificates are made first: making them spawns processes, which read the environment.
        _ = TLSFixtures.certificates
        setenv("SALVO_TRANSPORT", "socket", 1)
        let context = try IOContext(queue: DispatchQueue(label: "test.env"))
        unsetenv("SALVO_TRANSPORT")
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
        let connection = try #require(try connected.wait()?.get())
        #expect(connection.transportKind == .socket)
        #expect(echoed.wait() == "over the fallback")
        connection.queue.async { connection.close() }
    }

    @Test("the probe's answer is consistent with setting up a ring")
    func probe() throws {
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
