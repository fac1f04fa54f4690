import APNSWire
import AsyncHTTPClient
import Crypto
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import SalvoConsole
import SalvoData
import SalvoRows
import SalvoServer
import SalvoService
import SalvoSimulator

/// `salvo demo --serve`: the service as an app's backend uses it. Starts `salvo serve` on the embedded simulator
/// (some tokens unregistered there), posts a stream of transactional notifications over HTTP from a few concurrent
/// clients, waits for their outcomes, and puts the service's answers beside the simulator's verdict. Succeeds when
/// the ledger shows each accepted notification once and every unregistered token answered 410.
enum ServeDemoRun {
    static let batchSize = 50
    static let clients = 4

    static func run(notifications: Int) async throws -> Bool {
        let tokens = (0..<notifications).map { index in
            try! DeviceToken(bytes: Array(SHA256.hash(data: Array("serve-demo-\(index)".utf8))))
        }
        // One in fifty is a token the simulator calls unregistered (410).
        let gone = Set(stride(from: 7, to: notifications, by: 50).map { tokens[$0] })
        var plan = FaultPlan()
        plan.name = "serve-demo"
        plan.uninstalled = [.init(topic: ServeDemo.topic, tokens: gone.map(\.hexString))]
        let demo = try await ServeDemo.start(plan: plan, expectedTokens: notifications)
        defer { try? FileManager.default.removeItem(atPath: demo.folder) }
        let storeFolder = demo.folder + "/store"
        let store = try await SQLiteNotificationStore.open(directory: storeFolder)
        let service = try await NotificationService.start(
            configuration: ServiceConfiguration(job: demo.job, defaults: .init(topic: ServeDemo.topic)),
            store: store,
            marks: try ServiceMarks(directory: storeFolder)
        )
        let (key, record) = APIKeys.make(name: "demo", now: ServiceClock.milliseconds())
        try await store.addAPIKey(record)
        let document = SalvoData.path("openapi/salvo-v1.json").flatMap { FileManager.default.contents(atPath: $0) }
        let responder = ServiceResponder(
            service: service,
            document: Array(document ?? Data()),
            metricsText: { "" },
            logger: Logger(label: "salvo.serve", factory: { _ in SwiftLogNoOpLogHandler() })
        )
        let listening = AsyncStream<Int>.makeStream()
        let server = try ServiceServer(
            responder: responder,
            host: "127.0.0.1",
            port: 0,
            tls: nil,
            logger: Logger(label: "salvo.serve", factory: { _ in SwiftLogNoOpLogHandler() })
        ) { port in listening.continuation.yield(port) }
        let serving = Task { try await server.run() }
        var ports = listening.stream.makeAsyncIterator()
        guard let port = await ports.next() else { return false }
        let base = "http://127.0.0.1:\(port)"
        print(
            "salvo serve on \(base), sending through the simulator's HTTP/2 endpoint 127.0.0.1:\(demo.simulator.http2Port!)"
        )
        print(
            "posting \(notifications) notifications in batches of \(Self.batchSize) from \(Self.clients) clients "
                + "(\(gone.count) to tokens the simulator calls unregistered)"
        )

        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let start = ContinuousClock.now
        let batches = NIOLockedValueBox([String]())
        var counts: [String: Int] = [:]
        var reasons: [String: Int] = [:]
        do {
            let batchCount = (notifications + Self.batchSize - 1) / Self.batchSize
            try await withThrowingTaskGroup(of: Void.self) { group in
                for clientIndex in 0..<Self.clients {
                    group.addTask {
                        for batch in stride(from: clientIndex, to: batchCount, by: Self.clients) {
                            let range = batch * Self.batchSize..<min(notifications, (batch + 1) * Self.batchSize)
                            let id = try await Self.post(tokens[range], key: key, base: base, client: client)
                            batches.withLockedValue { $0.append(id) }
                        }
                    }
                }
                try await group.waitForAll()
            }
            let posted = ContinuousClock.now - start
            for batch in batches.withLockedValue({ $0 }) {
                let value = try await Self.get("/v1/batches/\(batch)?wait=30", key: key, base: base, client: client)
                guard case .array(let items)? = value["notifications"] else { continue }
                for item in items {
                    if case .string(let state)? = item["state"] { counts[state, default: 0] += 1 }
                    if case .string(let reason)? = item["reason"] { reasons[reason, default: 0] += 1 }
                }
            }
            let answered = ContinuousClock.now - start
            print(
                "posted in \(Self.seconds(posted)) s; every outcome final after \(Self.seconds(answered)) s "
                    + "(\(Int(Double(notifications) / max(0.001, Self.seconds(answered)))) notifications/s)"
            )
        } catch {
            print("error: \(error)")
        }
        try? await client.shutdown()
        await service.shutdown()
        await server.stop()
        _ = try? await serving.value

        let verdict = demo.simulator.verdict(expected: ExpectedTokens(tokens))
        try? await demo.simulator.shutdown()
        let delivered = counts["delivered", default: 0]
        let refused = counts["refused", default: 0]
        let left = notifications - delivered - refused
        let answers = [
            "the service's answers",
            "  delivered:             \(delivered)",
            "  refused (410):         \(reasons["Unregistered", default: 0])",
            "  refused, other:        \(refused - reasons["Unregistered", default: 0])",
            "  not final:             \(left)",
        ]
        let ledger = [
            "the simulator's ledger",
            "  delivered once:        \(verdict.deliveredOnce)",
            "  delivered twice+:      \(verdict.deliveredMoreThanOnce)",
            "  never delivered:       \(verdict.neverDelivered)",
            "  unregistered, refused: \(verdict.uninstalledNeverDelivered)",
        ]
        print(sideBySide(left: answers, right: ledger))
        let passed =
            verdict.deliveredMoreThanOnce == 0 && verdict.deliveredOnce == delivered && left == 0
            && reasons["Unregistered", default: 0] == gone.count && delivered + gone.count == notifications
        print(
            passed
                ? "PASS: every accepted notification was delivered once, every unregistered token answered 410"
                : "FAIL: the service's answers and the ledger disagree"
        )
        return passed
    }

