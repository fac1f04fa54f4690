import APNSWire
import NIOCore

/// Frames for tests, valid ones through APNSWire's encoder and broken ones item by item.
enum Frames {
    static let payload: [UInt8] = Array(#"{"aps":{"alert":"Hello","sound":"default"}}"#.utf8)
    static let silentPayload: [UInt8] = Array(#"{"aps":{"content-available":1}}"#.utf8)

    static func valid(
        _ token: [UInt8],
        identifier: UInt32,
        command: FrameCommand = .framed,
        payload: [UInt8] = Frames.payload,
        expiry: UInt32 = 0,
        priority: NotificationPriority = .immediate
    ) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeNotificationFrame(
            command: command,
            token: try! DeviceToken(bytes: token),
            payload: payload,
            identifier: identifier,
            expiry: expiry,
            priority: priority
        )
        return buffer
    }

    /// A command-2 frame with exactly the items given (nil = item absent), in id order.
    static func framed(
        token: [UInt8]?,
        payload: [UInt8]?,
        identifier: UInt32?,
        expiry: UInt32? = nil,
        priority: UInt8? = nil
    ) -> ByteBuffer {
        var items = ByteBuffer()
        func item(_ id: UInt8, _ bytes: [UInt8]) {
            items.writeInteger(id)
            items.writeInteger(UInt16(bytes.count))
            items.writeBytes(bytes)
        }
        if let token { item(1, token) }
        if let payload { item(2, payload) }
        if let identifier { item(3, withUnsafeBytes(of: identifier.bigEndian, Array.init)) }
        if let expiry { item(4, withUnsafeBytes(of: expiry.bigEndian, Array.init)) }
        if let priority { item(5, [priority]) }
        var frame = ByteBuffer()
        frame.writeInteger(UInt8(2))
        frame.writeInteger(UInt32(items.readableBytes))
        frame.writeBuffer(&items)
        return frame
    }

    /// A command-1 frame with any token and payload lengths.
    static func enhanced(token: [UInt8], payload: [UInt8], identifier: UInt32, expiry: UInt32 = 0) -> ByteBuffer {
        var frame = ByteBuffer()
        frame.writeInteger(UInt8(1))
        frame.writeInteger(identifier)
        frame.writeInteger(expiry)
        frame.writeInteger(UInt16(token.count))
        frame.writeBytes(token)
        frame.writeInteger(UInt16(payload.count))
        frame.writeBytes(payload)
        return frame
    }

    /// A command-0 frame with any token and payload lengths.
    static func simple(token: [UInt8], payload: [UInt8]) -> ByteBuffer {
        var frame = ByteBuffer()
        frame.writeInteger(UInt8(0))
        frame.writeInteger(UInt16(token.count))
        frame.writeBytes(token)
        frame.writeInteger(UInt16(payload.count))
        frame.writeBytes(payload)
        return frame
    }

    static func joined(_ frames: [ByteBuffer]) -> ByteBuffer {
        var out = ByteBuffer()
        for var frame in frames { out.writeBuffer(&frame) }
        return out
    }

    /// The expected error response, byte for byte: 8 | status | identifier (big endian).
    static func errorResponse(_ status: UInt8, _ identifier: UInt32) -> [UInt8] {
        [8, status] + withUnsafeBytes(of: identifier.bigEndian, Array.init)
    }
}
