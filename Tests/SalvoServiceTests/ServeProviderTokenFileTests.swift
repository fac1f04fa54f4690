import APNSWire
import AsyncHTTPClient
import Foundation
import NIOCore
import SalvoService
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// A fleet's workers share one provider token: `salvo token mint` writes it, two `salvo serve` processes started with
/// `--provider-token-file` send with it, and the gateway sees one token for both (APNs wants a key's token renewed at
/// most every 20 minutes, which workers minting their own would break). A token file beside a signing key is refused.
@Suite(.tags(.process, .network), .runs(.process), .serialized, .timeLimit(.minutes(3)))
struct ServeProviderTokenFileTests {
    @Test func twoServicesSendWithTheOneMintedToken() async throws {
        guard let salvo = TestProcess.salvoPath else {
            Issue.record("\(TestProcess.salvoMissing)")
            return
        }
        let setup = try await ServiceSimulator.start()
        let folder = try scratchFolder("serve-token-file")
        let options = try setup.token.commandLineOptions(in: folder)
        // --auth-key FILE --key-id ID --team-id ID, for the mint; the services get the rest.
        func value(_ name: String) -> String { options[options.firstIndex(of: name)! + 1] }
        let (minted, mintOutput) = try await TestProcess.run(
            salvo,
            [
                "token", "mint", "--auth-key", value("--auth-key"), "--key-id", value("--key-id"), "--team-id",
                value("--team-id"), "--out", folder + "/token.json",
            ]
        )
        #expect(minted == 0, "\(mintOutput)")
        let gateway = [
            "--gateway", value("--gateway"), "--ca", value("--ca"), "--server-name", "localhost", "--topic",
            value("--topic"), "--provider-token-file", folder + "/token.json",
        ]
        let (refused, refusal) = try await TestProcess.run(
            salvo,
            ["serve", "--store", folder + "/refused", "--auth-key", value("--auth-key")] + gateway
        )
        #expect(refused == 64 && refusal.contains("holds the token"), "\(refusal)")

        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        var services: [TestProcess] = []
        do {
            for index in 0..<2 {
                let store = folder + "/store-\(index)"
                let (created, output) = try await TestProcess.run(
                    salvo,
                    ["serve", "keys", "create", "--store", store, "--name", "fleet"]
                )
                #expect(created == 0, "\(output)")
                let key = try #require(
                    output.split(separator: "\n").first { $0.hasPrefix("key: ") }.map { String($0.dropFirst(5)) }
                )
                let free = try ClosedPort()
                let port = free.port
                free.close()
                services.append(
                    try TestProcess(
                        salvo,
                        ["serve", "--listen", "127.0.0.1:\(port)", "--store", store, "--log-level", "warning"]
                            + gateway
                    )
                )
                let base = "http://127.0.0.1:\(port)"
                let token = String(repeating: "\(index + 1)", count: 64)
                var request = HTTPClientRequest(url: base + "/v1/notifications?wait=20")
                request.method = .POST
                request.headers.add(name: "Authorization", value: "Bearer \(key)")
                request.headers.add(name: "Content-Type", value: "application/json")
                request.body = .bytes(
                    ByteBuffer(string: #"{"notifications":[{"token":"\#(token)","payload":{"aps":{"alert":"hi"}}}]}"#)
                )
                var id: String?
                try await eventually("service \(index) takes the notification", timeout: .seconds(60)) {
                    guard let response = try? await client.execute(request, timeout: .seconds(10)) else { return false }
                    let body = try await response.body.collect(upTo: 1 << 20)
                    guard response.status.code == 202 else { return false }
                    let value = try JSONValue.parse(Array(body.readableBytesView)).value
                    if case .array(let items)? = value["notifications"], case .string(let made)? = items.first?["id"] {
                        id = made
                    }
                    return id != nil
                }
                var outcome = HTTPClientRequest(url: base + "/v1/notifications/\(try #require(id))?wait=20")
                outcome.headers.add(name: "Authorization", value: "Bearer \(key)")
                let answer = try await client.execute(outcome, timeout: .seconds(30))
                let text = String(buffer: try await answer.body.collect(upTo: 1 << 20))
                #expect(text.contains(#""state":"delivered""#), "\(text)")
            }
            #expect(setup.simulator.ledger.snapshot().accepted == 2)
            #expect(setup.simulator.acceptedProviderTokens == 1, "both services sent the one minted token")
        } catch {
            for service in services { try? await service.kill() }
            try? await client.shutdown()
            try await setup.simulator.shutdown()
            throw error
        }
        for service in services { try await service.kill() }
        try await client.shutdown()
        try await setup.simulator.shutdown()
    }
}
