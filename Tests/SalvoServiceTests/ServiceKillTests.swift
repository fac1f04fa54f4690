import APNSWire
import AsyncHTTPClient
import Crypto
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import SalvoRows
import SalvoService
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// `salvo serve` as its users run it, killed: 100,000 notifications posted in batches of 100 by four concurrent
/// clients, each batch under an idempotency key (some posted again on purpose, some retried after the kill cut their
/// connection), the service `kill -9`ed twice in the middle and started again on the same store. The simulator's
/// ledger then shows every accepted notification delivered, once, but for those the service declared uncertain.
@Suite(.tags(.process), .runs(.process), .serialized, .timeLimit(.minutes(8)))
struct ServiceKillTests {
    static let batches = 1000
    static let batchSize = 100
    static let clients = 4

    /// One batch's request body: notifications `batch * batchSize ..< (batch + 1) * batchSize`.
    static func body(_ batch: Int) -> ByteBuffer {
        let items = (batch * Self.batchSize..<(batch + 1) * Self.batchSize).map { index in
            #"{"token":"\#(notification(index).token.hexString)","payload":{"aps":{"alert":"n\#(index)"}}}"#
        }
        return ByteBuffer(string: #"{"notifications":[\#(items.joined(separator: ","))]}"#)
    }

    /// The service as a child process on a fixed port, started again after each kill.
    final class Server: Sendable {
        let salvo: String
        let arguments: [String]
        let port: Int
        private let current = NIOLockedValueBox<TestProcess?>(nil)

        init(salvo: String, arguments: [String], port: Int) {
            self.salvo = salvo
            self.arguments = arguments
            self.port = port
        }

        func start() throws {
            let process = try TestProcess(self.salvo, self.arguments, input: .nothing, output: .together)
            self.current.withLockedValue { $0 = process }
        }

        func killHard() async throws {
            guard let process = self.current.withLockedValue({ $0 }) else { return }
            try await process.kill()
        }

        func stop() async throws -> Int32? {
            guard let process = self.current.withLockedValue({ $0 }) else { return nil }
            process.signal(SIGTERM)
            return try await process.wait(seconds: 30)
        }

        var output: String { self.current.withLockedValue { $0?.output ?? "" } }
    }

    @Test func killedTwiceEveryAcceptedNotificationIsDeliveredOnce() async throws {
        guard let salvo = TestProcess.salvoPath else {
            Issue.record("\(TestProcess.salvoMissing)")
            return
        }
        let setup = try await ServiceSimulator.start(maximumTokens: 1 << 18)
        let folder = try scratchFolder("kill")
        let gateway = try setup.token.commandLineOptions(in: folder)
        let store = folder + "/store"
        let (created, createdOutput) = try await TestProcess.run(
            salvo,
            ["serve", "keys", "create", "--store", store, "--name", "kill"]
        )
        #expect(created == 0, "\(createdOutput)")
        let key = try #require(
            createdOutput.split(separator: "\n").first { $0.hasPrefix("key: ") }.map { String($0.dropFirst(5)) }
        )
        let free = try ClosedPort()
        let port = free.port
        free.close()
        let server = Server(
            salvo: salvo,
            arguments: [
                "serve", "--listen", "127.0.0.1:\(port)", "--store", store, "--log-level", "warning",
                "--shutdown-grace", "2",
            ] + gateway,
            port: port
        )
        try server.start()
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let base = "http://127.0.0.1:\(port)"
        let answers = NIOLockedValueBox([Int: (batch: String, body: String)]())
        let replays = NIOLockedValueBox((asked: 0, same: 0))
        let kills = NIOLockedValueBox(0)
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for clientIndex in 0..<Self.clients {
                    group.addTask {
                        for batch in stride(from: clientIndex, to: Self.batches, by: Self.clients) {
                            let first = try await Self.post(batch, key: key, base: base, client: client)
                            answers.withLockedValue { $0[batch] = first }
                            // Every tenth batch again, on purpose: the first answer, and nothing sent twice.
                            if batch % 10 == 0 {
                                let again = try await Self.post(batch, key: key, base: base, client: client)
                                replays.withLockedValue {
                                    $0.asked += 1
                                    if again.body == first.body { $0.same += 1 }
                                }
                            }
                        }
                    }
                }
                group.addTask {
                    // Two kills, a third and two thirds of the way through the batches, each followed by a restart.
                    for mark in [Self.batches / 3, 2 * Self.batches / 3] {
                        try await eventually(
                            "\(mark) batches accepted",
                            timeout: .seconds(240),
                            every: .milliseconds(5)
                        ) {
                            answers.withLockedValue { $0.count } >= mark
                        }
                        try await server.killHard()
                        kills.withLockedValue { $0 += 1 }
                        try server.start()
                    }
                }
                try await group.waitForAll()
            }
            #expect(kills.withLockedValue { $0 } == 2)
            let accepted = answers.withLockedValue { $0 }
            #expect(accepted.count == Self.batches)
            #expect(replays.withLockedValue { $0.asked == $0.same && $0.asked == Self.batches / 10 })

