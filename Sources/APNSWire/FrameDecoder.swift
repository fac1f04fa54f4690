import NIOCore

/// Reads notification frames of commands 0, 1 and 2 from a byte stream, as the gateway does.
///
/// Accepts partial input: `decode` returns nil, consuming nothing, until a whole frame is readable. Each
/// malformation maps to the gateway's status code (missing token 2, token size 5, missing payload 4,
/// payload size 7, anything else malformed 1). Checks that need more than the frame — the topic, which
/// tokens are valid, the content-available rule — belong to the gateway. Allocates nothing per frame:
/// the payload is a slice of the input.
public struct FrameDecoder: Sendable {
    /// The payload limit of commands 0 and 1.
    public var legacyPayloadLimit: Int
    /// The payload limit of command 2.
    public var framedPayloadLimit: Int

    /// Frame data beyond this is refused without waiting for it (five items of the largest size).
    public static let maximumFrameDataLength = 5 * (3 + Int(UInt16.max))

    /// The outcome of reading one frame.
    public enum Result: Sendable {
        case notification(DecodedNotification)
        case malformed(MalformedFrame)
    }

    public init(
        legacyPayloadLimit: Int = PayloadLimit.legacy.bytes,
        framedPayloadLimit: Int = PayloadLimit.binary.bytes
    ) {
        self.legacyPayloadLimit = legacyPayloadLimit
        self.framedPayloadLimit = framedPayloadLimit
    }

    /// Reads one frame from the front of `buffer`.
    ///
    /// - Returns: nil (nothing consumed) while the frame is incomplete; otherwise the frame's outcome, with
    ///   the frame consumed. After `.malformed` the stream cannot be trusted: a gateway answers and closes.
    public func decode(_ buffer: inout ByteBuffer) -> Result? {
        let start = buffer.readerIndex
        guard let commandByte = buffer.getInteger(at: start, as: UInt8.self) else { return nil }
        switch commandByte {
        case FrameCommand.simple.rawValue, FrameCommand.enhanced.rawValue:
            return self.decodeLegacy(&buffer, command: FrameCommand(rawValue: commandByte)!)
        case FrameCommand.framed.rawValue:
            return self.decodeFramed(&buffer)
        default:
            buffer.moveReaderIndex(forwardBy: 1)
            return .malformed(MalformedFrame(status: .processingError, identifier: 0, command: nil))
        }
    }

    // 0 | token length (2) | token | payload length (2) | payload
    // 1 | identifier (4) | expiry (4) | token length (2) | token | payload length (2) | payload
    private func decodeLegacy(_ buffer: inout ByteBuffer, command: FrameCommand) -> Result? {
        let start = buffer.readerIndex
        let header = command == .enhanced ? 9 : 1
        guard let tokenLength = buffer.getInteger(at: start + header, as: UInt16.self).map(Int.init),
            let payloadLength = buffer.getInteger(at: start + header + 2 + tokenLength, as: UInt16.self).map(Int.init)
        else { return nil }
        let total = header + 2 + tokenLength + 2 + payloadLength
        guard buffer.readableBytes >= total else { return nil }

        var identifier: UInt32 = 0
        var expiry: UInt32 = 0
        if command == .enhanced {
            identifier = buffer.getInteger(at: start + 1, as: UInt32.self)!
            expiry = buffer.getInteger(at: start + 5, as: UInt32.self)!
        }
        let tokenStart = start + header + 2
        let payloadStart = tokenStart + tokenLength + 2
        // Slices and reads are taken before the reader index passes them (NIO reads only readable bytes).
        defer { buffer.moveReaderIndex(to: start + total) }

        var status = ErrorStatus.noErrors
        if tokenLength == 0 {
            status = .missingDeviceToken
        } else if tokenLength != DeviceToken.byteCount {
            status = .invalidTokenSize
        } else if payloadLength == 0 {
            status = .missingPayload
        } else if payloadLength > self.legacyPayloadLimit {
            status = .invalidPayloadSize
        }
        guard status == .noErrors else {
            return .malformed(MalformedFrame(status: status, identifier: identifier, command: command))
        }
        let token = buffer.withVeryUnsafeBytes { all in
            DeviceToken(
                unsafeBytes: UnsafeRawBufferPointer(rebasing: all[tokenStart..<tokenStart + DeviceToken.byteCount])
            )
        }
        let payload = buffer.getSlice(at: payloadStart, length: payloadLength)!
        return .notification(
            DecodedNotification(
                command: command,
                token: token,
                payload: payload,
                identifier: identifier,
                expiry: expiry,
                priority: NotificationPriority.immediate.rawValue
            )
        )
    }

