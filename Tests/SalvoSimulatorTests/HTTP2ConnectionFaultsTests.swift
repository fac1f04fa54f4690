import SalvoTestTraits
import Testing

@testable import SalvoSimulator

/// The fault plan's decisions for one HTTP/2 connection, without a connection: the same seed and serial number
/// give the same decisions, and each fault comes when the plan says.
@Suite(.tags(.pure), .runs(.pure)) struct HTTP2ConnectionFaultsTests {
    static func faults(
        _ configure: (inout HTTP2EndpointConfiguration.Faults) -> Void = { _ in }
    ) -> HTTP2ConnectionFaults {
        var faults = HTTP2EndpointConfiguration.Faults()
        configure(&faults)
        return HTTP2ConnectionFaults(faults: faults, maximumConcurrentStreams: 100, seed: 7, connection: 3)
    }

    @Test func aTokenConnectionStartsWithOneStreamAndAnAcceptedRequestLiftsIt() {
        let faults = Self.faults()
        #expect(faults.prefaceLimit(tokenAuthenticated: true) == 1)
        #expect(faults.prefaceLimit(tokenAuthenticated: false) == 100)
        #expect(faults.limit(afterStatus: 200) == 100)
        #expect(faults.limit(afterStatus: 400) == nil)
        let dropping = Self.faults { $0.dropToOneAfterRejection = true }
        #expect(dropping.limit(afterStatus: 429) == 1)
        let plain = Self.faults { $0.tokenConnectionsStartWithOneStream = false }
        #expect(plain.prefaceLimit(tokenAuthenticated: true) == 100)
    }

    @Test func theSameSeedAndConnectionGiveTheSameDecisions() {
        func decisions() -> [String] {
            var faults = Self.faults {
                $0.errorBurstRate = 0.05
                $0.errorBurstLength = 3
                $0.tooManyRequestsRate = 0.05
                $0.internalServerErrorRate = 0.05
                $0.serviceUnavailableRate = 0.05
                $0.resetRate = 0.05
                $0.goAwayRate = 0.02
                $0.shrinkRate = 0.02
            }
            var seen: [String] = []
            for request in 1...500 {
                if faults.resets(quiet: true) { seen.append("\(request) reset") }
                if let error = faults.injectedError() { seen.append("\(request) \(error.status)") }
                let goAway = faults.afterRequest(request, goAwaySent: false) { seen.append("\(request) limit \($0)") }
                if goAway { seen.append("\(request) goaway") }
            }
            return seen
        }
        let first = decisions()
        #expect(first == decisions())
        #expect(first.contains { $0.hasSuffix("reset") })
        #expect(first.contains { $0.hasSuffix("goaway") })
        #expect(first.contains { $0.hasSuffix("limit 1") })
        // Another connection draws another sequence.
        var other = HTTP2ConnectionFaults(
            faults: Self.faults().faults,
            maximumConcurrentStreams: 100,
            seed: 7,
            connection: 4
        )
        var this = Self.faults()
        let (otherNext, thisNext) = (other.random.next(), this.random.next())
        #expect(otherNext != thisNext)
    }

    @Test func noRateDrawsNothing() {
        var faults = Self.faults()
        var untouched = faults.random
        let reset = faults.resets(quiet: true)
        let error = faults.injectedError()
        let goAway = faults.afterRequest(1, goAwaySent: false) { _ in Issue.record("no limit announced") }
        #expect(!reset && error == nil && !goAway)
        let next = faults.random.next()
        #expect(next == untouched.next())
    }

    @Test func aResetIsDrawnOnlyWhileNoAnswerWaits() {
        var faults = Self.faults { $0.resetRate = 1 }
        let busy = faults.resets(quiet: false)
        let quiet = faults.resets(quiet: true)
        #expect(!busy)
        #expect(quiet)
    }

    @Test func aBurstAnswersItsLengthOfRequestsWithOneStatus() throws {
        var faults = Self.faults {
            $0.errorBurstRate = 1
            $0.errorBurstLength = 4
            $0.retryAfterSeconds = 9
        }
        let drawn = faults.injectedError()
        let first = try #require(drawn)
        #expect([429, 500, 503].contains(first.status))
        #expect(first.retryAfter == (first.status == 429 ? 9 : nil))
        for _ in 0..<3 {
            let next = faults.injectedError()
            #expect(next == first)
        }
    }

    @Test func eachRateAnswersItsStatus() {
        var tooMany = Self.faults {
            $0.tooManyRequestsRate = 1
            $0.retryAfterSeconds = 5
        }
        let tooManyError = tooMany.injectedError()
        #expect(tooManyError == .refused(.tooManyRequests, retryAfter: 5))
        var failing = Self.faults { $0.internalServerErrorRate = 1 }
        let failingError = failing.injectedError()
        #expect(failingError == .refused(.internalServerError))
        var unavailable = Self.faults { $0.serviceUnavailableRate = 1 }
        let unavailableError = unavailable.injectedError()
        #expect(unavailableError == .refused(.serviceUnavailable))
    }

    @Test func theLimitShrinksAndComesBackAtTheRequestsNamed() {
        var faults = Self.faults {
            $0.shrinkAfterStreams = 2
            $0.shrinkTo = 3
            $0.restoreAfterStreams = 4
        }
        var announced: [Int: [Int]] = [:]
        for request in 1...5 {
            _ = faults.afterRequest(request, goAwaySent: false) { announced[request, default: []].append($0) }
            if request == 2 { #expect(faults.fullLimit == 3) }
        }
        #expect(announced == [2: [3], 4: [100]])
        #expect(faults.fullLimit == 100)
    }

    @Test func onlyTheFirstConnectionsNamedShrink() {
        var faults = HTTP2EndpointConfiguration.Faults()
        faults.shrinkAfterStreams = 2
        faults.shrinkTo = 3
        faults.shrinkConnections = 3
        // Connections 1 to 3 shrink at their second request; the fourth and later keep the endpoint's limit.
        for (connection, shrinks) in [(UInt32(1), true), (3, true), (4, false), (9, false)] {
            var connectionFaults = HTTP2ConnectionFaults(
                faults: faults,
                maximumConcurrentStreams: 100,
                seed: 7,
                connection: connection
            )
            var announced: [Int] = []
            for request in 1...3 {
                _ = connectionFaults.afterRequest(request, goAwaySent: false) { announced.append($0) }
            }
            #expect(announced == (shrinks ? [3] : []), "connection \(connection)")
            #expect(connectionFaults.fullLimit == (shrinks ? 3 : 100), "connection \(connection)")
        }
    }

    @Test func aSeededDropLastsItsStreams() {
        var faults = Self.faults {
            $0.shrinkRate = 1
            $0.shrinkTo = 2
            $0.shrinkForStreams = 3
        }
        var announced: [Int: [Int]] = [:]
        for request in 1...5 {
            _ = faults.afterRequest(request, goAwaySent: false) { announced[request, default: []].append($0) }
        }
        // Dropped at 1, back at 4, dropped again at once the next request (the rate is 1).
        #expect(announced == [1: [2], 4: [100], 5: [2]])
    }

    @Test func goAwayComesAfterTheStreamsNamedAndOnlyOnce() {
        var faults = Self.faults { $0.goAwayAfterStreams = 3 }
        let before = faults.afterRequest(2, goAwaySent: false) { _ in }
        let at = faults.afterRequest(3, goAwaySent: false) { _ in }
        let again = faults.afterRequest(3, goAwaySent: true) { _ in }
        #expect(!before && at && !again)
    }
}