            // Every batch to its end, then the ledger.
            var uncertain: Set<String> = []
            var final = 0
            for (_, answer) in accepted.sorted(by: { $0.key < $1.key }) {
                let records = try await Self.finalBatch(answer.batch, key: key, base: base, client: client)
                for record in records {
                    if record.state.isFinal { final += 1 }
                    if record.uncertainResends > 0 { uncertain.insert(record.token) }
                }
            }
            #expect(final == Self.batches * Self.batchSize)
            // Off the cooperative pool (one thread in CI): a tally of 100,000 tokens there would stall the other tests.
            let simulator = setup.simulator
            let count = Self.batches * Self.batchSize
            let verdict = await BlockingWork.run {
                simulator.verdict(
                    expected: ExpectedTokens((0..<count).map { notification($0).token }),
                    listLimit: count
                )
            }
            #expect(verdict.neverDelivered == 0, "\(verdict.summary)")
            #expect(verdict.deliveredOnce + verdict.deliveredMoreThanOnce == Self.batches * Self.batchSize)
            let undeclared = verdict.deliveredMoreThanOnceTokens.filter { !uncertain.contains($0.token.lowercased()) }
            #expect(undeclared.isEmpty, "delivered twice without being declared uncertain: \(undeclared.prefix(5))")
            print(
                "kill test: \(verdict.deliveredOnce) delivered once, \(verdict.deliveredMoreThanOnce) more than once, "
                    + "\(uncertain.count) declared uncertain after the kills"
            )
        } catch {
            Issue.record("\(error)\n\(server.output.suffix(2000))")
        }
        #expect(try await server.stop() == 0, "\(server.output.suffix(2000))")
        try await client.shutdown()
        try await setup.simulator.shutdown()
    }

    /// Posts a batch until the service answers it: a cut connection or a service not up yet is retried with the
    /// same key and body (bounded).
    static func post(
        _ batch: Int,
        key: String,
        base: String,
        client: HTTPClient
    ) async throws -> (batch: String, body: String) {
        var request = HTTPClientRequest(url: base + "/v1/notifications")
        request.method = .POST
        request.headers.add(name: "Authorization", value: "Bearer \(key)")
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "Idempotency-Key", value: "batch-\(batch)")
        request.body = .bytes(Self.body(batch))
        var answered: (batch: String, body: String)?
        try await eventually("the service answers batch \(batch)", timeout: .seconds(120)) {
            do {
                let response = try await client.execute(request, timeout: .seconds(20))
                let bytes = try await response.body.collect(upTo: 1 << 20)
                let text = String(buffer: bytes)
                if response.status.code == 202 {
                    let value = try JSONValue.parse(Array(bytes.readableBytesView)).value
                    guard case .string(let id)? = value["batch"] else {
                        throw ServiceProblem(.badRequest, detail: "batch \(batch): no batch id in \(text)")
                    }
                    answered = (id, text)
                    return true
                }
                guard response.status.code == 503 || response.status.code == 429 else {
                    throw ServiceProblem(.badRequest, detail: "batch \(batch): \(response.status.code) \(text)")
                }
            } catch let problem as ServiceProblem {
                throw problem
            } catch {
                // The connection was refused or cut: the service is down or restarting.
            }
            return false
        }
        guard let answered else { throw ServiceProblem(.unavailable, detail: "batch \(batch) was never answered") }
        return answered
    }

    /// A batch's notifications once all are final (waits of 30 s, at most ten).
    static func finalBatch(
        _ batch: String,
        key: String,
        base: String,
        client: HTTPClient
    ) async throws -> [(token: String, state: NotificationState, uncertainResends: Int)] {
        var request = HTTPClientRequest(url: base + "/v1/batches/\(batch)?wait=30")
        request.headers.add(name: "Authorization", value: "Bearer \(key)")
        var records: [(token: String, state: NotificationState, uncertainResends: Int)] = []
        for _ in 0..<10 {
            let response = try await client.execute(request, timeout: .seconds(40))
            let bytes = try await response.body.collect(upTo: 4 << 20)
            let value = try JSONValue.parse(Array(bytes.readableBytesView)).value
            guard case .array(let items)? = value["notifications"] else { break }
            records = items.compactMap { item in
                guard case .string(let token)? = item["token"], case .string(let state)? = item["state"],
                    case .number(let resends)? = item["uncertain_resends"]
                else { return nil }
                let known = NotificationState.allCases.first { $0.description == state } ?? .queued
                return (token, known, Int(resends) ?? 0)
            }
            if value["final"] == .bool(true) { break }
        }
        return records
    }
}
