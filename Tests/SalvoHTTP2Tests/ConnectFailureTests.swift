import Foundation
import NIOSSL
import SalvoRows
import SalvoTestSupport
import SalvoTestTraits
import Testing

@testable import SalvoHTTP2

/// Failures that retrying cannot heal, before any connection worked, stop the job at once with the cause: over
/// real sockets and TLS.
@Suite(.tags(.network), .runs(.network)) struct ConnectFailureTests {
    private func run(
        _ configuration: HTTP2JobConfiguration,
        rows: Int = 20,
        seed: UInt64
    ) async throws -> HTTP2JobResult {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try TokenFile(count: rows, seed: seed, in: folder)
        return try await HTTP2Job.run(configuration: configuration, source: file.source, summary: file.summary)
    }

    private func expectStoppedAtOnce(_ result: HTTP2JobResult, saying cause: String, rows: Int = 20) {
        let message = result.stopped?.message ?? "not stopped"
        #expect(message.contains(cause), "\(message)")
        #expect(message.contains("stopped rather than retry"), "\(message)")
        #expect(result.report.reconnects == 0, "not retried: \(result.connectionErrors)")
        #expect(result.notSent == rows)
        #expect(result.unsettledRows.count == rows)
    }

    @Test func nothingListening() async throws {
        // Bound and never listened on, held through the job: a port a stopped server freed can be another test's
        // server by the time of the connect.
        let closed = try ClosedPort()
        defer { closed.close() }
        let result = try await self.run(
            jobConfigurationForTests(port: closed.port, authentication: clientCertificate),
            seed: 41
        )
        self.expectStoppedAtOnce(result, saying: "connection refused")
    }

    @Test func aNameThatDoesNotResolve() async throws {
        var configuration = jobConfigurationForTests(port: 443, authentication: clientCertificate)
        configuration.client.host = "salvo-no-such-host.invalid"
        let result = try await self.run(configuration, seed: 42)
        self.expectStoppedAtOnce(result, saying: "does not resolve")
    }

    @Test func aPeerThatSpeaksPlainHTTP() async throws {
        let listener = try PlainTextListener(answer: "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        defer { listener.stop() }
        let result = try await self.run(
            jobConfigurationForTests(port: listener.port, authentication: clientCertificate),
            seed: 43
        )
        self.expectStoppedAtOnce(result, saying: "TLS handshake failed")
    }

    @Test func aServerCertificateOfAnotherCA() async throws {
        let server = try await startServer { _ in .ok(apnsID: nil) }
        let other = try CertificateFactory(authorityName: "Another CA")
        let result = try await self.run(
            jobConfigurationForTests(
                port: server.port,
                authentication: clientCertificate,
                trustRoots: other.trustRoots
            ),
            seed: 44
        )
        await server.stop()
        self.expectStoppedAtOnce(result, saying: "TLS handshake failed")
    }

    @Test func anExpiredClientCertificate() async throws {
        let server = try await startServer { _ in .ok(apnsID: nil) }
        let expired = try CertificateFactory.shared.client(topic: testTopic, expired: true)
        let result = try await self.run(
            jobConfigurationForTests(
                port: server.port,
                authentication: .certificate(chain: [expired.certificate], key: expired.key)
            ),
            seed: 45
        )
        let requests = server.requestCount
        await server.stop()
        self.expectStoppedAtOnce(result, saying: "TLS handshake failed")
        #expect(requests == 0)
    }

    @Test func aServerNameTheCertificateDoesNotNameIsRefusedEvenWhenItNamesTheAddress() async throws {
        let server = try await startServer { _ in .ok(apnsID: nil) }
        // The test server's certificate names localhost and 127.0.0.1; the job connects to 127.0.0.1.
        var configuration = jobConfigurationForTests(port: server.port, authentication: clientCertificate)
        configuration.client.serverName = "evil.example"
        let refused = try await self.run(configuration, seed: 46)
        var named = jobConfigurationForTests(port: server.port, authentication: clientCertificate)
        named.client.serverName = "LOCALHOST"
        let accepted = try await self.run(named, seed: 47)
        let requests = server.requestCount
        await server.stop()
        self.expectStoppedAtOnce(refused, saying: "does not name evil.example")
        #expect(accepted.stopped == nil)
        #expect(accepted.report.confirmed == 20)
        #expect(requests == 20, "only the job whose name the certificate holds sent anything")
    }
}
