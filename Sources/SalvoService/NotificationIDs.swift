/// The ids of a request's batch and of its notifications, each notification's id made from its batch's and its place
/// in it: the batch's id is a version-7 UUID whose last three hex digits are `fff`, its notifications' ids the same
/// UUID ending in their index (`000` to `3e7` for a request of 1,000). So a notification is found by its batch and
/// its index, and a store keeps one entry per request where it would keep one per notification: the embedded
/// store's index of ids cost it a fifth of each row's insert (docs/service.md).
///
/// The ids stay canonical lowercase UUIDs of version 7 (the last digits are among the 74 random bits), 62 random bits
/// beside the millisecond; a notification's id is also its `apns-id` unless the caller chose one.
public enum NotificationIDs {
    /// The most notifications a batch's ids can name (indexes `000` to `ffe`).
    public static let capacity = 0xFFF

    /// A new batch id, at `milliseconds` since 1970.
    public static func batch(milliseconds: Int64, using generator: inout some RandomNumberGenerator) -> String {
        let uuid = NotificationService.uuid(milliseconds: milliseconds, using: &generator)
        return String(decoding: uuid.utf8.prefix(33), as: UTF8.self) + "fff"
    }

    /// The id of the notification at `index` of the batch `batch` (an id `batch(milliseconds:using:)` made).
    public static func notification(batch: String, index: Int) -> String {
        precondition((0..<Self.capacity).contains(index), "a batch's index within 0..<\(Self.capacity)")
        precondition(batch.utf8.count == 36, "a batch id is a UUID")
        var batch = batch
        // Written into the string's own storage (one allocation: an id is made for every notification).
        return batch.withUTF8 { source in
            String(unsafeUninitializedCapacity: 36) { out in
                _ = out.initialize(from: source[..<33])
                out[33] = Self.digits[index >> 8]
                out[34] = Self.digits[(index >> 4) & 0xF]
                out[35] = Self.digits[index & 0xF]
                return 36
            }
        }
    }

    private static let digits: [UInt8] = Array("0123456789abcdef".utf8)

    /// Whether `id` is `notification(batch: batch, index: index)` (compared in place: a store asks it of every
    /// notification it keeps).
    public static func isNotification(_ id: String, of batch: String, at index: Int) -> Bool {
        guard (0..<Self.capacity).contains(index) else { return false }
        var id = id
        var batch = batch
        return id.withUTF8 { id in
            batch.withUTF8 { batch in
                guard id.count == 36, batch.count == 36 else { return false }
                for at in 0..<33 where id[at] != batch[at] { return false }
                var value = 0
                for at in 33..<36 {
                    guard let digit = Self.hexDigit(id[at]) else { return false }
                    value = value << 4 | digit
                }
                return value == index
            }
        }
    }

    /// The batch and index a notification id names, when it has the shape of one (36 characters, its last three hex
    /// digits not `fff`); nil for any other text. Whether such a batch exists is the store's to say.
    public static func locate(_ id: String) -> (batch: String, index: Int)? {
        let utf8 = Array(id.utf8)
        guard utf8.count == 36, utf8[8] == UInt8(ascii: "-"), utf8[23] == UInt8(ascii: "-") else { return nil }
        var index = 0
        for byte in utf8[33...] {
            guard let digit = Self.hexDigit(byte) else { return nil }
            index = index << 4 | digit
        }
        guard index < Self.capacity else { return nil }
        return (String(decoding: utf8[..<33], as: UTF8.self) + "fff", index)
    }

    private static func hexDigit(_ byte: UInt8) -> Int? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): Int(byte - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): Int(byte - UInt8(ascii: "a")) + 10
        default: nil
        }
    }
}
