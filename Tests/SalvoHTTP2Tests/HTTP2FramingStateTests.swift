import APNSWire
import NIOHPACK
import SalvoTestTraits
import Testing

@testable import SalvoHTTP2

/// The wire engine's frame-level state, driven with frame events alone: no channel, no clock (nothing in it
/// depends on time).
@Suite(.tags(.pure), .runs(.pure)) struct HTTP2FramingStateTests {
    typealias Framing = HTTP2FramingState

    @Test func theClientAnnouncesItsWindowAndRaisesTheConnectionWindowOnOpening() {
        let framing = Framing(windowTarget: 1 << 20)
        let settings = Dictionary(uniqueKeysWithValues: framing.initialSettings.map { ($0.0, $0.1) })
        #expect(settings[.enablePush] == 0)
        #expect(settings[.maxConcurrentStreams] == 0)
        #expect(settings[.initialWindowSize] == 1 << 20)
        #expect(settings[.maxHeaderListSize] == UInt32(HTTP2AnswerDecoder.maximumHeaderList))
        #expect(framing.initialWindowUpdate == 1 << 20)
        #expect(framing.sendWindow == 65_535)
        #expect(framing.streamWindow == 65_535)
    }

    @Test func settingsPassTheLimitsOnAndTheLastValueOfAParameterCounts() throws {
        var framing = Framing()
        let unknown = HTTP2SettingIdentifier(rawValue: 0x99)
        let frame: [(parameter: HTTP2SettingIdentifier, value: UInt32)] = [
            (.maxConcurrentStreams, 10), (.initialWindowSize, 1_000), (.maxConcurrentStreams, 20),
            (.maxFrameSize, 32_768), (unknown, 7),
        ]
        let changed = try framing.settingsReceived(frame)
        #expect(changed == Framing.Settings(maximumConcurrentStreams: 20, initialWindowSize: 1_000))
        #expect(framing.streamWindow == 1_000)
        #expect(framing.peerMaximumFrameSize == 32_768)
        // Frames are still cut at the size every peer takes.
        #expect(HTTP2WireConnectionHandler.maximumFrameSize == 16_384)
        #expect(try framing.settingsReceived([]) == Framing.Settings())
        #expect(framing.streamWindow == 1_000, "SETTINGS that do not name the window leave it")
    }

    @Test func anInitialWindowOver2To31IsAFlowControlError() {
        var framing = Framing()
        #expect(throws: HTTP2ConnectionError(.flowControlError, "SETTINGS_INITIAL_WINDOW_SIZE of 2147483648")) {
            try framing.settingsReceived([(parameter: .initialWindowSize, value: UInt32(Int32.max) + 1)])
        }
        #expect(throws: Never.self) {
            try framing.settingsReceived([(parameter: .initialWindowSize, value: UInt32(Int32.max))])
        }
        #expect(framing.streamWindow == Int(Int32.max))
    }

    @Test func theHeaderTableSizeChangesOnlyWhenItDiffersAndNeverAboveTheEncodersDefault() throws {
        var framing = Framing()
        let size = HPACKEncoder.defaultDynamicTableSize
        #expect(
            try framing.settingsReceived([(parameter: .headerTableSize, value: UInt32(size))]).headerTableSize == nil
        )
        #expect(try framing.settingsReceived([(parameter: .headerTableSize, value: 100)]).headerTableSize == 100)
        #expect(try framing.settingsReceived([(parameter: .headerTableSize, value: 100)]).headerTableSize == nil)
        #expect(try framing.settingsReceived([(parameter: .headerTableSize, value: 0)]).headerTableSize == 0)
        #expect(try framing.settingsReceived([(parameter: .headerTableSize, value: 1 << 20)]).headerTableSize == size)
        #expect(framing.headerTableSize == size)
    }

    @Test func connectionWindowUpdatesOpenTheSendWindowUpTo2To31Minus1() throws {
        var framing = Framing()
        #expect(try framing.windowUpdateReceived(streamID: 0, increment: 1_000, streamInFlight: false) == .none)
        #expect(framing.sendWindow == 66_535)
        let rest = Int(Int32.max) - 66_535
        #expect(try framing.windowUpdateReceived(streamID: 0, increment: rest, streamInFlight: false) == .none)
        #expect(throws: HTTP2ConnectionError(.flowControlError, "the connection window over 2^31 - 1")) {
            try framing.windowUpdateReceived(streamID: 0, increment: 1, streamInFlight: false)
        }
    }

    @Test func aZeroIncrementOnAStreamInFlightResetsItAndIsIgnoredOtherwise() throws {
        var framing = Framing()
        #expect(
            try framing.windowUpdateReceived(streamID: 3, increment: 0, streamInFlight: true)
                == .resetStream(3, .protocolError)
        )
        #expect(try framing.windowUpdateReceived(streamID: 5, increment: 0, streamInFlight: false) == .none)
        // Streams send their DATA whole: a stream's own WINDOW_UPDATE changes nothing.
        let before = framing
        #expect(try framing.windowUpdateReceived(streamID: 3, increment: 10, streamInFlight: true) == .none)
        #expect(framing == before)
    }

    @Test func theReceiveWindowIsToppedUpOnceHalfOfItIsUsed() {
        var framing = Framing(windowTarget: 1_000)
        framing.dataReceived(flowControlled: 300)
        #expect(framing.readComplete() == .none)
        framing.dataReceived(flowControlled: 250)
        #expect(framing.readComplete() == .windowUpdate(increment: 550))
        #expect(framing.received == 0)
        #expect(framing.readComplete() == .none)
    }

    @Test func theNIOEnginesCountedWindowIsToppedUpToTheTargetBelowHalf() {
        let framing = Framing(windowTarget: 1_000)
        #expect(framing.inboundWindowChanged(to: 1_000) == .none)
        #expect(framing.inboundWindowChanged(to: 500) == .none)
        #expect(framing.inboundWindowChanged(to: 499) == .windowUpdate(increment: 501))
        #expect(framing.inboundWindowChanged(to: 0) == .windowUpdate(increment: 1_000))
    }

    @Test func oneFixedPayloadIsWrittenOnlyAsOftenAsTheSendWindowHoldsItWhole() throws {
        var framing = Framing()
        #expect(framing.admits(room: 100, fixedBody: 1_000, longestBody: 0) == (65, Int.max))
        framing.wrote(bodyBytes: 65_000)
        #expect(framing.sendWindow == 535)
        #expect(framing.admits(room: 100, fixedBody: 1_000, longestBody: 0) == (0, 0), "no room for a whole body")
        #expect(framing.admits(room: 100, fixedBody: 500, longestBody: 0) == (1, Int.max))
        _ = try framing.windowUpdateReceived(streamID: 0, increment: 10_000, streamInFlight: false)
        #expect(framing.admits(room: 4, fixedBody: 1_000, longestBody: 0) == (4, Int.max), "the machine's room binds")
        #expect(framing.admits(room: 0, fixedBody: 1_000, longestBody: 0) == (0, 0))
    }

    @Test func rowsOwnBodiesAreCheckedAtTheLongestAndBoundedByTheSendWindowInBytes() throws {
        var framing = Framing()
        #expect(framing.admits(room: 100, fixedBody: nil, longestBody: 5_000) == (100, 65_535))
        framing.wrote(bodyBytes: 65_535)
        #expect(framing.admits(room: 100, fixedBody: nil, longestBody: 5_000) == (0, 0), "an empty send window")
        // Empty bodies need no window.
        #expect(framing.admits(room: 100, fixedBody: 0, longestBody: 0) == (100, Int.max))
    }

    @Test func aStreamWindowSmallerThanOneBodyAdmitsNothing() throws {
        var framing = Framing()
        _ = try framing.settingsReceived([(parameter: .initialWindowSize, value: 999)])
        #expect(framing.admits(room: 100, fixedBody: 1_000, longestBody: 0) == (0, 0))
        #expect(framing.admits(room: 100, fixedBody: nil, longestBody: 1_000) == (0, 0))
        #expect(framing.admits(room: 100, fixedBody: 999, longestBody: 0) == (65, Int.max))
        _ = try framing.settingsReceived([(parameter: .initialWindowSize, value: 0)])
        #expect(framing.admits(room: 100, fixedBody: 0, longestBody: 0) == (100, Int.max), "bodiless requests go")
    }
}