    // 2 | frame length (4) | items, each: item id (1) | item data length (2) | item data
    private func decodeFramed(_ buffer: inout ByteBuffer) -> Result? {
        let start = buffer.readerIndex
        guard let frameLength = buffer.getInteger(at: start + 1, as: UInt32.self).map(Int.init) else { return nil }
        guard frameLength <= Self.maximumFrameDataLength else {
            buffer.moveReaderIndex(forwardBy: 5)
            return .malformed(MalformedFrame(status: .processingError, identifier: 0, command: .framed))
        }
        guard buffer.readableBytes >= 5 + frameLength else { return nil }
        defer { buffer.moveReaderIndex(to: start + 5 + frameLength) }

        // Offsets of each item's data (-1: absent) and lengths, read in one pass over the frame.
        var tokenAt = -1
        var tokenLength = 0
        var payloadAt = -1
        var payloadLength = 0
        var identifier: UInt32 = 0
        var expiry: UInt32 = 0
        var priority: UInt8 = NotificationPriority.immediate.rawValue
        var malformedItem = false
        var seen: UInt8 = 0

        buffer.withVeryUnsafeBytes { all in
            var offset = start + 5
            let end = start + 5 + frameLength
            while offset < end {
                guard end - offset >= 3 else {
                    malformedItem = true
                    return
                }
                let id = all[offset]
                let length = Int(UInt16(bigEndian: all.loadUnaligned(fromByteOffset: offset + 1, as: UInt16.self)))
                let dataAt = offset + 3
                guard end - dataAt >= length, id >= 1, id <= 5, seen & (1 << id) == 0 else {
                    malformedItem = true
                    return
                }
                seen |= 1 << id
                switch id {
                case 1:
                    tokenAt = dataAt
                    tokenLength = length
                case 2:
                    payloadAt = dataAt
                    payloadLength = length
                case 3:
                    guard length == 4 else {
                        malformedItem = true
                        return
                    }
                    identifier = UInt32(bigEndian: all.loadUnaligned(fromByteOffset: dataAt, as: UInt32.self))
                case 4:
                    guard length == 4 else {
                        malformedItem = true
                        return
                    }
                    expiry = UInt32(bigEndian: all.loadUnaligned(fromByteOffset: dataAt, as: UInt32.self))
                default:
                    guard length == 1 else {
                        malformedItem = true
                        return
                    }
                    priority = all[dataAt]
                }
                offset = dataAt + length
            }
        }

        var status = ErrorStatus.noErrors
        if malformedItem {
            status = .processingError
        } else if tokenAt < 0 || tokenLength == 0 {
            status = .missingDeviceToken
        } else if tokenLength != DeviceToken.byteCount {
            status = .invalidTokenSize
        } else if payloadAt < 0 || payloadLength == 0 {
            status = .missingPayload
        } else if payloadLength > self.framedPayloadLimit {
            status = .invalidPayloadSize
        } else if !NotificationPriority(rawValue: priority).isValidForBinary {
            status = .processingError
        }
        guard status == .noErrors else {
            return .malformed(MalformedFrame(status: status, identifier: identifier, command: .framed))
        }
        let token = buffer.withVeryUnsafeBytes { all in
            DeviceToken(unsafeBytes: UnsafeRawBufferPointer(rebasing: all[tokenAt..<tokenAt + DeviceToken.byteCount]))
        }
        return .notification(
            DecodedNotification(
                command: .framed,
                token: token,
                payload: buffer.getSlice(at: payloadAt, length: payloadLength)!,
                identifier: identifier,
                expiry: expiry,
                priority: priority
            )
        )
    }
}
