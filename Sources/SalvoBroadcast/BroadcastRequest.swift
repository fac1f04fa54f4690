import APNSWire
import SalvoRows

/// The largest broadcast payload APNs takes: 5 KB, uncompressed JSON.
public let broadcastPayloadLimit = 5120

/// Why one row cannot be broadcast, found before anything is sent; `reason` is the one APNs would answer.
public struct BroadcastRowError: Error, Hashable, Sendable, CustomStringConvertible {
    public var reason: String
    public var detail: String

    public init(_ reason: String, _ detail: String) {
        self.reason = reason
        self.detail = detail
    }

    public var description: String { "\(self.reason): \(self.detail)" }
}

/// The requests of a broadcast job, row by row (pure): `POST /4/broadcasts/apps/<bundle id>` with the row's
/// channel in `apns-channel-id`, `apns-push-type: liveactivity`, `apns-expiration`, `apns-priority`, and the
/// template filled from the row's columns.
///
/// Checked before a row is sent: a channel id that is base64, an expiration of 0 for a channel that stores no
/// message (`policy` none: APNs answers `BadExpirationDate`), a payload of at most 5,120 bytes that is JSON with an
/// `aps` whose `event` is `update` or `end` (a broadcast cannot start a Live Activity).
public struct BroadcastRequestBuilder: Sendable {
    public let bundleID: String
    public let template: PayloadTemplate
    /// For each of the template's columns, the input column holding it.
    public let sources: [Int]
    /// `apns-expiration`: 0 (one attempt, nothing stored) or UNIX seconds.
    public let expiration: Int64
    /// `apns-priority`: 10, 5 or 1.
    public let priority: Int

    /// - Throws: `BroadcastRowError` (job-wide) for a template column the input lacks, or a priority APNs refuses.
    public init(
        bundleID: String,
        template: PayloadTemplate,
        header: [String],
        expiration: Int64,
        priority: Int
    ) throws(BroadcastRowError) {
        guard [10, 5, 1].contains(priority) else {
            throw BroadcastRowError("BadPriority", "apns-priority is 10, 5 or 1 for a broadcast (got \(priority))")
        }
        guard expiration >= 0 else {
            throw BroadcastRowError("BadExpirationDate", "apns-expiration is 0 or UNIX seconds (got \(expiration))")
        }
        let lowered = header.map { $0.lowercased() }
        var sources: [Int] = []
        for column in template.columns {
            if let index = lowered.firstIndex(of: column.lowercased()) {
                sources.append(index)
            } else {
                let position = template.position(of: column).map { " (\(template.file), \($0))" } ?? ""
                throw BroadcastRowError(
                    "MissingColumn",
                    "the template names {{\(column)}}\(position), and the input has no such column"
                )
            }
        }
        self.bundleID = bundleID
        self.template = template
        self.sources = sources
        self.expiration = expiration
        self.priority = priority
    }

    /// The path every broadcast of the app is posted to.
    public var path: String { "/4/broadcasts/apps/\(self.bundleID)" }

    /// The request for one row.
    ///
    /// - Parameters:
    ///   - fields: the row's fields.
    ///   - channelID: its channel.
    ///   - policy: its channel's storage policy, when the input says it.
    ///   - now: UNIX seconds, the send time (`"{{$now}}"` slots).
    public func request(
        fields: [String],
        channelID: String,
        policy: MessageStoragePolicy?,
        now: Int64
    ) -> Result<HTTP2Request, BroadcastRowError> {
        guard ChannelID.isWellFormed(channelID) else {
            return .failure(BroadcastRowError("BadChannelId", "'\(channelID)' is not a base64 channel id"))
        }
        if policy == MessageStoragePolicy.none && self.expiration != 0 {
            return .failure(
                BroadcastRowError(
                    "BadExpirationDate",
                    "channel \(channelID) stores no message: its broadcasts take apns-expiration 0, not \(self.expiration)"
                )
            )
        }
        let payload: [UInt8]
        switch self.render(fields, now: now) {
        case .success(let bytes): payload = bytes
        case .failure(let error): return .failure(error)
        }
        if let problem = Self.check(payload) ?? Self.liveActivityProblem(payload, priority: self.priority, now: now) {
            return .failure(problem)
        }
        return .success(
            HTTP2Request(
                method: "POST",
                path: self.path,
                headers: [
                    .init("apns-channel-id", channelID),
                    .init("apns-push-type", "liveactivity"),
                    .init("apns-expiration", String(self.expiration)),
                    .init("apns-priority", String(self.priority)),
                ],
                body: payload
            )
        )
    }

