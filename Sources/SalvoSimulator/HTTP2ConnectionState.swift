import APNSWire
import DequeModule
import NIOCore
import NIOHPACK

/// What the frames of one connection to the simulator's HTTP/2 endpoint mean, server side: the settings both ways,
/// the streams (their ids, the limit the client has acknowledged, header blocks decoded with NIOHPACK and payloads
/// assembled into requests), and flow control both ways (answer bodies wait for window).
///
/// What it enforces of RFC 9113: odd and increasing client stream ids, `SETTINGS_MAX_CONCURRENT_STREAMS` once the
/// client has acknowledged it (excess streams are refused with REFUSED_STREAM), both directions of flow control,
/// and connection errors thrown for the caller to answer with GOAWAY (`fail`).
///
/// A value with no I/O: frames go in (`receive`, `open`), requests come out, and the frames it answers with
/// (`HTTP2FrameWriter`) collect in `output`, which the connection (`HTTP2GatewayHandler`) sends and empties.
struct HTTP2ConnectionState {
    /// A stream's request: its header block, and its payload while it arrives.
    struct Request: Equatable {
        let streamID: UInt32
        var headers: HPACKHeaders
        /// The payload, kept up to `maximumKeptPayload` bytes; `payloadBytes` counts all of it. A payload in one
        /// DATA frame (the usual case) stays a slice of the bytes read: no copy, no allocation.
        var payload = ByteBuffer()
        var payloadBytes = 0

        init(streamID: UInt32, headers: HPACKHeaders) {
            self.streamID = streamID
            self.headers = headers
        }

        mutating func keep(_ bytes: inout ByteBuffer) {
            self.payloadBytes += bytes.readableBytes
            let room = HTTP2ConnectionState.maximumKeptPayload - self.payload.readableBytes
            guard room > 0, let kept = bytes.readSlice(length: min(room, bytes.readableBytes)) else { return }
            if self.payload.readableBytes == 0 {
                self.payload = kept
            } else {
                self.payload.writeImmutableBuffer(kept)
            }
        }
    }

    /// What a frame received came to.
    enum Received: Equatable {
        /// Nothing for the caller (answered in `output`, if at all).
        case nothing
        /// HEADERS opening a stream whose id is valid: the caller decides about the connection (a reset), then
        /// calls `open`.
        case opening(streamID: UInt32, headers: HPACKHeaders, endStream: Bool)
        /// A stream's request is complete: the caller answers it (`writeAnswer`, `writeResponse`).
        case request(Request)
    }

    /// What became of a stream `open`ed.
    enum Opened: Equatable {
        /// Over the acknowledged limit: refused with REFUSED_STREAM.
        case refused
        /// Open, its request still arriving.
        case receiving
        /// Open, and its request complete.
        case request(Request)
    }

    /// An answer's body waiting for flow-control window.
    private struct BlockedBody {
        var streamID: UInt32
        var bytes: [UInt8]
        var window: Int
    }

    static let windowTarget = 1 << 20
    static let initialStreamWindow = 1 << 20
    static let maximumHeaderListSize = 16 << 10
    static let maximumKeptPayload = 8192
    /// The peer's SETTINGS_MAX_FRAME_SIZE as long as it announces none (RFC 9113 §6.5.2): answers never need more.
    static let maximumDataFrame = 16_384

    /// The frames to send, in order; the caller sends them and puts an empty buffer in their place.
    var output: ByteBuffer
    private var decoder: HPACKDecoder
    private var streams: [UInt32: Request] = [:]
    /// Streams opened and not yet answered (receiving, or waiting for a slow answer or for window).
    private(set) var openStreams = 0
    private(set) var lastStreamID: UInt32 = 0
    /// The stream limit the client has acknowledged, and limits sent but not yet acknowledged, oldest first.
    private var streamLimit = Int.max
    private var pendingLimits = Deque<Int>()
    /// The last limit announced (nil before the preface).
    private(set) var announcedLimit: Int?
    /// Requests complete so far.
    private(set) var requests = 0
    private var highestAnswered: UInt32 = 0
    /// The last stream our GOAWAY named; nil: none sent.
    private(set) var goAwayStreamID: UInt32?
    private(set) var peerSentGoAway = false
    /// Inbound flow control: bytes the client may still send, and bytes consumed since the last WINDOW_UPDATE.
    private var receiveWindow = 65_535
    private var consumed = 0
    /// Outbound flow control for answer bodies.
    private var sendWindow = 65_535
    private var peerInitialWindow = 65_535
    private var blocked = Deque<BlockedBody>()

    init(allocator: ByteBufferAllocator) {
        self.decoder = HPACKDecoder(
            allocator: allocator,
            maxDynamicTableSize: HPACKDecoder.maxDynamicTableSize,
            maxHeaderListSize: Self.maximumHeaderListSize
        )
        self.output = allocator.buffer(capacity: 16 << 10)
    }

    /// Whether an answer's body waits for window.
    var hasBlockedBodies: Bool { !self.blocked.isEmpty }

    /// After either side's GOAWAY, once every accepted stream is answered: the connection may close.
    var isDone: Bool { (self.goAwayStreamID != nil || self.peerSentGoAway) && self.openStreams == 0 }

