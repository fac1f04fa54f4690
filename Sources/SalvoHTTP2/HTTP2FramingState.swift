import APNSWire
import NIOHPACK

/// The frame-level protocol state of one `wire` engine connection (RFC 9113 §5.2, §6.5, §6.9), with no I/O: the
/// connection's send window, the peer's stream window, the peer's SETTINGS that shape what is written (concurrent
/// streams, initial window, frame size, header table size), the receive window's top-ups and the flow-control
/// errors. swift-nio-http2 keeps the same facts in its connection state machine; here they sit in a value the
/// `HTTP2WireConnectionHandler` feeds with the frames it reads and the bytes it writes, and whose answers it carries
/// out. The `nio` engine needs none of it: `NIOHTTP2Handler` keeps its own.
///
/// Streams send all their DATA at once, so no per-stream send window is kept: a request is written only when its
/// whole body fits both the connection's send window and a stream's initial window. A peer whose stream window is
/// smaller than one payload never gets a request (`HTTP2ConnectionMachine` stops the job from the same SETTINGS).
///
/// A value owned by one driver, confined to its event loop.
struct HTTP2FramingState: Equatable {
    /// What the driver does after a frame event.
    enum Action: Equatable {
        case none
        /// Write RST_STREAM with this code, and tell the connection machine the stream closed with it.
        case resetStream(UInt32, HTTP2ConnectionError.Code)
        /// Write WINDOW_UPDATE on the connection (stream 0) with this increment.
        case windowUpdate(increment: Int)
    }

    /// What one SETTINGS frame changed, for the driver: acknowledge it (always), pass the limits on to the
    /// connection machine, and resize the HPACK encoder's table when `headerTableSize` is set.
    struct Settings: Equatable {
        var maximumConcurrentStreams: Int?
        var initialWindowSize: Int?
        /// The encoder's new dynamic table size (a size update starts its next block); nil: unchanged.
        var headerTableSize: Int?
    }

    /// The connection's and every stream's window before SETTINGS or WINDOW_UPDATE change them (§6.9.2).
    static let defaultWindow = 65_535
    /// The largest frame payload every peer takes: `SETTINGS_MAX_FRAME_SIZE` is never below 16,384 (§4.2, §6.5.2),
    /// and a larger one announced is not needed, so it is not followed.
    static let maximumFrameSize = 16_384
    /// The largest flow-control window (§6.9.1).
    static let maximumWindow = Int(Int32.max)

    /// The inbound connection and stream window this client announces; the connection's is topped up when half
    /// is used.
    let windowTarget: Int

    /// The connection's send window: 65,535 until WINDOW_UPDATE opens it.
    private(set) var sendWindow = Self.defaultWindow
    /// The peer's `SETTINGS_INITIAL_WINDOW_SIZE`: each stream's send window.
    private(set) var streamWindow = Self.defaultWindow
    /// The peer's `SETTINGS_MAX_FRAME_SIZE`, recorded (frames are cut at `maximumFrameSize`, which every peer takes).
    private(set) var peerMaximumFrameSize = Self.maximumFrameSize
    /// The HPACK dynamic table size the encoder is allowed: the peer's `SETTINGS_HEADER_TABLE_SIZE`, at most the
    /// encoder's default (a larger table is not needed).
    private(set) var headerTableSize = HPACKEncoder.defaultDynamicTableSize
    /// Inbound flow-controlled DATA since the last WINDOW_UPDATE sent.
    private(set) var received = 0

    init(windowTarget: Int = 1 << 20) {
        self.windowTarget = windowTarget
    }

    // MARK: Opening

    /// The client's SETTINGS after the preface: no push, no streams from the server, `windowTarget` per stream,
    /// answers' header lists up to `HTTP2AnswerDecoder.maximumHeaderList`.
    var initialSettings: [(HTTP2SettingIdentifier, UInt32)] {
        [
            (.enablePush, 0),
            (.maxConcurrentStreams, 0),
            (.initialWindowSize, UInt32(self.windowTarget)),
            (.maxHeaderListSize, UInt32(HTTP2AnswerDecoder.maximumHeaderList)),
        ]
    }

    /// The WINDOW_UPDATE after the client's SETTINGS: raises the connection window from 64 KiB to `windowTarget`,
    /// so error bodies never stall.
    var initialWindowUpdate: Int { self.windowTarget }

