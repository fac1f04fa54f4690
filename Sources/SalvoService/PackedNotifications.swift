import APNSWire

/// A request's accepted notifications as one value, as the embedded store keeps them (a row a request, not a row a
/// notification: the store's cycle cost a quarter as much, `Benchmarks/store-cycle.py`).
///
/// Written by hand: a handful of fields written once and read back by the same code, where a general format (JSON,
/// a property list) would cost a tree of values per notification on the hot path. Little-endian lengths:
///
///     format (1 byte, 1), then for each notification:
///     flags (1 byte)   token (1-byte length, bytes)   payload (4-byte length, bytes; length FFFFFFFF: none
///     follow, the payload is the previous notification's)
///     [id (1-byte length, UTF-8)]           flag 0x80: an id that is not the batch's own for its index
///     [push type (1-byte length, UTF-8)]    flag 0x01
///     [apns-id (1-byte length, UTF-8)]      flag 0x02: the caller's, when it is not the notification's id
///     [expiration (4 bytes)]                flag 0x04
///     [priority (1 byte)]                   flag 0x08
///     [topic (2-byte length, UTF-8)]        flag 0x10 (length FFFF: the previous notification's topic)
///     [collapse id (1-byte length, UTF-8)]  flag 0x20
///                                           flag 0x40: the caller wants the outcome's webhook event
public enum PackedNotifications {
    static let format: UInt8 = 1

    /// `notifications`, their ids those of `batch` by index unless `explicitIDs` (a store's rows of before, whose
    /// ids were made apart from their batch's).
    public static func encode(
        _ notifications: [ServiceNotification],
        batch: String,
        explicitIDs: Bool = false
    )
        -> [UInt8]
    {
        var out: [UInt8] = []
        out.reserveCapacity(1 + notifications.count * 64 + (notifications.first?.payload.count ?? 0))
        out.append(Self.format)
        // A request's notifications mostly share a payload and a topic (a campaign's, a template's): each is kept
        // once, the next ones pointing back at it (a tenth of the bytes every cycle writes and syncs, then copies).
        var previousPayload: [UInt8]?
        var previousTopic: String?
        for index in notifications.indices {
            let notification = notifications[index]
            let headers = notification.headers
            var flags: UInt8 = 0
            if explicitIDs { flags |= 0x80 }
            if headers.pushType != nil { flags |= 0x01 }
            let apnsID = headers.id == notification.id ? nil : headers.id
            if apnsID != nil { flags |= 0x02 }
            if headers.expiration != nil { flags |= 0x04 }
            if headers.priority != nil { flags |= 0x08 }
            if headers.topic != nil { flags |= 0x10 }
            if headers.collapseID != nil { flags |= 0x20 }
            if notification.webhook { flags |= 0x40 }
            out.append(flags)
            notification.token.withUnsafeBytes { token in
                out.append(UInt8(token.count))
                out.append(contentsOf: token)
            }
            if let previousPayload, previousPayload == notification.payload {
                Self.append(Self.samePayload, to: &out)
            } else {
                Self.append(UInt32(notification.payload.count), to: &out)
                out += notification.payload
                previousPayload = notification.payload
            }
            if explicitIDs { Self.appendShort(notification.id, to: &out) }
            if let pushType = headers.pushType { Self.appendShort(pushType.rawValue, to: &out) }
            if let apnsID { Self.appendShort(apnsID, to: &out) }
            if let expiration = headers.expiration { Self.append(expiration, to: &out) }
            if let priority = headers.priority { out.append(priority.rawValue) }
            if let topic = headers.topic {
                let count = topic == previousTopic ? Self.sameTopic : UInt16(clamping: topic.utf8.count)
                out.append(UInt8(count & 0xFF))
                out.append(UInt8(count >> 8))
                if count != Self.sameTopic { out.append(contentsOf: topic.utf8.prefix(Int(count))) }
                previousTopic = topic
            }
            if let collapseID = headers.collapseID { Self.appendShort(collapseID, to: &out) }
        }
        return out
    }

    /// Headers with no field: nothing to check, so the initializer cannot throw.
    private static let noHeaders = try! APNSRequestHeaders()

    /// A payload's length that says it is the previous notification's payload.
    static let samePayload = UInt32.max
    /// A topic's length that says it is the previous notification's topic.
    static let sameTopic = UInt16.max

    private static func append(_ value: UInt32, to out: inout [UInt8]) {
        out.append(UInt8(value & 0xFF))
        out.append(UInt8((value >> 8) & 0xFF))
        out.append(UInt8((value >> 16) & 0xFF))
        out.append(UInt8(value >> 24))
    }