    /// The server's SETTINGS (announcing `limit` streams) and the first WINDOW_UPDATE.
    mutating func writePreface(limit: Int) {
        HTTP2FrameWriter.settings(
            [
                (.maxConcurrentStreams, UInt32(min(limit, Int(Int32.max)))),
                (.initialWindowSize, UInt32(Self.initialStreamWindow)),
                (.maxHeaderListSize, UInt32(Self.maximumHeaderListSize)),
            ],
            into: &self.output
        )
        self.announcedLimit = limit
        self.pendingLimits.append(limit)
        HTTP2FrameWriter.windowUpdate(streamID: 0, increment: Self.windowTarget - 65_535, into: &self.output)
        self.receiveWindow = Self.windowTarget
    }

    /// Announces a new `SETTINGS_MAX_CONCURRENT_STREAMS` when it differs from the last one announced; the old one
    /// holds until the client acknowledges it.
    mutating func announce(_ limit: Int) {
        guard limit != self.announcedLimit else { return }
        HTTP2FrameWriter.settings([(.maxConcurrentStreams, UInt32(min(limit, Int(Int32.max))))], into: &self.output)
        self.announcedLimit = limit
        self.pendingLimits.append(limit)
    }

    /// The end of a read: the connection's window is topped up once half of it is consumed.
    mutating func readComplete() {
        guard self.consumed >= Self.windowTarget / 2 else { return }
        HTTP2FrameWriter.windowUpdate(streamID: 0, increment: self.consumed, into: &self.output)
        self.receiveWindow += self.consumed
        self.consumed = 0
    }

    // MARK: Frames

    mutating func receive(_ frame: HTTP2FrameReader.Frame) throws(HTTP2ConnectionError) -> Received {
        switch frame {
        case .headers(let streamID, var block, let endStream):
            // Decoded whatever becomes of the stream: the HPACK table must follow every block.
            let headers: HPACKHeaders
            do {
                headers = try self.decoder.decodeHeaders(from: &block)
            } catch {
                throw HTTP2ConnectionError(.compressionError, "cannot decode a header block: \(error)")
            }
            if self.streams[streamID] != nil {
                // Trailers: nothing of APNs' is in them.
                return endStream ? self.complete(streamID) : .nothing
            }
            // A new stream's id is above every one opened before (RFC 9113 §5.1.1): a stream answered, refused or
            // reset is closed, and a client that sends a request on it again (the same bytes twice, say) is broken.
            guard streamID > self.lastStreamID else {
                throw HTTP2ConnectionError(
                    .protocolError,
                    "HEADERS on stream \(streamID), not above the last stream opened (\(self.lastStreamID))"
                )
            }
            guard streamID & 1 == 1 else { throw HTTP2ConnectionError(.protocolError, "even stream id \(streamID)") }
            self.lastStreamID = streamID
            if let last = self.goAwayStreamID, streamID > last { return .nothing }
            return .opening(streamID: streamID, headers: headers, endStream: endStream)
        case .data(let streamID, var payload, let endStream, let flowControlled):
            self.receiveWindow -= flowControlled
            self.consumed += flowControlled
            guard self.receiveWindow >= 0 else {
                throw HTTP2ConnectionError(.flowControlError, "DATA beyond the connection window")
            }
            guard streamID <= self.lastStreamID else {
                throw HTTP2ConnectionError(.protocolError, "DATA on idle stream \(streamID)")
            }
            guard let index = self.streams.index(forKey: streamID) else { return .nothing }
            guard self.streams.values[index].payloadBytes + payload.readableBytes <= Self.initialStreamWindow else {
                self.streams.remove(at: index)
                HTTP2FrameWriter.resetStream(streamID, code: .flowControlError, into: &self.output)
                self.openStreams -= 1
                return .nothing
            }
            self.streams.values[index].keep(&payload)
            return endStream ? self.complete(streamID) : .nothing
        case .settings(let settings):
            for setting in settings {
                switch setting.parameter {
                case .initialWindowSize:  // changes the window of every open stream (§6.9.2)
                    guard setting.value <= 0x7FFF_FFFF else {
                        throw HTTP2ConnectionError(.flowControlError, "INITIAL_WINDOW_SIZE \(setting.value)")
                    }
                    let delta = Int(setting.value) - self.peerInitialWindow
                    self.peerInitialWindow = Int(setting.value)
                    for index in self.blocked.indices { self.blocked[index].window += delta }
                default:
                    break
                }
            }
            HTTP2FrameWriter.settingsAcknowledgement(into: &self.output)
            self.sendBlockedBodies()
        case .settingsAcknowledged:
            if let limit = self.pendingLimits.popFirst() { self.streamLimit = limit }
        case .ping(let data):
            HTTP2FrameWriter.pingAcknowledgement(data, into: &self.output)
        case .pingAcknowledged:
            break
        case .windowUpdate(let streamID, let increment):
            if streamID == 0 {
                self.sendWindow += increment
            } else if increment == 0 {
                // A stream error (RFC 9113 §6.9): the stream ends unanswered, the connection goes on.
                if self.dropStream(streamID) {
                    HTTP2FrameWriter.resetStream(streamID, code: .protocolError, into: &self.output)
                }
            } else {
                for index in self.blocked.indices where self.blocked[index].streamID == streamID {
                    self.blocked[index].window += increment
                }
            }
            self.sendBlockedBodies()
        case .resetStream(let streamID, _):
            _ = self.dropStream(streamID)
        case .goAway:
            self.peerSentGoAway = true
        }
        return .nothing
    }

