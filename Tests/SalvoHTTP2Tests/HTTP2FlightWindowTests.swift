import SalvoTestTraits
import Testing

@testable import SalvoHTTP2

/// A connection's flight window after 429s (`HTTP2FlightWindow`), as a value: halved per burst, grown additively
/// by accepted answers, gone at the ceiling.
@Suite(.tags(.pure), .runs(.pure)) struct HTTP2FlightWindowTests {
    @Test func withoutA429ThereIsNoWindow() {
        var window = HTTP2FlightWindow(additiveIncrease: 8)
        #expect(window.streams == nil && window.limit == Int.max)
        window.accepted(ceiling: 100)
        #expect(window.streams == nil, "accepted answers grow no window that is not there")
        do {
            let cuts = window.takeCuts()
            #expect(cuts.cuts == 0 && cuts.smallest == nil)
        }
    }

    @Test func a429HalvesTheFlightItBelongedTo() {
        var window = HTTP2FlightWindow(additiveIncrease: 8)
        window.tooManyRequests(streamID: 41, flight: 64, nextStreamID: 101)
        #expect(window.streams == 32 && window.limit == 32)
        do {
            let cuts = window.takeCuts()
            #expect(cuts.cuts == 1 && cuts.smallest == 32)
        }
        do {
            let cuts = window.takeCuts()
            #expect(cuts.cuts == 0 && cuts.smallest == nil, "taken once")
        }
    }

    @Test func aBurstOf429sCutsOnceUntilAStreamWrittenAfterTheCutIsRefused() {
        var window = HTTP2FlightWindow(additiveIncrease: 8)
        window.tooManyRequests(streamID: 41, flight: 64, nextStreamID: 101)
        // Streams written before the cut (ids below 101) belong to the flight the cut answered for.
        window.tooManyRequests(streamID: 43, flight: 32, nextStreamID: 105)
        window.tooManyRequests(streamID: 99, flight: 32, nextStreamID: 105)
        #expect(window.streams == 32)
        window.tooManyRequests(streamID: 101, flight: 32, nextStreamID: 121)
        #expect(window.streams == 16)
        do {
            let cuts = window.takeCuts()
            #expect(cuts.cuts == 2 && cuts.smallest == 16)
        }
    }

    @Test func theWindowNeverFallsBelowOneStream() {
        var window = HTTP2FlightWindow(additiveIncrease: 8)
        window.tooManyRequests(streamID: 1, flight: 1, nextStreamID: 3)
        #expect(window.streams == 1 && window.limit == 1)
        window.tooManyRequests(streamID: 3, flight: 1, nextStreamID: 5)
        #expect(window.limit == 1)
    }

    @Test func acceptedAnswersGrowItByTheIncreasePerWindowsWorthUntilTheCeiling() {
        var window = HTTP2FlightWindow(additiveIncrease: 8)
        window.tooManyRequests(streamID: 1, flight: 16, nextStreamID: 3)
        #expect(window.streams == 8)
        // A window's worth of answers (8) grows it by about 8 streams.
        for _ in 0..<8 { window.accepted(ceiling: 100) }
        #expect((14...16).contains(window.streams ?? 0), "\(window.streams as Any)")
        while let streams = window.streams, streams < 50 { window.accepted(ceiling: 100) }
        #expect(window.streams != nil)
        // Reaching the ceiling (the server's limit and our cap) removes the window.
        for _ in 0..<1000 { window.accepted(ceiling: 60) }
        #expect(window.streams == nil && window.limit == Int.max)
    }
}
