import APNSWire
import NIOCore
import NIOPosix
import NIOSSL
import SalvoBinary
import SalvoHTTP2
import SalvoRows
import SalvoTestSupport

/// Notifications per second from the HTTP/2 client to an always-200 server on loopback, over TLS: what the client
/// itself can do. The server is `HTTP2SinkServer` (frame headers only, no HPACK decoding) or the NIOHTTP2-based
/// `HTTP2LoopbackServer`, which costs about as much per request as the client.
public enum HTTP2Benchmark {
    /// Which always-200 server answers.
    public enum Server: String, Sendable, CaseIterable {
        case sink
        case nio
    }

    /// One measurement.
    public struct Row: Sendable {
        public var connections: Int
        /// Notifications answered 200.
        public var notifications: Int
        /// From the first connect to the last answer: the job's own time (the steady rate's), without its end.
        public var seconds: Double
        /// The whole job as a user's clock sees it: from before `HTTP2Job.run` starts (the TLS context, the first
        /// connects) to after it returns with every connection closed.
        public var wholeSeconds = 0.0
        /// From the last answer to `HTTP2Job.run`'s return, every connection closed.
        public var closingSeconds = 0.0
        /// From the job's start to the end of its first TLS handshake, and to the last first request of the
        /// connections it opened.
        public var firstHandshakeSeconds: Double?
        public var lastFirstRequestSeconds: Double?
        /// Whether every row was answered 200 exactly once (the server's count agrees with the report).
        public var allDelivered: Bool
        /// Connections the job opened (with `--connections auto`, what it chose).
        public var connectionsOpened = 0
        /// The shortest request-to-answer time the client measured, in milliseconds.
        public var roundTripMilliseconds: Double?
        /// CPU seconds of the client's event loop threads (the simulator's threads and the token file's read-ahead
        /// are not counted), and of the whole process.
        public var clientCPUSeconds = 0.0
        public var processCPUSeconds = 0.0
        /// The process's peak resident memory during the run, in MiB (client and an in-process server together).
        public var peakResidentMiB = 0.0
        /// Streams the server refused because they were opened above its announced limit (the simulator counts
        /// them; 0 for the other servers).
        public var refusedStreams = 0

        public init(connections: Int, notifications: Int, seconds: Double, allDelivered: Bool) {
            self.connections = connections
            self.notifications = notifications
            self.seconds = seconds
            self.allDelivered = allDelivered
        }

        public var rate: Double { self.seconds > 0 ? Double(self.notifications) / self.seconds : 0 }
        /// Notifications ÷ the whole job's time.
        public var wholeRate: Double { self.wholeSeconds > 0 ? Double(self.notifications) / self.wholeSeconds : 0 }
    }

    /// The server's identity and the roots that verify it, plus the name its certificate carries.
    public struct ServerIdentity: Sendable {
        public var certificateChain: [NIOSSLCertificate]
        public var privateKey: NIOSSLPrivateKey
        public var trustRoots: NIOSSLTrustRoots
        public var serverName: String

        public init(
            certificateChain: [NIOSSLCertificate],
            privateKey: NIOSSLPrivateKey,
            trustRoots: NIOSSLTrustRoots,
            serverName: String
        ) {
            self.certificateChain = certificateChain
            self.privateKey = privateKey
            self.trustRoots = trustRoots
            self.serverName = serverName
        }
    }

    /// A 100-byte payload, as the binary benchmarks use.
    public static let payloadJSON =
        #"{"aps":{"alert":"Benchmark notification","badge":1,"sound":"default"},"campaign":"c-0001","p":"xxx"}"#

    /// A payload template with two placeholders that renders to about `payloadJSON`'s size, from the columns
    /// `templateColumns` of a token file (`bench h2 --template`).
    public static let templateJSON =
        #"{"aps":{"alert":"Benchmark {{name}}","badge":1,"sound":"default"},"campaign":"c-0001","p":"{{count}}"}"#

    /// The columns after `token` of a token file for `templateJSON`.
    public static let templateColumns = ["name", "count"]

    /// The fields of row `index` (0-based) for `templateColumns`: a name and a count, of a few lengths.
    public static func templateFields(row index: Int) -> String { "user\(index % 100_000),\(index % 1000)" }

    /// `templateJSON` as a job's row payloads.
    public static func templatePayloads() throws -> RowPayloads {
        let template = try PayloadTemplate(json: Array(Self.templateJSON.utf8), file: "bench-template.json")
        return RowPayloads(templates: PayloadTemplates(template), limit: .http2)
    }

