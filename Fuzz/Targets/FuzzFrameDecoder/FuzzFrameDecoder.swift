import APNSWire
import NIOCore

/// Frames of commands 0, 1 and 2 as the simulator's gateway reads them: every input is decoded frame by frame until
/// the decoder needs more bytes or finds a malformed frame. A decoded frame must consume bytes (or the gateway would
/// spin), and the decoder must never trap.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzFrameDecoder(_ data: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    var buffer = ByteBuffer(bytes: UnsafeBufferPointer(start: data, count: count))
    // Small limits as well as the real ones: the first byte chooses, so both paths are reached.
    let decoder =
        count > 0 && data![0] & 0x80 != 0
        ? FrameDecoder(legacyPayloadLimit: 16, framedPayloadLimit: 32) : FrameDecoder()
    // At most one frame per input byte: a frame is at least one byte long.
    for _ in 0...count {
        let before = buffer.readerIndex
        guard let result = decoder.decode(&buffer) else { break }
        if case .malformed = result { break }
        precondition(buffer.readerIndex > before, "a decoded frame consumed nothing")
    }
    return 0
}
