import APNSWire
import Foundation
import SalvoTestTraits
import Testing

@testable import SalvoSimulator

/// The device side of Live Activity pushes as a value, without sockets: pushes arriving out of order show the
/// latest timestamp, an older (or equally old) one is counted and replaces nothing, `end` ends the activity, and
/// the broadcast faults choose the same broadcasts whatever order requests arrive in.
@Suite(.tags(.pure), .runs(.pure)) struct LiveActivityBoardTests {
    static let first = try! DeviceToken(bytes: TestTokens.token(1))
    static let second = try! DeviceToken(bytes: TestTokens.token(2))

    static func payload(_ timestamp: Int64, _ event: String, score: Int? = nil) -> [UInt8] {
        let state = score.map { #","content-state":{"score":\#($0),"home":"Lions"}"# } ?? ""
        return Array(#"{"aps":{"timestamp":\#(timestamp),"event":"\#(event)"\#(state)}}"#.utf8)
    }

    @Test func theLatestTimestampWinsWhateverOrderPushesArriveIn() throws {
        var board = LiveActivityBoard()
        let pushes: [(Int64, String, Int?, LiveActivityBoard.Outcome)] = [
            (200, "update", 2, .shown),
            // Sent before the one shown, arriving after it: recorded, not shown.
            (100, "update", 1, .staleIgnored),
            // The same time as the one shown is not newer either.
            (200, "update", 9, .staleIgnored),
            (300, "update", 3, .shown),
            (250, "update", 7, .staleIgnored),
        ]
        for (timestamp, event, score, outcome) in pushes {
            let push = LiveActivityPush.parse(Self.payload(timestamp, event, score: score))
            #expect(board.receive(push, token: Self.first) == outcome, "\(timestamp)")
        }
        let state = try #require(board.state(token: Self.first))
        #expect(state.timestamp == 300 && state.event == "update" && !state.ended)
        #expect(state.contentState == #"{"home":"Lions","score":3}"#)
        #expect(state.arrivals == 5 && state.staleIgnored == 3 && state.ignoredAfterEnd == 0)
        #expect(board.state(token: Self.second) == nil)
        var counters = LiveActivityCounters()
        counters.arrivals = 5
        counters.shown = 2
        counters.staleIgnored = 3
        counters.activities = 1
        #expect(board.counters == counters)
    }

    @Test func anEndedActivityShowsNoLaterUpdateAndAStaleEndEndsNothing() throws {
        var board = LiveActivityBoard()
        #expect(
            board.receive(LiveActivityPush.parse(Self.payload(100, "start", score: 0)), token: Self.second) == .shown
        )
        // An end older than the update shown arrives late: the activity goes on.
        #expect(
            board.receive(LiveActivityPush(timestamp: 150, event: .update, contentState: "1"), token: Self.second)
                == .shown
        )
        #expect(board.receive(LiveActivityPush(timestamp: 120, event: .end), token: Self.second) == .staleIgnored)
        #expect(board.state(token: Self.second)?.ended == false)
        // An update without a content state keeps the one shown.
        #expect(board.receive(LiveActivityPush(timestamp: 160, event: .update), token: Self.second) == .shown)
        #expect(board.state(token: Self.second)?.contentState == "1")
        #expect(
            board.receive(LiveActivityPush(timestamp: 200, event: .end, contentState: "final"), token: Self.second)
                == .shown
        )
        // Later updates, even newer ones, are not shown on an ended activity.
        #expect(
            board.receive(LiveActivityPush(timestamp: 300, event: .update, contentState: "late"), token: Self.second)
                == .ignoredAfterEnd
        )
        #expect(board.receive(LiveActivityPush(timestamp: 50, event: .update), token: Self.second) == .ignoredAfterEnd)
        // An unreadable payload is counted and changes nothing.
        #expect(
            board.receive(LiveActivityPush.parse(Array(#"{"aps":{"event":"update"}}"#.utf8)), token: Self.second)
                == .unreadable
        )
        let ended = try #require(board.state(token: Self.second))
        #expect(ended.ended && ended.timestamp == 200 && ended.contentState == "final" && ended.event == "end")
        #expect(ended.arrivals == 8 && ended.ignoredAfterEnd == 2 && ended.staleIgnored == 1)
        // A push-to-start newer than the end begins a new activity.
        #expect(
            board.receive(LiveActivityPush(timestamp: 400, event: .start, contentState: "next"), token: Self.second)
                == .shown
        )
        #expect(board.state(token: Self.second)?.ended == false)
        #expect(board.counters.ended == 1 && board.counters.shown == 5 && board.counters.unreadable == 1)
    }

    @Test func payloadsAreReadAsDevicesReadThem() {
        #expect(
            LiveActivityPush.parse(Self.payload(5, "update", score: 1))?.contentState == #"{"home":"Lions","score":1}"#
        )
        #expect(LiveActivityPush.parse(Array(#"{"aps":{"timestamp":5,"event":"pause"}}"#.utf8)) == nil)
        #expect(LiveActivityPush.parse(Array(#"{"aps":{"timestamp":"5","event":"end"}}"#.utf8)) == nil)
        #expect(LiveActivityPush.parse(Array("not json".utf8)) == nil)
        #expect(LiveActivityPush.parse(Array(#"{"aps":{"timestamp":5,"event":"end"}}"#.utf8))?.event == .end)
    }

    /// The broadcast faults draw per channel and attempt, never by arrival order: the same channels lose, repeat and
    /// refuse the same broadcasts, and a refused channel is taken on a later attempt.
    @Test func broadcastFaultsAreKeyedByChannelNotArrivalOrder() {
        let faults = BroadcastFaults(tooManyRequestsRate: 0.3, lostFraction: 0.1, duplicatedFraction: 0.1)
        let channels = (1...400).map { ChannelBook.channelID(serial: UInt64($0), seed: 9) }
        func fates(_ order: [String]) -> [String: BroadcastFaults.Fate] {
            Dictionary(uniqueKeysWithValues: order.map { ($0, faults.fate(channel: $0, attempt: 0, seed: 9)) })
        }
        #expect(fates(channels) == fates(channels.reversed()))
        let first = fates(channels)
        let refused = first.values.filter { if case .refuse = $0 { true } else { false } }.count
        #expect((60...180).contains(refused), "\(refused) of 400 refused")
        let lost = first.values.filter { $0 == .accept(lost: true, duplicated: false) }.count
        #expect(lost > 0)
        // Every channel is taken within a few attempts.
        for channel in channels {
            let taken = (0..<12).contains { attempt in
                if case .accept = faults.fate(channel: channel, attempt: attempt, seed: 9) { return true }
                return false
            }
            #expect(taken, "\(channel)")
        }
        // Another seed chooses other channels.
        let other = Dictionary(
            uniqueKeysWithValues: channels.map { ($0, faults.fate(channel: $0, attempt: 0, seed: 10)) }
        )
        #expect(other != first)
    }
}