    /// Sends every token of `tokenFile` over `connections` connections and times it.
    ///
    /// - Parameters:
    ///   - serverThreads: event loop threads of the server (sender and server share the machine's cores).
    ///   - streams: streams per connection (the server announces as many).
    public static func run(
        tokenFile: String,
        connections: Int,
        identity: ServerIdentity,
        serverThreads: Int = 1,
        streams: Int = 100,
        server kind: Server = .sink,
        engine: HTTP2Engine? = nil,
        payloads: RowPayloads? = nil
    ) async throws -> Row {
        let port: Int
        let answeredCount: @Sendable () -> Int
        let stop: @Sendable () async -> Void
        switch kind {
        case .sink:
            let sink = try await HTTP2SinkServer(
                certificateChain: identity.certificateChain,
                privateKey: identity.privateKey,
                maximumConcurrentStreams: streams,
                threads: serverThreads
            )
            (port, answeredCount, stop) = (sink.port, { sink.answeredCount }, { await sink.stop() })
        case .nio:
            var options = HTTP2LoopbackServer.Options()
            options.maximumConcurrentStreams = streams
            let server = try await HTTP2LoopbackServer(
                certificateChain: identity.certificateChain,
                privateKey: identity.privateKey,
                options: options,
                threads: serverThreads
            ) { _ in .ok(apnsID: nil) }
            (port, answeredCount, stop) = (server.port, { server.requestCount }, { await server.stop() })
        }

        let row: Row
        do {
            // The server does not ask for a certificate; authentication is not what is measured.
            row = try await self.measure(
                tokenFile: tokenFile,
                port: port,
                serverName: identity.serverName,
                trustRoots: identity.trustRoots,
                authentication: .certificate(chain: identity.certificateChain, key: identity.privateKey),
                topic: "com.example.salvo",
                connections: connections,
                streams: streams,
                engine: engine,
                payloads: payloads
            )
        } catch {
            await stop()
            throw error
        }
        let answered = answeredCount()
        await stop()
        var checked = row
        checked.allDelivered = row.allDelivered && answered == row.notifications
        return checked
    }

    /// Sends every token of `tokenFile` to a server already listening on 127.0.0.1:`port` (the simulator's
    /// HTTP/2 endpoint, say) and times it; `allDelivered` says whether every row was answered 200. With `payloads`
    /// each row's payload is rendered from its fields (the file needs the templates' columns).
    public static func measure(
        tokenFile: String,
        port: Int,
        serverName: String,
        trustRoots: NIOSSLTrustRoots,
        authentication: APNSAuthentication,
        topic: String,
        connections: Int,
        maximumConnections: Int? = nil,
        streams: Int? = 100,
        engine: HTTP2Engine? = nil,
        payloads: RowPayloads? = nil,
        progress: (@Sendable (JobProgress) -> Void)? = nil
    ) async throws -> Row {
        var client = HTTP2ClientConfiguration(host: "127.0.0.1", port: port, authentication: authentication)
        client.serverName = serverName
        client.trustRoots = trustRoots
        client.connections = connections
        client.maximumConnections = maximumConnections
        client.maximumStreamsPerConnection = streams
        if let engine { client.engine = engine }
        let headers = try APNSRequestHeaders(pushType: .alert, priority: .immediate, topic: topic)
        let configuration = HTTP2JobConfiguration(
            client: client,
            headers: headers,
            payload: try Payload(json: Self.payloadJSON)
        )
        let source = TokenSource(files: [tokenFile], payloads: payloads)
        let summary = try source.validate()
        let group = MultiThreadedEventLoopGroup(
            numberOfThreads: min(maximumConnections ?? connections, System.coreCount)
        )
        let result: HTTP2JobResult
        let clientCPU: Double
        let wholeSeconds: Double
        let processCPU = ResourceUsage.processCPUSeconds()
        ResourceUsage.resetPeakResident()
        do {
            let before = try await ResourceUsage.cpuSeconds(of: group)
            let start = ContinuousClock.now
            result = try await HTTP2Job.run(
                configuration: configuration,
                source: source,
                summary: summary,
                group: group,
                progress: progress
            )
            let whole = ContinuousClock.now - start
            wholeSeconds = Double(whole.components.seconds) + Double(whole.components.attoseconds) * 1e-18
            clientCPU = try await ResourceUsage.cpuSeconds(of: group) - before
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
        var row = Row(
            connections: connections,
            notifications: result.report.confirmed,
            seconds: result.report.seconds,
            allDelivered: result.report.confirmed == summary.validRows
        )
        row.processCPUSeconds = ResourceUsage.processCPUSeconds() - processCPU
        row.peakResidentMiB = ResourceUsage.peakResidentMiB()
        row.clientCPUSeconds = clientCPU
        row.connectionsOpened = result.report.connections
        row.roundTripMilliseconds = result.report.roundTripMilliseconds
        row.wholeSeconds = wholeSeconds
        row.closingSeconds = result.closingSeconds
        row.firstHandshakeSeconds = result.firstHandshakeSeconds
        row.lastFirstRequestSeconds = result.firstRequestSeconds.last
        try? await group.shutdownGracefully()
        return row
    }
}
