import APNSWire
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import SalvoCampaigns
import SalvoService
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import SalvoWebhooks
import Testing

/// Webhooks from the service, in this process, against the simulator over TLS and a receiver on loopback: a
/// receiver that refuses connections, then answers 500, then 200, with the service restarted in the middle of a
/// campaign, gets every gone token (the campaign's and the transactional ones) signed, each under one event id, and
/// the refusals and outcomes asked for; nothing is lost and nothing is made twice.
@Suite(.tags(.network), .runs(.network), .serialized, .timeLimit(.minutes(5)))
struct CampaignWebhookTests {
    static let secret = Array("a shared secret of the test receiver".utf8)

    @Test func aReceiverDownThenFailingThenUpGetsEveryGoneTokenOnceAcrossARestart() async throws {
        let rows = 200
        // The campaign's rows 0..<200: gone every 10th (410 Unregistered), every 25th otherwise (410 ExpiredToken),
        // every 33rd otherwise refused (400 DeviceTokenNotForTopic). Transactional ones from 1000 on.
        let unregistered = (0..<rows).filter { $0 % 10 == 3 }
        let expired = (0..<rows).filter { $0 % 25 == 7 && !unregistered.contains($0) }
        let foreign = (0..<rows).filter { $0 % 33 == 11 && !unregistered.contains($0) && !expired.contains($0) }
        let transactionalGone = Array(1000..<1006)
        let transactionalFine = Array(1010..<1013)
        var plan = FaultPlan()
        plan.uninstalled = [.init(topic: campaignTopic, tokens: (unregistered + transactionalGone).map(campaignToken))]
        plan.expiredTokens = expired.map(campaignToken)
        plan.foreignTokens = foreign.map(campaignToken)
        let setup = try await CampaignSimulator.start(plan: plan)
        let receiver = try WebhookReceiver(secret: Self.secret)
        defer { Task { await receiver.stop() } }
        var configuration = WebhookConfiguration()
        configuration.batching = WebhookBatching(maximumEvents: 25, maximumWait: 100)
        configuration.retry = WebhookRetry.Policy(base: 50, cap: 400)
        configuration.requestTimeout = 5000
        let webhooks = TestWebhooks(
            endpoints: [WebhookEndpoint(url: receiver.url)],
            secret: WebhookSecret(bytes: Self.secret),
            configuration: configuration
        )
        let folder = try campaignFolder("campaign-webhooks") + "/store"
        var service = try await CampaignService.start(simulator: setup, folder: folder, webhooks: webhooks)
        try await withCampaignClient { client in
            // Transactional: gone tokens, two of them and the fine ones asking for their outcome.
            let items = (transactionalGone + transactionalFine).enumerated().map { index, token in
                #"{"token":"\#(campaignToken(token))","payload":{"aps":{"alert":"hi"}}"#
                    + (index % 3 == 0 || token >= 1010 ? #","webhook":true}"# : "}")
            }
            let posted = try await service.call(
                .POST,
                "/v1/notifications",
                contentType: "application/json",
                body: Array(#"{"notifications":[\#(items.joined(separator: ","))]}"#.utf8),
                client: client
            )
            #expect(posted.status == 202, "\(posted.text)")
            let made = try await service.upload(
                audienceCSV(0..<rows, bad: 2),
                settings: #"{"name":"webhooks","rate":25,"payload":{"aps":{"alert":"news"}}}"#,
                client: client
            )
            #expect(made.status == 201, "\(made.text)")
            let id = try #require(made.json["id"]?.stringValue)

            // Down: nothing listens; the service tries and backs off.
            try await eventually("attempts refused", timeout: .seconds(30)) {
                try await service.webhookStatus(client: client)?["failed_attempts"]?.intValue ?? 0 >= 3
            }
            // Up but failing: 500s.
            try await receiver.listen()
            try await eventually("500s answered", timeout: .seconds(30)) { receiver.requests.count >= 3 }
            #expect(receiver.requests.allSatisfy { $0 == 500 })

            // A restart in the middle of the campaign, the receiver still failing.
            try await eventually("the campaign under way", timeout: .seconds(30), every: .milliseconds(20)) {
                setup.simulator.ledger.snapshot().accepted >= 50
            }
            let underWay = try await service.campaign(id, client: client)
            #expect(underWay["state"] == .string("running"), "\(underWay)")
            await service.stop()
            let before = receiver.requests.count
            service = try await CampaignService.start(
                simulator: setup,
                folder: folder,
                key: service.key,
                webhooks: webhooks
            )
            try await eventually("500s after the restart", timeout: .seconds(30)) {
                receiver.requests.count >= before + 2
            }
            receiver.answer(200)
            try await service.waitFor(id, state: "finished", client: client)
            try await eventually("every event delivered", timeout: .seconds(60)) {
                let status = try await service.webhookStatus(client: client)
                return status?["counts"]?["pending"]?.intValue == 0 && receiver.requests.last == 200
            }
            let status = try #require(try await service.webhookStatus(client: client))
            #expect(status["counts"]?["dead"]?.intValue == 0, "\(status)")
        }
        await service.stop()

        #expect(receiver.badSignatures == 0, "every delivery is signed with the shared secret")
        #expect(receiver.badBodies == 0 && receiver.mismatchedIDs == 0)
        #expect(receiver.requests.contains(500) && receiver.requests.last == 200)
        let accepted = receiver.accepted
        // Repeats dropped by id: each gone token under exactly one id, none missing, none extra.
        var byID: [String: WebhookReceiver.Event] = [:]
        for event in accepted { byID[event.id] = event }
        let gone = byID.values.filter { $0.type == "token.gone" }
        let goneTokens = (unregistered + expired + transactionalGone).map(campaignToken)
        #expect(gone.count == goneTokens.count, "one id for each gone token")
        #expect(Set(gone.compactMap(\.token)) == Set(goneTokens), "every gone token, and only those")
        let refused = byID.values.filter { $0.type == "push.refused" }
        #expect(Set(refused.compactMap(\.token)) == Set(foreign.map(campaignToken)) && refused.count == foreign.count)
        // Outcomes for the five that asked: two gone, three delivered.
        let outcomes = byID.values.filter { $0.type == "notification.outcome" }
        let asked = [transactionalGone[0], transactionalGone[3]] + transactionalFine
        #expect(Set(outcomes.compactMap(\.token)) == Set(asked.map(campaignToken)) && outcomes.count == asked.count)
        let states = byID.values.filter { $0.type == "campaign.state" }
        #expect(states.count >= 2, "running and finished, at least")
        // Delivered at least once: a repeat, if any, has the id of its first delivery.
        #expect(accepted.count >= byID.count)
    }
}

extension CampaignService {
    /// The first webhook of `GET /v1/webhooks`.
    func webhookStatus(client: HTTPClient) async throws -> JSONValue? {
        let answer = try await self.call(.GET, "/v1/webhooks", client: client)
        guard case .array(let list)? = answer.json["webhooks"] else { return nil }
        return list.first
    }
}