    /// Opens the stream `receive` announced (`.opening`), unless the client has used every stream it may: until it
    /// acknowledges a new limit it may still use the old one (§6.5.3).
    mutating func open(streamID: UInt32, headers: HPACKHeaders, endStream: Bool) -> Opened {
        if self.openStreams >= max(self.streamLimit, self.pendingLimits.max() ?? self.streamLimit) {
            HTTP2FrameWriter.resetStream(streamID, code: .refusedStream, into: &self.output)
            return .refused
        }
        self.openStreams += 1
        self.streams[streamID] = Request(streamID: streamID, headers: headers)
        guard endStream, case .request(let request) = self.complete(streamID) else { return .receiving }
        return .request(request)
    }

    /// A stream's request is complete: it leaves the streams receiving and counts as answered.
    private mutating func complete(_ streamID: UInt32) -> Received {
        guard let request = self.streams.removeValue(forKey: streamID) else { return .nothing }
        self.requests += 1
        self.highestAnswered = max(self.highestAnswered, streamID)
        return .request(request)
    }

    /// Forgets a stream still receiving or waiting for window to send its answer; whether it was one.
    private mutating func dropStream(_ streamID: UInt32) -> Bool {
        if self.streams.removeValue(forKey: streamID) != nil {
            self.openStreams -= 1
            return true
        }
        if let index = self.blocked.firstIndex(where: { $0.streamID == streamID }) {
            self.blocked.remove(at: index)
            self.openStreams -= 1
            return true
        }
        return false
    }

    // MARK: Answers

    /// A notification's answer on its stream: its header block, then its body, if any, under flow control.
    mutating func writeAnswer(_ answer: HTTP2Answer, apnsID: UnsafeRawBufferPointer, on streamID: UInt32) {
        let endStream = answer.body.isEmpty
        HTTP2FrameWriter.responseHeaders(
            status: answer.status,
            apnsID: apnsID,
            retryAfter: answer.retryAfter,
            streamID: streamID,
            endStream: endStream,
            into: &self.output
        )
        self.writeBody(answer.body, on: streamID)
    }

    /// A channel management or broadcast answer: its own header block, then its body, if any, under flow control.
    mutating func writeResponse(headerBlock: ByteBuffer, body: [UInt8], on streamID: UInt32) {
        HTTP2FrameWriter.headerBlock(headerBlock, streamID: streamID, flags: body.isEmpty ? 0x1 : 0, into: &self.output)
        self.writeBody(body, on: streamID)
    }

    private mutating func writeBody(_ body: [UInt8], on streamID: UInt32) {
        if body.isEmpty {
            self.openStreams -= 1
        } else {
            self.blocked.append(BlockedBody(streamID: streamID, bytes: body, window: self.peerInitialWindow))
            self.sendBlockedBodies()
        }
    }

    /// Sends answer bodies in order while the connection's and their stream's windows allow: whole when they fit
    /// (every error body), and a body longer than a frame (a channel list) frame by frame as the windows open.
    private mutating func sendBlockedBodies() {
        while var first = self.blocked.first {
            let room = min(self.sendWindow, first.window, Self.maximumDataFrame)
            if first.bytes.count > room {
                guard first.bytes.count > Self.maximumDataFrame, room > 0 else { return }
                let chunk = Array(first.bytes[..<room])
                HTTP2FrameWriter.data(chunk, streamID: first.streamID, endStream: false, into: &self.output)
                first.bytes.removeFirst(room)
                first.window -= room
                self.sendWindow -= room
                self.blocked[self.blocked.startIndex] = first
                continue
            }
            self.blocked.removeFirst()
            self.sendWindow -= first.bytes.count
            HTTP2FrameWriter.data(first.bytes, streamID: first.streamID, endStream: true, into: &self.output)
            self.openStreams -= 1
        }
    }

    // MARK: GOAWAY

    /// GOAWAY (NO_ERROR) naming the highest stream answered: every stream up to it is (or will be) answered; later
    /// ones, in flight, are dropped unprocessed, and the client sends them again elsewhere.
    mutating func goAway() {
        let last = self.highestAnswered
        self.goAwayStreamID = last
        for streamID in self.streams.keys where streamID > last {
            self.streams.removeValue(forKey: streamID)
            self.openStreams -= 1
        }
        HTTP2FrameWriter.goAway(lastStreamID: last, code: .noError, into: &self.output)
    }

    /// GOAWAY for a connection error (`receive` threw it), naming the last stream opened.
    mutating func fail(_ error: HTTP2ConnectionError) {
        HTTP2FrameWriter.goAway(lastStreamID: self.lastStreamID, code: error.code, into: &self.output)
    }
}
