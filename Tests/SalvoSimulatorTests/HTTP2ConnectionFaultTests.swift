import APNSWire
import Foundation
import NIOCore
import SalvoTestTraits
import Testing

@testable import SalvoSimulator

/// The HTTP/2 endpoint's seeded connection faults, at the frame level: GOAWAY with streams still in flight, a
/// reset connection, a stream limit that drops and comes back, bursts of 429/500/503; each from a plan, the same
/// run after run, and never at the cost of an answer to a request the ledger recorded.
@Suite(.tags(.network), .runs(.network), .timeLimit(.minutes(1))) struct HTTP2ConnectionFaultTests {
    typealias Endpoint = HTTP2EndpointTests

    /// An endpoint with room for 10 streams at once, whose plan carries `faults`.
    static func run<R>(
        _ faults: HTTP2EndpointConfiguration.Faults,
        seed: UInt64 = 1,
        _ body: (Harness) async throws -> R
    ) async throws -> R {
        var endpoint = Endpoint.endpoint
        endpoint.maximumConcurrentStreams = 10
        var plan = FaultPlan()
        plan.seed = seed
        plan.http2 = faults
        return try await Harness.run(plan: plan, http2: endpoint, body)
    }

    /// Requests on streams 1, 3, 5 … for tokens `first`, `first + 1` …: every HEADERS first, then every body, so
    /// that all of them are in flight when the first is answered.
    static func pipelined(_ count: Int, first: UInt32) -> Endpoint.Conversation {
        var conversation = Endpoint.Conversation()
        for index in 0..<count {
            conversation.request(stream: UInt32(2 * index + 1), token: TestTokens.token(first + UInt32(index)))
        }
        for index in 0..<count { conversation.body(stream: UInt32(2 * index + 1)) }
        return conversation
    }

    static func statuses(_ frames: [Endpoint.Frame]) throws -> [UInt32: String] {
        try Endpoint.answers(frames).compactMapValues { $0.first(name: ":status") }
    }

    static func recorded(_ harness: Harness, first: UInt32, count: Int) -> [UInt32] {
        (0..<UInt32(count)).filter { harness.simulator.ledger.record(for: TestTokens.token(first + $0)) != nil }
            .map { 2 * $0 + 1 }
    }

    @Test func thePlanCarriesTheConnectionFaultsAndRefusesBadValues() throws {
        let json = #"""
            {"http2": {"goAwayRate": 0.01, "resetRate": 0.02, "shrinkRate": 0.03, "shrinkTo": 2,
                       "shrinkForStreams": 50, "errorBurstRate": 0.04, "errorBurstLength": 7}}
            """#
        let faults = try #require(try FaultPlan.decode(Data(json.utf8)).http2)
        #expect(faults.goAwayRate == 0.01 && faults.resetRate == 0.02 && faults.shrinkRate == 0.03)
        #expect(faults.shrinkTo == 2 && faults.shrinkForStreams == 50)
        #expect(faults.errorBurstRate == 0.04 && faults.errorBurstLength == 7)
        _ = try CompiledFaultPlan(try FaultPlan.decode(Data(json.utf8)))

        var options = FaultPlan()
        try options.apply(options: [
            "h2-goaway-rate=0.01", "h2-reset-rate=0.02", "h2-shrink-rate=0.03", "h2-shrink-for=50",
            "h2-burst-rate=0.04", "h2-burst-length=7", "h2-shrink-to=2",
        ])
        #expect(options.http2 == faults)

        for (bad, message) in [
            (#"{"http2":{"resetRate":1.5}}"#, "http2.resetRate is a probability between 0 and 1, not 1.5"),
            (#"{"http2":{"goAwayRate":-0.1}}"#, "http2.goAwayRate is a probability between 0 and 1, not -0.1"),
            (#"{"http2":{"errorBurstLength":0}}"#, "http2.errorBurstLength must be 1 or more, not 0"),
            (#"{"http2":{"shrinkForStreams":0}}"#, "http2.shrinkForStreams must be 1 or more, not 0"),
            (#"{"http2":{"resetRates":0.1}}"#, "unknown key 'http2.resetRates'"),
        ] {
            let error = #expect(throws: SimulatorError.self) { try FaultPlan.decode(Data(bad.utf8)) }
            #expect(error?.reason.contains(message) == true, "\(error?.reason ?? "")")
        }
    }

    /// The soak's hostile plan ends HTTP/2 connections in every way this suite covers.
    @Test func theShippedHostilePlanHasEveryConnectionFault() throws {
        let plan = try FaultPlan.load(
            contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent()
                .appendingPathComponent("../../data/faults/hostile.json").standardized.path
        )
        let faults = try #require(plan.http2)
        #expect(faults.goAwayRate > 0 && faults.resetRate > 0 && faults.shrinkRate > 0 && faults.errorBurstRate > 0)
        #expect(faults.shrinkTo < HTTP2EndpointConfiguration().maximumConcurrentStreams)
    }

    @Test func goAwayNamesTheLastStreamAnsweredAndDropsTheStreamsStillInFlight() async throws {
        var faults = HTTP2EndpointConfiguration.Faults()
        faults.goAwayRate = 1
        try await Self.run(faults) { harness in
            let frames = try await Endpoint().exchange(harness, Self.pipelined(3, first: 100), cleartext: false)
            let goAway = try #require(frames.first { $0.type == 7 })
            var payload = ByteBuffer(bytes: goAway.payload)
            #expect(payload.readInteger(as: UInt32.self) == 1, "last stream id: the one answered")
            #expect(payload.readInteger(as: UInt32.self) == 0, "NO_ERROR")
            // Streams 3 and 5 were open (their HEADERS in) when stream 1 was answered: never processed.
            #expect(try Self.statuses(frames) == [1: "200"])
            #expect(Self.recorded(harness, first: 100, count: 3) == [1])
        }
    }

    @Test func aResetSendsNoGoAwayAndProcessesNothingAfterIt() async throws {
        var faults = HTTP2EndpointConfiguration.Faults()
        faults.resetRate = 1
        try await Self.run(faults) { harness in
            let outcome = try await TestClient.exchange(
                port: harness.simulator.http2Port!,
                identity: harness.client,
                trusting: harness.certificates.ca.certificatePEM,
                send: Self.pipelined(3, first: 200).bytes,
                timeout: .seconds(5)
            )
            let frames = Endpoint.frames(outcome.received)
            #expect(!outcome.timedOut, "the server ended the connection")
            #expect(outcome.error != nil, "a reset, not a clean close: \(String(describing: outcome.error))")
            #expect(frames.first?.type == 4, "the preface went out before the reset")
            #expect(!frames.contains { $0.type == 7 }, "no GOAWAY")
            #expect(try Self.statuses(frames).isEmpty)
            #expect(Self.recorded(harness, first: 200, count: 3).isEmpty)
            try await eventually("one reset counted", timeout: .seconds(10)) {
                harness.simulator.ledger.snapshot().resets == 1
            }
        }
    }

    /// Half the new streams reset the connection: it ends somewhere in the middle, every answer written before
    /// the reset arrives, and what the ledger recorded is exactly what was answered — the same on every run.
    @Test func aResetMidConnectionKeepsEveryAnswerAndIsRepeatable() async throws {
        var faults = HTTP2EndpointConfiguration.Faults()
        faults.resetRate = 0.3
        var runs: [[UInt32]] = []
        for _ in 0..<2 {
            let answered = try await Self.run(faults, seed: 7) { harness in
                // One request at a time, so that each is answered before the next stream opens.
                var conversation = Endpoint.Conversation()
                for index in 0..<8 {
                    conversation.request(stream: UInt32(2 * index + 1), token: TestTokens.token(300 + UInt32(index)))
                    conversation.body(stream: UInt32(2 * index + 1))
                }
                let outcome = try await TestClient.exchange(
                    port: harness.simulator.http2Port!,
                    identity: harness.client,
                    trusting: harness.certificates.ca.certificatePEM,
                    send: conversation.bytes,
                    timeout: .seconds(5)
                )
                let frames = Endpoint.frames(outcome.received)
                let answered = try Self.statuses(frames).keys.sorted()
                #expect(!outcome.timedOut && outcome.error != nil)
                #expect(Self.recorded(harness, first: 300, count: 8) == answered)
                return answered
            }
            runs.append(answered)
        }
        #expect(runs[0] == runs[1])
        #expect(!runs[0].isEmpty && runs[0].count < 8, "seed 7 resets mid-connection: \(runs[0])")
    }

    @Test func theStreamLimitDropsThenComesBack() async throws {
        var faults = HTTP2EndpointConfiguration.Faults()
        faults.shrinkRate = 1
        faults.shrinkTo = 1
        faults.shrinkForStreams = 2
        try await Self.run(faults) { harness in
            var conversation = Endpoint.Conversation()
            conversation.request(stream: 1, token: TestTokens.token(400))
            conversation.body(stream: 1)
            // The client acknowledges the limit of 1, then opens two streams: the second is over it.
            conversation.frame(type: 4, flags: 1, stream: 0, payload: [])
            conversation.request(stream: 3, token: TestTokens.token(401))
            conversation.request(stream: 5, token: TestTokens.token(402))
            conversation.body(stream: 3)
            conversation.body(stream: 5)
            // Two requests after the drop, the limit is back.
            conversation.request(stream: 7, token: TestTokens.token(403))
            conversation.body(stream: 7)
            let frames = try await Endpoint().exchange(harness, conversation, cleartext: false)
            #expect(HTTP2StreamLimitTests.announcedLimits(frames) == [10, 1, 10])
            #expect(HTTP2StreamLimitTests.refused(frames) == [5])
            #expect(try Self.statuses(frames) == [1: "200", 3: "200", 7: "200"])
            #expect(Self.recorded(harness, first: 400, count: 4) == [1, 3, 7])
        }
    }

    @Test func anErrorBurstAnswersItsLengthWithOneStatusAndRecordsNothing() async throws {
        var faults = HTTP2EndpointConfiguration.Faults()
        faults.errorBurstRate = 1
        faults.errorBurstLength = 3
        faults.retryAfterSeconds = 2
        try await Self.run(faults) { harness in
            let frames = try await Endpoint().exchange(harness, Self.pipelined(4, first: 500), cleartext: false)
            let answers = try Endpoint.answers(frames)
            let statuses = [1, 3, 5, 7].map { answers[$0]?.first(name: ":status") }
            #expect(statuses.allSatisfy { ["429", "500", "503"].contains($0) }, "\(statuses)")
            #expect(statuses[0] == statuses[1] && statuses[1] == statuses[2], "one burst: \(statuses)")
            for stream: UInt32 in [1, 3, 5, 7] where answers[stream]?.first(name: ":status") == "429" {
                #expect(answers[stream]?.first(name: "retry-after") == "2")
            }
            #expect(Self.recorded(harness, first: 500, count: 4).isEmpty)
        }
    }

    /// Bursts drawn from the plan's seed: the same statuses in the same order on every run, some of them errors
    /// and some accepted.
    @Test func burstsAreRepeatable() async throws {
        var faults = HTTP2EndpointConfiguration.Faults()
        faults.errorBurstRate = 0.2
        faults.errorBurstLength = 2
        var runs: [[String?]] = []
        for _ in 0..<2 {
            runs.append(
                try await Self.run(faults, seed: 11) { harness in
                    let frames = try await Endpoint().exchange(
                        harness,
                        Self.pipelined(10, first: 600),
                        cleartext: false
                    )
                    let statuses = try Self.statuses(frames)
                    let accepted = statuses.filter { $0.value == "200" }.keys.sorted()
                    #expect(Self.recorded(harness, first: 600, count: 10) == accepted)
                    return (0..<10).map { statuses[UInt32(2 * $0 + 1)] }
                }
            )
        }
        #expect(runs[0] == runs[1])
        #expect(runs[0].contains("200") && runs[0].contains { $0 != "200" }, "\(runs[0])")
    }
}
