import SalvoBroadcast
import SalvoHTTP2
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// A channel management call has one bound for the whole of it, its retries and their pauses included (`--timeout`
/// from the command line), as a send has `--give-up-seconds`: a list whose answer never comes is given up once the
/// bound has passed, not after the retry policy's eight timed-out requests (122 s from the command line before).
@Suite(.tags(.network), .runs(.network)) struct ChannelClientBoundTests {
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

    /// The bound is measured on the client's clock, where the retries' pauses are waited too: a list refused every
    /// time (a refused stream: not processed, so sent again) is given up once its pauses have taken it past the bound,
    /// on a clock the pauses move (30 s of it here, no real time).
    @Test func aCallRefusedEveryTimeIsGivenUpOnceItsPausesPassTheBound() async throws {
        let identity = CertificateFactory.shared
        let server = try await HostileHTTP2Server(
            behaviour: .refuseEveryStream,
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
        var channels = ChannelClient(
            exchanger: try await HTTP2Exchanger.connect(endpoint),
            bundleID: BroadcastService.app
        )
        let clock = ManualJobClock(sleepsMoveIt: true)
        channels.clock = clock
        channels.giveUp = .seconds(30)
        channels.retry = HTTP2RetryPolicy(
            initialDelay: .seconds(1),
            maximumDelay: .seconds(4),
            maximumAttempts: 1000,
            maximumRetryAfter: .seconds(60)
        )
        let listed = await channels.list()
        await channels.exchanger.close()
        await server.stop()
        guard case .failure(let failure) = listed else {
            Issue.record("a list refused every time succeeded")
            return
        }
        #expect(failure.reason.contains("gave up after \(server.requestCount) attempts in 30 s"), "\(failure)")
        #expect(clock.elapsed >= .seconds(30), "not before the bound")
        #expect(clock.elapsed < .seconds(34), "no pause after it (each is under 4 s)")
        #expect(server.requestCount >= 8, "pauses of at most 4 s each, 30 s of them")
    }
}
