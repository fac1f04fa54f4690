import APNSWire
import NIOCore
import NIOHPACK

/// A client's bytes as the simulator's HTTP/2 endpoint reads them: `HTTP2FrameReader` frames them and NIOHPACK
/// decodes every header block with one decoder per connection (the dynamic table follows every block), as
/// `HTTP2GatewayHandler` does. The preface is put in front unless the first byte's low bit is set (so the fuzzer
/// spends its time on frames, and still reaches a wrong preface); the input arrives in two reads split where the
/// second byte says.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHTTP2Frames(_ data: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    guard count >= 2, let data else { return 0 }
    let body = UnsafeBufferPointer(start: data + 2, count: count - 2)
    var stream: [UInt8] = data[0] & 1 == 0 ? HTTP2FrameReader.preface : []
    stream += body
    let split = Int(data[1]) % (stream.count + 1)

    var reader = HTTP2FrameReader()
    var decoder = HPACKDecoder(
        allocator: ByteBufferAllocator(),
        maxDynamicTableSize: HPACKDecoder.maxDynamicTableSize,
        maxHeaderListSize: 16 << 10
    )
    var buffer = ByteBuffer(bytes: stream[..<split])
    var fed = false
    // A frame is at least 9 bytes: at most one frame per byte is generous, and ends every input.
    for _ in 0...stream.count {
        let frame: HTTP2FrameReader.Frame?
        do {
            frame = try reader.next(from: &buffer)
        } catch {
            return 0  // the endpoint answers GOAWAY and closes
        }
        guard let frame else {
            if fed { return 0 }
            fed = true
            buffer.writeBytes(stream[split...])
            continue
        }
        if case .headers(_, var block, _) = frame {
            guard (try? decoder.decodeHeaders(from: &block)) != nil else { return 0 }
        }
    }
    return 0
}
