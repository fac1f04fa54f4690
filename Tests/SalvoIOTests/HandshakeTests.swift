import Dispatch
import Glibc
import NIOCore
import SalvoIO
import SalvoTestSupport
import SalvoTestTraits
import Testing

@Suite("TLS handshakes over both transports", .tags(.network), .runs(.network))
struct HandshakeTests {
    @Test(
        "mutual TLS handshake succeeds, data flows both ways, close is orderly",
        arguments: [TransportKind.uring, .socket]
    )
    func mutualHandshake(transport: TransportKind) async throws {
        guard Transports.available(transport) else { return }
        let serverSide = Waiter<(String?, String, String)>()
        let serverEnd = Waiter<ConnectionEnd>()
        let server = try TestServer(transport: transport, tls: try TLSFixtures.server()) { result in
            guard case .success(let connection) = result else {
                serverSide.fulfill((nil, "", "failed: \(result)"))
                return
            }
            connection.onPlaintext = { buffer in
                // Echo, upper-cased so the client can tell it came back through the server.
                let text = String(buffer: buffer).uppercased()
                try? connection.write(ByteBuffer(string: text))
            }
            connection.onClose = { serverEnd.fulfill($0) }
            serverSide.fulfill((connection.peerSubjectUID, connection.protocolVersion, connection.peerSubject ?? ""))
        }
        defer { server.stop() }

        let echoed = Waiter<String>()
        let clientEnd = Waiter<ConnectionEnd>()
        let (_, result) = try await connectClient(
            transport: transport,
            port: server.port,
            tls: try TLSFixtures.client()
        ) {
            connection in
            connection.onPlaintext = { echoed.fulfill(String(buffer: $0)) }
            connection.onClose = { clientEnd.fulfill($0) }
            try? connection.write(ByteBuffer(string: "hello gateway"))
        }
        let client = try #require(try result?.get())
        #expect(client.transportKind == transport)

        let (uid, version, subject) = try #require(await serverSide.wait())
        #expect(uid == CertificateFactory.sharedTopic)
        #expect(version == "TLSv1.3")
        #expect(subject.contains("Apple Push Services"))
        #expect(await echoed.wait() == "HELLO GATEWAY")

        client.queue.async { client.close() }
        let end = try #require(await clientEnd.wait())
        #expect(end.reason == .closedLocally)
        let peerEnd = try #require(await serverEnd.wait())
        #expect(peerEnd.reason == .peerClosed)
        #expect(peerEnd.peerSentCloseNotify)
    }

    @Test("a client without a certificate is refused on both sides", arguments: [TransportKind.uring, .socket])
    func missingClientCertificate(transport: TransportKind) async throws {
        guard Transports.available(transport) else { return }
        try await expectRefused(
            transport: transport,
            client: try TLSFixtures.client(certificate: nil, key: nil),
            serverCode: .peerCertificateMissing
        )
    }

    @Test("a client certificate from another CA is refused on both sides", arguments: [TransportKind.uring, .socket])
    func foreignClientCertificate(transport: TransportKind) async throws {
        guard Transports.available(transport) else { return }
        let c = TLSFixtures.certificates
        try await expectRefused(
            transport: transport,
            client: try TLSFixtures.client(certificate: c.foreignClient, key: c.foreignClientKey),
            serverCode: .unknownCA
        )
    }