    // MARK: Reading

    /// The peer's SETTINGS. A `SETTINGS_INITIAL_WINDOW_SIZE` above 2^31 − 1 is a connection error
    /// (FLOW_CONTROL_ERROR, §6.5.2); the last value of a parameter named twice counts.
    mutating func settingsReceived(
        _ settings: some Sequence<(parameter: HTTP2SettingIdentifier, value: UInt32)>
    ) throws(HTTP2ConnectionError) -> Settings {
        var result = Settings()
        for (parameter, value) in settings {
            switch parameter {
            case .maxConcurrentStreams:
                result.maximumConcurrentStreams = Int(value)
            case .initialWindowSize:
                guard value <= UInt32(Self.maximumWindow) else {
                    throw HTTP2ConnectionError(.flowControlError, "SETTINGS_INITIAL_WINDOW_SIZE of \(value)")
                }
                self.streamWindow = Int(value)
                result.initialWindowSize = Int(value)
            case .maxFrameSize:
                self.peerMaximumFrameSize = Int(value)
            case .headerTableSize:
                let size = min(Int(value), HPACKEncoder.defaultDynamicTableSize)
                if size != self.headerTableSize {
                    self.headerTableSize = size
                    result.headerTableSize = size
                }
            default:
                break
            }
        }
        return result
    }

    /// WINDOW_UPDATE. On the connection it opens the send window (past 2^31 − 1 is a connection error,
    /// FLOW_CONTROL_ERROR, §6.9.1). On a stream only an increment of 0 matters: a stream error (§6.9), so that
    /// stream is reset (PROTOCOL_ERROR) when it is still in flight — its answer will not come, the row may or may not
    /// have been delivered, and the connection goes on; a stream already ended is left be.
    mutating func windowUpdateReceived(
        streamID: UInt32,
        increment: Int,
        streamInFlight: Bool
    ) throws(HTTP2ConnectionError) -> Action {
        if streamID == 0 {
            self.sendWindow += increment
            guard self.sendWindow <= Self.maximumWindow else {
                throw HTTP2ConnectionError(.flowControlError, "the connection window over 2^31 - 1")
            }
            return .none
        }
        guard increment == 0, streamInFlight else { return .none }
        return .resetStream(streamID, .protocolError)
    }

    /// DATA read: `flowControlled` bytes (the whole frame payload, padding included) count against the receive
    /// window.
    mutating func dataReceived(flowControlled: Int) {
        self.received += flowControlled
    }

    /// The end of a read batch: the connection's receive window is topped up once half of it is used.
    mutating func readComplete() -> Action {
        guard self.received >= self.windowTarget / 2 else { return .none }
        let increment = self.received
        self.received = 0
        return .windowUpdate(increment: increment)
    }

    /// The inbound connection window as the `nio` engine's `NIOHTTP2Handler` counts it (it keeps the count; this
    /// decides the top-up): below half the target, WINDOW_UPDATE raises it back to the target.
    func inboundWindowChanged(to size: Int) -> Action {
        guard size < self.windowTarget / 2 else { return .none }
        return .windowUpdate(increment: self.windowTarget - size)
    }

    // MARK: Writing

    /// How many requests may be written now, and how many body bytes they may carry together, given the
    /// connection machine's `room` and the bodies: `fixedBody`, the length every request's DATA has (the job's one
    /// payload), or nil with `longestBody`, the longest a row's own body may be (a payload template).
    ///
    /// A stream's DATA goes whole: nothing is written while a stream window is smaller than one body (the
    /// connection machine stops the job when SETTINGS announce one), and, with one payload for all, no more
    /// requests than the send window holds whole bodies.
    func admits(room: Int, fixedBody: Int?, longestBody: Int) -> (requests: Int, bytes: Int) {
        let dataLength = fixedBody ?? longestBody
        var room = room
        if dataLength > 0 {
            guard dataLength <= self.streamWindow else { return (0, 0) }
            if fixedBody != nil { room = min(room, self.sendWindow / dataLength) }
        }
        guard room > 0, self.sendWindow > 0 || dataLength == 0 else { return (0, 0) }
        return (room, fixedBody == nil ? self.sendWindow : Int.max)
    }

    /// Request bodies of `bytes` in all were written: they used the send window.
    mutating func wrote(bodyBytes bytes: Int) {
        self.sendWindow -= bytes
    }
}
