import SalvoBroadcast
import SalvoHTTP2
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// A channel management call has one bound for the whole of it, its retries and their pauses included (`--timeout`
/// from the command line), as a send has `--give-up-seconds`: a list whose answer never comes is given up once the
/// bound has passed, not after the retry policy's eight timed-out requests (122 s from the command line before).
@Suite(.tags(.network), .runs(.network), .takesATurn) struct ChannelClientBoundTests {
    @Test func aCallWhoseAnswerNeverComesIsGivenUpAtItsBound() async throws {
        let identity = CertificateFactory.shared
        let server = try await HostileHTTP2Server(
            behaviour: .neverAnswer,
            certificateChain: [identity.server.certificate],
            privateKey: identity.server.key
        )
        let client = try identity.client(topic: BroadcastService.app)
        var endpoint = HTTP2Endpoint(
            host: "127.0.0.1",
            port: server.port,
            serverName: "localhost",
            authentication: .certificate(chain: [try client.certificate], key: try client.key)
        )
        endpoint.trustRoots = identity.trustRoots
        endpoint.requestTimeout = .seconds(1)
        var channels = ChannelClient(
            exchanger: try await HTTP2Exchanger.connect(endpoint),
            bundleID: BroadcastService.app
        )
        channels.giveUp = .seconds(1)
        let listed = await channels.list()
        await channels.exchanger.close()
        await server.stop()
        guard case .failure(let failure) = listed else {
            Issue.record("a list with no answer succeeded")
            return
        }
        #expect(failure.reason.contains("gave up after 1 attempts in 1 s"), "\(failure)")
        #expect(server.requestCount == 1, "one request within the bound, not the retry policy's eight")
    }
}