    /// A text of at most 255 bytes (a push type, an id, a collapse id: each far shorter).
    private static func appendShort(_ text: String, to out: inout [UInt8]) {
        let count = min(255, text.utf8.count)
        out.append(UInt8(count))
        out.append(contentsOf: text.utf8.prefix(count))
    }

    /// The notifications `encode` packed, the ids of `batch` by index (or the ones packed with them).
    /// - Throws: when the bytes are not such a value (a store damaged outside Salvo).
    public static func decode(_ bytes: [UInt8], batch: String) throws(StoreFailure) -> [ServiceNotification] {
        var reader = Reader(bytes: bytes)
        guard try reader.byte() == Self.format else {
            throw StoreFailure("a request's notifications are in an unknown format (\(bytes.first ?? 0))")
        }
        var notifications: [ServiceNotification] = []
        var previousPayload: [UInt8]?
        var previousTopic: String?
        while !reader.atEnd {
            let flags = try reader.byte()
            let tokenBytes = try reader.slice(Int(try reader.byte()))
            let payloadLength = try reader.uint32()
            let payload: [UInt8]
            if payloadLength == Self.samePayload {
                guard let previousPayload else { throw StoreFailure("a request's first notification has no payload") }
                payload = previousPayload
            } else {
                payload = try reader.bytes(Int(payloadLength))
                previousPayload = payload
            }
            let id: String
            if flags & 0x80 != 0 {
                id = try reader.shortText()
            } else {
                guard batch.utf8.count == 36, notifications.count < NotificationIDs.capacity else {
                    throw StoreFailure("a request's notifications name their ids by a batch id that is not one")
                }
                id = NotificationIDs.notification(batch: batch, index: notifications.count)
            }
            let pushType = flags & 0x01 != 0 ? APNSPushType(rawValue: try reader.shortText()) : nil
            let apnsID = flags & 0x02 != 0 ? try reader.shortText() : id
            let expiration = flags & 0x04 != 0 ? try reader.uint32() : nil
            let priority = flags & 0x08 != 0 ? NotificationPriority(rawValue: try reader.byte()) : nil
            var topic: String?
            if flags & 0x10 != 0 {
                let count = UInt16(try reader.byte()) | UInt16(try reader.byte()) << 8
                if count == Self.sameTopic {
                    guard let previousTopic else { throw StoreFailure("a request's first topic is missing") }
                    topic = previousTopic
                } else {
                    topic = String(decoding: try reader.slice(Int(count)), as: UTF8.self)
                }
                previousTopic = topic
            }
            let collapseID = flags & 0x20 != 0 ? try reader.shortText() : nil
            // The values were checked when the request was accepted: set, not checked again.
            var headers = Self.noHeaders
            headers.pushType = pushType
            headers.id = apnsID
            headers.expiration = expiration
            headers.priority = priority
            headers.topic = topic
            headers.collapseID = collapseID
            guard let token = try? DeviceToken(bytes: tokenBytes) else {
                throw StoreFailure(
                    "a request's notification \(notifications.count) has a token of \(tokenBytes.count) bytes"
                )
            }
            notifications.append(
                ServiceNotification(
                    id: id,
                    token: token,
                    payload: payload,
                    headers: headers,
                    webhook: flags & 0x40 != 0
                )
            )
        }
        return notifications
    }

    private struct Reader {
        let bytes: [UInt8]
        var at = 0

        var atEnd: Bool { self.at >= self.bytes.count }

        mutating func byte() throws(StoreFailure) -> UInt8 {
            guard self.at < self.bytes.count else { throw Self.short }
            defer { self.at += 1 }
            return self.bytes[self.at]
        }

        mutating func uint32() throws(StoreFailure) -> UInt32 {
            let four = try self.slice(4)
            let start = four.startIndex
            return UInt32(four[start]) | UInt32(four[start + 1]) << 8 | UInt32(four[start + 2]) << 16
                | UInt32(four[start + 3]) << 24
        }

        /// The next `count` bytes, in place (a field read into a value of its own needs no array of its own).
        mutating func slice(_ count: Int) throws(StoreFailure) -> ArraySlice<UInt8> {
            guard count <= self.bytes.count - self.at else { throw Self.short }
            defer { self.at += count }
            return self.bytes[self.at..<self.at + count]
        }

        mutating func bytes(_ count: Int) throws(StoreFailure) -> [UInt8] {
            Array(try self.slice(count))
        }

        mutating func shortText() throws(StoreFailure) -> String {
            String(decoding: try self.slice(Int(try self.byte())), as: UTF8.self)
        }

        static let short = StoreFailure("a request's notifications end short")
    }
}
