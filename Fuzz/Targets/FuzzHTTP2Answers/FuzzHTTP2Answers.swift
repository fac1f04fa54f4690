import APNSWire
import Foundation
import NIOCore
import NIOHPACK
import SalvoHTTP2

/// A server's bytes as the HTTP/2 client's `wire` engine reads them: `HTTP2FrameReader(fromServer: true)` frames
/// them, and `HTTP2AnswerDecoder` (the engine's own) decodes every header block with one decoder per connection, up
/// to the header list size the client announces, and picks out `:status`, `apns-id` and `retry-after`. A SETTINGS
/// frame is put in front unless the first byte's low bit is set (so the fuzzer spends its time past the rule that
/// SETTINGS come first, and still reaches it); the input arrives in two reads split where the second byte says.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHTTP2Answers(_ data: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    guard count >= 2, let data else { return 0 }
    let body = UnsafeBufferPointer(start: data + 2, count: count - 2)
    var stream: [UInt8] = data[0] & 1 == 0 ? settingsFrame : []
    stream += body
    let split = Int(data[1]) % (stream.count + 1)

    var reader = HTTP2FrameReader(fromServer: true)
    var decoder = HTTP2AnswerDecoder()
    var buffer = ByteBuffer(bytes: stream[..<split])
    var fed = false
    // A frame is at least 9 bytes: at most one frame per byte is generous, and ends every input.
    for _ in 0...stream.count {
        let frame: HTTP2FrameReader.Frame?
        do {
            frame = try reader.next(from: &buffer)
        } catch {
            return 0  // the client answers GOAWAY and closes
        }
        guard let frame else {
            if fed { return 0 }
            fed = true
            buffer.writeBytes(stream[split...])
            continue
        }
        switch frame {
        case .headers(_, var block, _):
            guard let fields = try? decoder.decode(&block) else { return 0 }
            // What the engine does with them: a status, an id, a wait.
            if let status = fields.status { precondition(String(status).utf8.count <= 20) }
            _ = fields.apnsID?.utf8.count
            _ = fields.retryAfter.map { $0 > 0 }
        case .goAway:
            // The engine reads APNs' reason from the debug data.
            _ = APNSErrorBody(jsonBytes: Array(reader.goAwayDebugData.readableBytesView))
        default:
            break
        }
    }
    return 0
}

/// The server's first SETTINGS, as a live server sends them.
private let settingsFrame: [UInt8] = {
    var buffer = ByteBuffer()
    HTTP2FrameWriter.settings([(.maxConcurrentStreams, 1000), (.initialWindowSize, 1 << 20)], into: &buffer)
    return Array(buffer.readableBytesView)
}()

/// Writes server streams that reach every kind of frame the client reads into `$SALVO_FUZZ_SEED_DIR` when set: 200
/// answers, a 429 with `Retry-After` and a body, a reset, a GOAWAY with APNs' JSON reason, PING, WINDOW_UPDATE, and a
/// header block over CONTINUATION frames carried by the dynamic table.
@_cdecl("LLVMFuzzerInitialize")
public func fuzzHTTP2AnswersInitialize(
    _ argc: UnsafeMutablePointer<CInt>?,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?
) -> CInt {
    guard let folder = ProcessInfo.processInfo.environment["SALVO_FUZZ_SEED_DIR"] else { return 0 }
    let apnsID = Array("8e3f1f4a-52c0-4b2f-9a7e-2f6d3a1b0c9d".utf8)
    // Options byte 0 (SETTINGS in front), split byte 0.
    var answers = ByteBuffer(bytes: [0, 0])
    HTTP2FrameWriter.settingsAcknowledgement(into: &answers)
    apnsID.withUnsafeBytes { id in
        HTTP2FrameWriter.responseHeaders(
            status: 200,
            apnsID: id,
            retryAfter: nil,
            streamID: 1,
            endStream: true,
            into: &answers
        )
        HTTP2FrameWriter.responseHeaders(
            status: 429,
            apnsID: id,
            retryAfter: 3,
            streamID: 3,
            endStream: false,
            into: &answers
        )
    }
    HTTP2FrameWriter.data(Array(#"{"reason":"TooManyRequests"}"#.utf8), streamID: 3, endStream: true, into: &answers)
    HTTP2FrameWriter.resetStream(5, code: .refusedStream, into: &answers)
    HTTP2FrameWriter.frameHeader(length: 8, type: 6, flags: 0, streamID: 0, into: &answers)
    answers.writeInteger(UInt64(7))
    HTTP2FrameWriter.windowUpdate(streamID: 0, increment: 65_535, into: &answers)
    let reason = Array(#"{"reason":"Shutdown"}"#.utf8)
    HTTP2FrameWriter.frameHeader(length: 8 + reason.count, type: 7, flags: 0, streamID: 0, into: &answers)
    answers.writeInteger(UInt32(5))
    answers.writeInteger(UInt32(0))
    answers.writeBytes(reason)

    // Indexed headers (the dynamic table) and a block of about 20 KB over HEADERS and CONTINUATION.
    var large = ByteBuffer(bytes: [0, 0])
    var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
    for streamID in [UInt32(1), 3] {
        var headers = HPACKHeaders([(":status", "200"), ("apns-id", String(decoding: apnsID, as: UTF8.self))])
        headers.add(name: "x-padding", value: String(repeating: "p", count: 20_000), indexing: .nonIndexable)
        var block = ByteBuffer()
        try! encoder.encode(headers: headers, to: &block)
        var type: UInt8 = 1
        var flags: UInt8 = 0x1
        while let chunk = block.readSlice(length: min(16_384, block.readableBytes)) {
            let last = block.readableBytes == 0
            HTTP2FrameWriter.frameHeader(
                length: chunk.readableBytes,
                type: type,
                flags: flags | (last ? 0x4 : 0),
                streamID: streamID,
                into: &large
            )
            large.writeImmutableBuffer(chunk)
            if last { break }
            type = 9
            flags = 0
        }
    }
    try! Data(answers.readableBytesView).write(to: URL(fileURLWithPath: folder + "/answers"))
    try! Data(large.readableBytesView).write(to: URL(fileURLWithPath: folder + "/large-headers"))
    return 0
}
