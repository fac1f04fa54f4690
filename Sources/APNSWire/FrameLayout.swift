/// Where each field of a notification frame lies, for one command and one payload size.
///
/// Shared by the one-shot encoder and `FrameTemplate`, so the two cannot disagree about the layout.
@usableFromInline
struct FrameLayout: Sendable {
    @usableFromInline let command: FrameCommand
    @usableFromInline let payloadCount: Int
    @usableFromInline let byteCount: Int
    @usableFromInline let tokenOffset: Int
    @usableFromInline let payloadOffset: Int
    /// -1 when the command carries no identifier.
    @usableFromInline let identifierOffset: Int
    /// -1 when the command carries no expiry.
    @usableFromInline let expiryOffset: Int

    // Item headers of command 2: item id (1) + item data length (2).
    @usableFromInline static let itemHeader = 3

    @inlinable @inline(__always)
    init(command: FrameCommand, payloadCount: Int) {
        self.command = command
        self.payloadCount = payloadCount
        switch command {
        case .simple:
            // 0 | token length (2) | token | payload length (2) | payload
            self.tokenOffset = 3
            self.payloadOffset = 3 + DeviceToken.byteCount + 2
            self.identifierOffset = -1
            self.expiryOffset = -1
            self.byteCount = self.payloadOffset + payloadCount
        case .enhanced:
            // 1 | identifier (4) | expiry (4) | token length (2) | token | payload length (2) | payload
            self.identifierOffset = 1
            self.expiryOffset = 5
            self.tokenOffset = 11
            self.payloadOffset = 11 + DeviceToken.byteCount + 2
            self.byteCount = self.payloadOffset + payloadCount
        case .framed:
            // 2 | frame length (4) | items: token (1), payload (2), identifier (3), expiry (4), priority (5)
            self.tokenOffset = 5 + Self.itemHeader
            self.payloadOffset = self.tokenOffset + DeviceToken.byteCount + Self.itemHeader
            self.identifierOffset = self.payloadOffset + payloadCount + Self.itemHeader
            self.expiryOffset = self.identifierOffset + 4 + Self.itemHeader
            self.byteCount = self.expiryOffset + 4 + Self.itemHeader + 1
        }
    }

    /// Writes the whole frame into `out`, which holds at least `byteCount` bytes.
    @inlinable
    func encode(
        into out: UnsafeMutableRawBufferPointer,
        token: DeviceToken,
        payload: UnsafeRawBufferPointer,
        identifier: UInt32,
        expiry: UInt32,
        priority: UInt8
    ) {
        precondition(payload.count == self.payloadCount && out.count >= self.byteCount)
        self.encodeFields(into: out, token: token, identifier: identifier, expiry: expiry, priority: priority)
        if payload.count > 0 {
            (out.baseAddress! + self.payloadOffset).copyMemory(from: payload.baseAddress!, byteCount: payload.count)
        }
    }

    /// Writes every field of the frame but the payload's bytes into `out` (at least `byteCount` bytes).
    @inlinable @inline(__always)
    func encodeFields(
        into out: UnsafeMutableRawBufferPointer,
        token: DeviceToken,
        identifier: UInt32,
        expiry: UInt32,
        priority: UInt8
    ) {
        precondition(out.count >= self.byteCount)
        out[0] = self.command.rawValue
        switch self.command {
        case .simple, .enhanced:
            if self.command == .enhanced {
                out.storeBytes(of: identifier.bigEndian, toByteOffset: self.identifierOffset, as: UInt32.self)
                out.storeBytes(of: expiry.bigEndian, toByteOffset: self.expiryOffset, as: UInt32.self)
            }
            out.storeBytes(
                of: UInt16(DeviceToken.byteCount).bigEndian,
                toByteOffset: self.tokenOffset - 2,
                as: UInt16.self
            )
            out.storeBytes(
                of: UInt16(self.payloadCount).bigEndian,
                toByteOffset: self.payloadOffset - 2,
                as: UInt16.self
            )
        case .framed:
            out.storeBytes(of: UInt32(self.byteCount - 5).bigEndian, toByteOffset: 1, as: UInt32.self)
            Self.itemHeader(into: out, at: self.tokenOffset, id: 1, length: DeviceToken.byteCount)
            Self.itemHeader(into: out, at: self.payloadOffset, id: 2, length: self.payloadCount)
            Self.itemHeader(into: out, at: self.identifierOffset, id: 3, length: 4)
            out.storeBytes(of: identifier.bigEndian, toByteOffset: self.identifierOffset, as: UInt32.self)
            Self.itemHeader(into: out, at: self.expiryOffset, id: 4, length: 4)
            out.storeBytes(of: expiry.bigEndian, toByteOffset: self.expiryOffset, as: UInt32.self)
            Self.itemHeader(into: out, at: self.byteCount - 1, id: 5, length: 1)
            out[self.byteCount - 1] = priority
        }
        self.patch(out, token: token)
    }

    /// Writes the item header that precedes the item data at `dataOffset`.
    @inlinable @inline(__always)
    static func itemHeader(into out: UnsafeMutableRawBufferPointer, at dataOffset: Int, id: UInt8, length: Int) {
        out[dataOffset - 3] = id
        out.storeBytes(of: UInt16(length).bigEndian, toByteOffset: dataOffset - 2, as: UInt16.self)
    }

    /// Overwrites the token field.
    @inlinable @inline(__always)
    func patch(_ out: UnsafeMutableRawBufferPointer, token: DeviceToken) {
        out.storeBytes(of: token.words.0, toByteOffset: self.tokenOffset, as: UInt64.self)
        out.storeBytes(of: token.words.1, toByteOffset: self.tokenOffset + 8, as: UInt64.self)
        out.storeBytes(of: token.words.2, toByteOffset: self.tokenOffset + 16, as: UInt64.self)
        out.storeBytes(of: token.words.3, toByteOffset: self.tokenOffset + 24, as: UInt64.self)
    }
}