    @Test("over TLS 1.2 a refused client certificate fails connect itself", arguments: [TransportKind.uring, .socket])
    func refusedOverTLS12(transport: TransportKind) async throws {
        guard Transports.available(transport) else { return }
        let c = TLSFixtures.certificates
        var configuration = TLSConfiguration.client(
            credentials: .pem(certificateChainFile: c.foreignClient, privateKeyFile: c.foreignClientKey),
            trustedCAFile: c.ca
        )
        configuration.maximumVersion = "TLS1.2"
        let server = try TestServer(transport: transport, tls: try TLSFixtures.server()) { _ in }
        defer { server.stop() }
        let (_, result) = try await connectClient(
            transport: transport,
            port: server.port,
            tls: try TLSContext(configuration: configuration)
        )
        guard case .failure(let error) = try #require(result) else {
            Issue.record("a TLS 1.2 handshake with an untrusted client certificate succeeded")
            return
        }
        #expect(error.code == .handshakeRefused, "\(error)")
    }

    /// TLS 1.3 finishes the client's handshake before the server checks the client certificate, so the
    /// client learns of the refusal either from `connect` or as the first event after it.
    private func expectRefused(
        transport: TransportKind,
        client tls: TLSContext,
        serverCode: SalvoIOError.Code
    ) async throws {
        let serverError = Waiter<SalvoIOError>()
        let server = try TestServer(transport: transport, tls: try TLSFixtures.server()) { result in
            if case .failure(let error) = result {
                serverError.fulfill(error)
            }
        }
        defer { server.stop() }
        let clientEnd = Waiter<ConnectionEnd>()
        let (_, result) = try await connectClient(transport: transport, port: server.port, tls: tls) { connection in
            connection.onClose = { clientEnd.fulfill($0) }
        }
        let clientError: SalvoIOError?
        switch try #require(result) {
        case .failure(let error): clientError = error
        case .success: clientError = await clientEnd.wait()?.error
        }
        #expect(clientError?.code == .handshakeRefused, "client saw \(String(describing: clientError))")
        let error = try #require(await serverError.wait())
        #expect(error.code == serverCode, "server saw \(error)")
        #expect(!error.message.isEmpty)
    }

    @Test("PKCS#12 and passphrase-protected PEM credentials complete a mutual handshake")
    func otherCredentialForms() async throws {
        let uids = Waiter<[String]>()
        var seen: [String] = []
        let server = try TestServer(transport: .socket, tls: try TLSFixtures.server()) { result in
            if case .success(let connection) = result {
                seen.append(connection.peerSubjectUID ?? "none")
                if seen.count == 2 {
                    uids.fulfill(seen)
                }
                connection.onPlaintext = { try? connection.write($0) }
            }
        }
        defer { server.stop() }
        let c = TLSFixtures.certificates
        let forms: [TLSCredentials] = [
            .pkcs12(file: c.clientPKCS12, passphrase: CertificateFactory.pkcs12Passphrase),
            .pem(
                certificateChainFile: c.client,
                privateKeyFile: c.encryptedClientKey,
                passphrase: CertificateFactory.keyPassphrase
            ),
        ]
        for credentials in forms {
            let tls = try TLSContext(configuration: .client(credentials: credentials, trustedCAFile: c.ca))
            let echoed = Waiter<Void>()
            let (_, result) = try await connectClient(transport: .socket, port: server.port, tls: tls) { connection in
                // The echo proves the server accepted the certificate (TLS 1.3 checks it after `connect`).
                connection.onPlaintext = { _ in echoed.fulfill(()) }
                try? connection.write(ByteBuffer(string: "hi"))
            }
            let connection = try #require(try result?.get())
            #expect(await echoed.wait() != nil)
            connection.queue.async { connection.close() }
        }
        #expect(await uids.wait() == [CertificateFactory.sharedTopic, CertificateFactory.sharedTopic])
    }

    @Test("IPv6 loopback works and the certificate's IP address is checked", arguments: [TransportKind.uring, .socket])
    func ipv6Loopback(transport: TransportKind) async throws {
        guard Transports.available(transport) else { return }
        let server = try TestServer(transport: transport, tls: try TLSFixtures.server(), host: "::1") { result in
            if case .success(let connection) = result {
                connection.onPlaintext = { try? connection.write($0) }
            }
        }
        defer { server.stop() }
        let echoed = Waiter<String>()
        let (_, result) = try await connectClient(
            transport: transport,
            host: "::1",
            port: server.port,
            tls: try TLSFixtures.client()
        ) { connection in
            connection.onPlaintext = { echoed.fulfill(String(buffer: $0)) }
            try? connection.write(ByteBuffer(string: "over ::1"))
        }
        let connection = try #require(try result?.get())
        #expect(await echoed.wait() == "over ::1")
        connection.queue.async { connection.close() }
    }

    @Test("a host name is resolved off the queue (localhost, from /etc/hosts)")
    func hostName() async throws {
        let server = try TestServer(transport: .socket, tls: try TLSFixtures.server()) { _ in }
        defer { server.stop() }
        let (_, result) = try await connectClient(
            transport: .socket,
            host: "localhost",
            port: server.port,
            tls: try TLSFixtures.client(),
            serverName: "127.0.0.1"
        )
        let connection = try #require(try result?.get())
        connection.queue.async { connection.close() }
    }

    @Test("the client refuses a server its CA file does not trust")
    func untrustedServer() async throws {
        let server = try TestServer(transport: .socket, tls: try TLSFixtures.server()) { _ in }
        defer { server.stop() }
        let tls = try TLSFixtures.client(trusting: TLSFixtures.certificates.foreignCA)
        let (_, result) = try await connectClient(transport: .socket, port: server.port, tls: tls)
        guard case .failure(let error) = try #require(result) else {
            Issue.record("an untrusted server was accepted")
            return
        }
        #expect(error.code == .unknownCA, "\(error)")
        #expect(error.message.contains("CA"))
    }

    @Test("the client refuses a certificate that does not name the host it expects")
    func hostnameMismatch() async throws {
        let server = try TestServer(transport: .socket, tls: try TLSFixtures.server()) { _ in }
        defer { server.stop() }
        let (_, result) = try await connectClient(
            transport: .socket,
            port: server.port,
            tls: try TLSFixtures.client(),
            serverName: "gateway.push.apple.com"
        )
        guard case .failure(let error) = try #require(result) else {
            Issue.record("a certificate for another host was accepted")
            return
        }
        #expect(error.code == .hostnameMismatch, "\(error)")
    }

    @Test("a reconnect resumes the cached TLS session")
    func sessionResumption() async throws {
        let server = try TestServer(transport: .socket, tls: try TLSFixtures.server()) { result in
            if case .success(let connection) = result {
                connection.onPlaintext = { try? connection.write($0) }
            }
        }
        defer { server.stop() }
        let tls = try TLSFixtures.client()
        var reused: [Bool] = []
        for attempt in 0..<3 {
            if attempt == 2 {
                // A forgotten session makes the next handshake a full one.
                tls.forgetSession(forHost: "127.0.0.1", port: server.port)
            }
            let echoed = Waiter<Void>()
            let closed = Waiter<Void>()
            let (_, result) = try await connectClient(transport: .socket, port: server.port, tls: tls) { connection in
                connection.onPlaintext = { _ in echoed.fulfill(()) }
                connection.onClose = { _ in closed.fulfill(()) }
                try? connection.write(ByteBuffer(string: "ping"))
            }
            let connection = try #require(try result?.get())
            // The echo comes after the server's session tickets, so the session is cached by now.
            #expect(await echoed.wait() != nil)
            reused.append(await connection.queue.onQueue { connection.isSessionReused })
            connection.queue.async { connection.close() }
            #expect(await closed.wait() != nil)
        }
        #expect(reused == [false, true, false])
    }

    @Test("connecting to a closed port reports connection refused")
    func connectionRefused() async throws {
        // A socket bound but not listening holds a port on which every connect is refused.
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        try #require(bound)
        let port = Int(UInt16(bigEndian: address.sin_port))
        let (_, result) = try await connectClient(transport: .socket, port: port, tls: try TLSFixtures.client())
        guard case .failure(let error) = try #require(result) else {
            Issue.record("connected to a closed port")
            return
        }
        #expect(error.code == .connectionRefused, "\(error)")
    }

    @Test("a peer that never answers the handshake times out", arguments: [TransportKind.uring, .socket])
    func silentPeer(transport: TransportKind) async throws {
        guard Transports.available(transport) else { return }
        // A listening socket nobody accepts on: the kernel completes TCP, no TLS ever comes back.
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let listening = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 && listen(fd, 4) == 0
            }
        }
        try #require(listening)
        var options = ConnectionOptions()
        options.handshakeTimeout = .milliseconds(300)
        let started = ContinuousClock.now
        let (_, result) = try await connectClient(
            transport: transport,
            port: Int(UInt16(bigEndian: address.sin_port)),
            tls: try TLSFixtures.client(),
            options: options
        )
        guard case .failure(let error) = try #require(result) else {
            Issue.record("a handshake with a silent peer succeeded")
            return
        }
        #expect(error.code == .timedOut, "\(error)")
        #expect(ContinuousClock.now - started < .seconds(5))
    }
}