    private static func seconds(_ duration: Duration) -> Double {
        let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) * 1e-18
        return (seconds * 100).rounded() / 100
    }

    /// Posts one batch (retried, bounded, while the service answers 429 or 503); returns its batch id.
    private static func post(
        _ tokens: ArraySlice<DeviceToken>,
        key: String,
        base: String,
        client: HTTPClient
    ) async throws -> String {
        let items = tokens.map { #"{"token":"\#($0.hexString)","payload":{"aps":{"alert":"Your order shipped"}}}"# }
        var request = HTTPClientRequest(url: base + "/v1/notifications")
        request.method = .POST
        request.headers.add(name: "Authorization", value: "Bearer \(key)")
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "Idempotency-Key", value: "demo-\(tokens.startIndex)")
        request.body = .bytes(ByteBuffer(string: #"{"notifications":[\#(items.joined(separator: ","))]}"#))
        for _ in 0..<100 {
            let response = try await client.execute(request, timeout: .seconds(30))
            let body = try await response.body.collect(upTo: 1 << 20)
            if response.status.code == 202 {
                let value = try JSONValue.parse(Array(body.readableBytesView)).value
                if case .string(let batch)? = value["batch"] { return batch }
            }
            guard response.status.code == 429 || response.status.code == 503 else {
                throw UserError("the service answered \(response.status.code): \(String(buffer: body))")
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw UserError("the service kept refusing a batch (429/503)")
    }

    private static func get(_ path: String, key: String, base: String, client: HTTPClient) async throws -> JSONValue {
        var request = HTTPClientRequest(url: base + path)
        request.headers.add(name: "Authorization", value: "Bearer \(key)")
        let response = try await client.execute(request, timeout: .seconds(40))
        let body = try await response.body.collect(upTo: 8 << 20)
        return try JSONValue.parse(Array(body.readableBytesView)).value
    }
}
