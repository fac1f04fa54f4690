import Foundation
import NIOCore
import NIOHTTP1
import SalvoSimulator

/// `salvo simulate --control-port`: lets another process judge a running simulator, as `salvo soak --gateway`
/// does between its rounds (a `LocalHTTPServer`):
///
/// - `GET /plan`: the fault plan (JSON);
/// - `GET /ledger`: the ledger's counters (`LedgerSnapshot`, JSON);
/// - `GET /live-activities`: what devices show of the Live Activity pushes (`LiveActivityView`, JSON);
/// - `POST /reset`: a new, empty ledger and no Live Activities (204);
/// - `POST /verdict` with the expected tokens as the body (one hex token per line, or CSV with a `token` column):
///   the `Verdict` (JSON).
///
/// It can empty the ledger (and so fake a verdict) and read every token, so it listens on 127.0.0.1 unless told
/// otherwise, and every request must carry `Authorization: Bearer <token>` with the endpoint's token
/// (`ControlToken`): one without it, or with another, is answered 401 and does nothing (its body is not even read).
public final class SimulatorControlEndpoint: Sendable {
    private let server: LocalHTTPServer

    public var port: Int { self.server.port }

    /// The most a `POST /verdict` body may hold: 4 M tokens of 65 bytes, about.
    public static let maximumBody = 256 << 20

    private init(server: LocalHTTPServer) {
        self.server = server
    }

    /// Serves `simulator` on `host:port` (0: a free port), to requests that carry `token`.
    public static func start(
        simulator: Simulator,
        host: String = "127.0.0.1",
        port: Int,
        token: ControlToken
    ) async throws
        -> SimulatorControlEndpoint
    {
        let server = try await LocalHTTPServer.start(
            host: host,
            port: port,
            maximumBody: Self.maximumBody,
            admit: { head in
                if token.admits(authorization: head.headers["authorization"]) { return nil }
                return LocalHTTPServer.Response(
                    status: .unauthorized,
                    text: "a bearer token is needed: Authorization: Bearer <the simulator's control token>\n",
                    headers: [("WWW-Authenticate", #"Bearer realm="salvo simulate""#)]
                )
            },
            route: { method, uri, body in Self.answer(simulator, method: method, uri: uri, body: body) }
        )
        return SimulatorControlEndpoint(server: server)
    }

    public func stop() async {
        await self.server.stop()
    }

    private static func answer(
        _ simulator: Simulator,
        method: HTTPMethod,
        uri: String,
        body: ByteBuffer?
    ) -> LocalHTTPServer.Response {
        func json(_ value: some Encodable) -> LocalHTTPServer.Response {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            guard let data = try? encoder.encode(value) else {
                return LocalHTTPServer.Response(status: .internalServerError, text: "cannot encode\n")
            }
            return LocalHTTPServer.Response(status: .ok, contentType: "application/json", body: Array(data))
        }
        switch (method, uri) {
        case (.GET, "/plan"):
            return json(simulator.plan)
        case (.GET, "/ledger"):
            return json(simulator.ledger.snapshot())
        case (.GET, "/live-activities"):
            return json(simulator.liveActivities.view)
        case (.POST, "/reset"):
            simulator.ledger.reset()
            simulator.liveActivities.reset()
            return LocalHTTPServer.Response(status: .noContent, body: [])
        case (.POST, "/verdict"):
            guard let body else {
                return LocalHTTPServer.Response(
                    status: .payloadTooLarge,
                    text: "at most \(Self.maximumBody) bytes of tokens\n"
                )
            }
            let expected = body.withUnsafeReadableBytes { ExpectedTokens(csv: $0) }
            return json(simulator.verdict(expected: expected))
        default:
            return LocalHTTPServer.Response(
                status: .notFound,
                text: "GET /plan, GET /ledger, GET /live-activities, POST /reset, POST /verdict\n"
            )
        }
    }
}
