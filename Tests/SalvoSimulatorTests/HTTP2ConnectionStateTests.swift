import APNSWire
import NIOCore
import NIOHPACK
import SalvoTestTraits
import Testing

@testable import SalvoSimulator

/// The meaning of an HTTP/2 connection's frames on the simulator's side, without a connection: frames in, requests
/// and the frames that answer them out.
@Suite(.tags(.pure), .runs(.pure)) struct HTTP2ConnectionStateTests {
    /// A frame as it is written: type, flags, stream id and the payload's length.
    struct Written: Equatable {
        var type: UInt8
        var flags: UInt8
        var stream: UInt32
        var length: Int
    }

    /// A connection past its preface (announcing `limit` streams) with the client's acknowledgement.
    static func connection(limit: Int = 2) throws -> HTTP2ConnectionState {
        var state = HTTP2ConnectionState(allocator: ByteBufferAllocator())
        state.writePreface(limit: limit)
        #expect(try state.receive(.settingsAcknowledged) == .nothing)
        _ = Self.written(&state)
        return state
    }

    /// The frames written since the last call (the output taken, as the connection takes it).
    static func written(_ state: inout HTTP2ConnectionState) -> [Written] {
        var output = state.output
        state.output = ByteBuffer()
        var frames: [Written] = []
        while let header = output.readInteger(as: UInt32.self), let flags = output.readInteger(as: UInt8.self),
            let stream = output.readInteger(as: UInt32.self)
        {
            let length = Int(header >> 8)
            frames.append(
                Written(type: UInt8(header & 0xFF), flags: flags, stream: stream & 0x7FFF_FFFF, length: length)
            )
            output.moveReaderIndex(forwardBy: length)
        }
        return frames
    }

    /// An `apns-id` to answer with.
    static let apnsID = Array("77e6c7b4-5b1d-4b0a-9a51-2f4e2a6d1c3e".utf8)

    /// A request's HEADERS (each block encoded on its own: literals the decoder's table takes in again).
    static func headers(_ stream: UInt32, endStream: Bool) -> HTTP2FrameReader.Frame {
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        var block = ByteBuffer()
        try! encoder.encode(headers: HPACKHeaders([(":method", "POST"), (":path", "/3/device/ab")]), to: &block)
        return .headers(streamID: stream, block: block, endStream: endStream)
    }

    /// Receives a new stream's HEADERS and opens it.
    static func open(
        _ stream: UInt32,
        endStream: Bool,
        in state: inout HTTP2ConnectionState
    ) throws
        -> HTTP2ConnectionState.Opened
    {
        guard
            case .opening(let id, let headers, let end) = try state.receive(Self.headers(stream, endStream: endStream))
        else {
            Issue.record("stream \(stream) not opening")
            return .refused
        }
        return state.open(streamID: id, headers: headers, endStream: end)
    }

    @Test func thePrefaceAnnouncesTheLimitAndTheWindow() {
        var state = HTTP2ConnectionState(allocator: ByteBufferAllocator())
        state.writePreface(limit: 1)
        #expect(state.announcedLimit == 1)
        #expect(
            Self.written(&state) == [
                Written(type: 4, flags: 0, stream: 0, length: 18), Written(type: 8, flags: 0, stream: 0, length: 4),
            ]
        )
        state.announce(1)
        #expect(Self.written(&state).isEmpty)
        state.announce(5)
        #expect(Self.written(&state) == [Written(type: 4, flags: 0, stream: 0, length: 6)])
    }

    @Test func aRequestIsAssembledFromItsHeadersAndData() throws {
        var state = try Self.connection()
        #expect(try Self.open(1, endStream: false, in: &state) == .receiving)
        #expect(state.openStreams == 1)
        let first = ByteBuffer(bytes: [1, 2, 3])
        #expect(try state.receive(.data(streamID: 1, payload: first, endStream: false, flowControlled: 3)) == .nothing)
        let second = ByteBuffer(bytes: [4, 5])
        guard
            case .request(let request) = try state.receive(
                .data(streamID: 1, payload: second, endStream: true, flowControlled: 2)
            )
        else {
            Issue.record("no request")
            return
        }
        #expect(request.streamID == 1)
        #expect(request.payloadBytes == 5)
        #expect(Array(request.payload.readableBytesView) == [1, 2, 3, 4, 5])
        #expect(request.headers[":path"] == ["/3/device/ab"])
        #expect(state.requests == 1)
        // Still open until it is answered.
        #expect(state.openStreams == 1)
        Self.apnsID.withUnsafeBytes { state.writeAnswer(.accepted, apnsID: $0, on: 1) }
        #expect(state.openStreams == 0)
        #expect(Self.written(&state).map(\.type) == [1])
    }

    @Test func streamIdsMustBeOddAndIncreasing() throws {
        var state = try Self.connection()
        #expect(try Self.open(3, endStream: false, in: &state) == .receiving)
        #expect(throws: HTTP2ConnectionError.self) { try state.receive(Self.headers(1, endStream: true)) }
        var other = try Self.connection()
        #expect(throws: HTTP2ConnectionError.self) { try other.receive(Self.headers(2, endStream: true)) }
        #expect(throws: HTTP2ConnectionError.self) {
            try other.receive(.data(streamID: 9, payload: ByteBuffer(), endStream: true, flowControlled: 0))
        }
    }

    @Test func streamsOverTheAcknowledgedLimitAreRefused() throws {
        var state = try Self.connection(limit: 1)
        #expect(try Self.open(1, endStream: false, in: &state) == .receiving)
        #expect(try Self.open(3, endStream: false, in: &state) == .refused)
        #expect(Self.written(&state) == [Written(type: 3, flags: 0, stream: 3, length: 4)])
        // Until the client acknowledges a new limit it may use either: a higher one holds as soon as it is sent.
        state.announce(2)
        #expect(try Self.open(5, endStream: false, in: &state) == .receiving)
        #expect(try Self.open(7, endStream: false, in: &state) == .refused)
    }

    @Test func goAwayDropsTheStreamsAfterTheHighestAnswered() throws {
        var state = try Self.connection(limit: 10)
        guard case .request = try Self.open(1, endStream: true, in: &state) else {
            Issue.record("no request")
            return
        }
        #expect(try Self.open(3, endStream: false, in: &state) == .receiving)
        state.goAway()
        #expect(state.goAwayStreamID == 1)
        #expect(state.openStreams == 1)
        #expect(!state.isDone)
        // A stream opened after the GOAWAY is passed over.
        #expect(try state.receive(Self.headers(5, endStream: true)) == .nothing)
        Self.apnsID.withUnsafeBytes { state.writeAnswer(.accepted, apnsID: $0, on: 1) }
        #expect(state.isDone)
    }

    @Test func aBodyWaitsForWindow() throws {
        var state = try Self.connection()
        #expect(try state.receive(.settings([(.initialWindowSize, 0)])) == .nothing)
        _ = Self.written(&state)
        guard case .request = try Self.open(1, endStream: true, in: &state) else {
            Issue.record("no request")
            return
        }
        Self.apnsID.withUnsafeBytes { state.writeAnswer(.refused(.badDeviceToken), apnsID: $0, on: 1) }
        #expect(Self.written(&state).map(\.type) == [1])
        #expect(state.hasBlockedBodies)
        #expect(try state.receive(.windowUpdate(streamID: 1, increment: 1000)) == .nothing)
        let body = HTTP2Answer.refused(.badDeviceToken).body.count
        #expect(Self.written(&state) == [Written(type: 0, flags: 1, stream: 1, length: body)])
        #expect(!state.hasBlockedBodies)
        #expect(state.openStreams == 0)
    }

    @Test func theConnectionWindowIsToppedUpOnceHalfIsConsumed() throws {
        var state = try Self.connection()
        let half = HTTP2ConnectionState.windowTarget / 2
        #expect(
            try state.receive(.data(streamID: 0, payload: ByteBuffer(), endStream: false, flowControlled: half - 1))
                == .nothing
        )
        state.readComplete()
        #expect(Self.written(&state).isEmpty)
        _ = try state.receive(.data(streamID: 0, payload: ByteBuffer(), endStream: false, flowControlled: 1))
        state.readComplete()
        #expect(Self.written(&state) == [Written(type: 8, flags: 0, stream: 0, length: 4)])
        #expect(throws: HTTP2ConnectionError.self) {
            try state.receive(
                .data(streamID: 0, payload: ByteBuffer(), endStream: false, flowControlled: 2 * half + 1)
            )
        }
    }

    @Test func settingsAndPingsAreAcknowledged() throws {
        var state = try Self.connection()
        #expect(try state.receive(.settings([])) == .nothing)
        #expect(try state.receive(.ping(42)) == .nothing)
        #expect(
            Self.written(&state) == [
                Written(type: 4, flags: 1, stream: 0, length: 0), Written(type: 6, flags: 1, stream: 0, length: 8),
            ]
        )
        #expect(try state.receive(.goAway(lastStreamID: 0, code: 0)) == .nothing)
        #expect(state.isDone)
    }
}
