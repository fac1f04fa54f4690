import APNSWire

/// The strict JSON scanner and the payload checks, as `salvo send` and `salvo payload check` run them on a file.
/// A payload that passes is compacted; compacting it again must give the same bytes, and it must pass again.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPayload(_ data: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: count))
    guard let payload = try? Payload(jsonBytes: bytes) else { return 0 }
    for limit in [PayloadLimit.legacy, .binary, .http2, .http2VoIP] {
        _ = try? payload.check(limit: limit)
    }
    for priority in [NotificationPriority.immediate, .powerConsiderate, .low] {
        _ = try? payload.check(priority: priority)
    }
    _ = payload.isContentAvailableOnly
    let again: Payload
    do {
        again = try Payload(jsonBytes: payload.bytes)
    } catch {
        preconditionFailure("the compact form of an accepted payload is refused: \(error)")
    }
    precondition(again.bytes == payload.bytes, "compacting twice changed the bytes")
    return 0
}