    /// The template filled with the row (and the send time).
    func render(_ fields: [String], now: Int64) -> Result<[UInt8], BroadcastRowError> {
        let row = self.sources.map { $0 < fields.count ? fields[$0] : nil }
        let limit = PayloadLimit(bytes: broadcastPayloadLimit, name: "a broadcast")
        return self.template.render(fields: row, sendTime: now, limit: limit).mapError { error in
            BroadcastRowError(error.code == .tooLarge ? "PayloadTooLarge" : "BadRequestPayload", error.message)
        }
    }

    /// The first error the Live Activity rules (`LiveActivityCheck`: timestamp, content-state, dismissal date, …)
    /// find in a rendered payload, or nil. Their 4 KB device limit is left out: a broadcast takes 5 KB, checked by
    /// `check`.
    static func liveActivityProblem(_ payload: [UInt8], priority: Int, now: Int64) -> BroadcastRowError? {
        guard let parsed = try? Payload(jsonBytes: payload) else { return nil }
        let report = LiveActivityCheck.check(
            payload: parsed,
            priority: NotificationPriority(rawValue: UInt8(priority)),
            now: now
        )
        // The size finding is the device limit's ("N bytes, over 4096 bytes …"): not a broadcast's.
        guard let issue = report.errors.first(where: { !$0.message.contains(" bytes, over ") }) else { return nil }
        return BroadcastRowError("BadRequestPayload", "\(issue) (Live Activity rules)")
    }

    /// What APNs would refuse in a rendered broadcast payload, or nil.
    public static func check(_ payload: [UInt8]) -> BroadcastRowError? {
        guard payload.count <= broadcastPayloadLimit else {
            return BroadcastRowError("PayloadTooLarge", "\(payload.count) bytes; at most \(broadcastPayloadLimit)")
        }
        let parsed: Payload
        do {
            parsed = try Payload(jsonBytes: payload)
        } catch {
            return BroadcastRowError("BadRequestPayload", error.message)
        }
        guard case .string(let event)? = parsed.value["aps"]?["event"] else {
            return BroadcastRowError("BadRequestPayload", "aps.event is missing: a broadcast is update or end")
        }
        guard event == "update" || event == "end" else {
            return BroadcastRowError(
                "BadRequestPayload",
                "aps.event is \(event): a broadcast is update or end (it cannot start a Live Activity)"
            )
        }
        if let timestamp = parsed.value["aps"]?["timestamp"] {
            guard case .number(let literal) = timestamp, Int64(literal) != nil else {
                return BroadcastRowError("BadRequestPayload", "aps.timestamp is not a whole number of UNIX seconds")
            }
        }
        return nil
    }
}

/// A stable 64-bit hash of a channel id (FNV-1a over its UTF-8), for `--partition K/N`: the same channel lands in
/// the same partition on every machine and in every file order.
public func channelPartitionHash(_ id: String) -> UInt64 {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in id.utf8 {
        hash ^= UInt64(byte)
        hash &*= 0x0000_0100_0000_01b3
    }
    return hash
}

extension Partition {
    /// Whether channel `id` is in this partition.
    public func contains(channel id: String) -> Bool {
        Int(channelPartitionHash(id) % UInt64(self.count)) == self.index
    }
}
