import APNSWire
import NIOCore

/// What a gateway sends a sender: error responses on the binary interface, tuples from the feedback service. The
/// input is read both ways, the feedback stream in two pieces split where the first byte says (tuples cut across
/// reads, as TLS delivers them).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzGatewayAnswers(_ data: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let bytes = UnsafeBufferPointer(start: data, count: count)

    var responses = ByteBuffer(bytes: bytes)
    for _ in 0...count {
        let before = responses.readerIndex
        guard let response = try? ErrorResponse.read(from: &responses) else { break }
        precondition(responses.readerIndex == before + ErrorResponse.byteCount, "an error response is 6 bytes")
        _ = response.identifier
    }

    var decoder = FeedbackDecoder()
    let split = count > 0 ? Int(bytes[0]) % (count + 1) : 0
    var tuples = decoder.feed(ByteBuffer(bytes: bytes[..<split])).count
    tuples += decoder.feed(ByteBuffer(bytes: bytes[split...])).count
    // A tuple is at least 6 bytes: time, length, and a token of that length.
    precondition(tuples * 6 + decoder.pendingBytes <= count, "more tuples than bytes")
    _ = try? decoder.finish()
    return 0
}
