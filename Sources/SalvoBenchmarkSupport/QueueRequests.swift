import APNSWire
import SalvoRows
import SalvoService

/// Requests' notifications as `POST /v1/notifications` makes them from a body of `{"token": …, "payload": …}`
/// objects (`NotificationBatch.read`), without the JSON: a token of its own for every notification (as
/// `Benchmarks/service-load.lua` gives), the same payload for all, the alert push type, the service's default topic,
/// and the id the service gives it (its batch's by index, `NotificationIDs`), which is also its `apns-id`. No
/// idempotency key, as the load of `Benchmarks/service.sh` sends none: nothing goes to the idempotency table.
public struct QueueRequests: Sendable {
    /// `data/payloads/bench-100.json`: the 100-byte payload of every benchmark.
    public static let benchmarkPayload = Array(
        #"{"aps":{"alert":"Benchmark notification","badge":1,"sound":"default"},"campaign":"c-0001","p":"xxx"}"#.utf8
    )

    /// The topic `Benchmarks/service.sh` gives `salvo serve --topic`.
    public static let benchmarkTopic = "com.example.bench"

    private var tokens: TokenGenerator
    private var ids: SplitMix64
    private let payload: [UInt8]
    private let topic: String

    /// - Parameter stream: tokens of this stream never meet another stream's (each stream starts 2⁴⁰ tokens apart).
    public init(stream: Int, payload: [UInt8] = Self.benchmarkPayload, topic: String = Self.benchmarkTopic) {
        self.tokens = TokenGenerator(seed: UInt64(stream) << 40)
        var system = SystemRandomNumberGenerator()
        self.ids = SplitMix64(seed: system.next())
        self.payload = payload
        self.topic = topic
    }

    /// One request of `count` notifications, accepted at `now` (milliseconds since 1970): as the service hands it to
    /// its writer.
    public mutating func next(_ count: Int, now: Int64, keyID: String = "bench") -> PendingAccept {
        var notifications: [ServiceNotification] = []
        notifications.reserveCapacity(count)
        let batch = NotificationIDs.batch(milliseconds: now, using: &self.ids)
        for index in 0..<count {
            let id = NotificationIDs.notification(batch: batch, index: index)
            notifications.append(
                Self.notification(id: id, token: self.tokens.next(), payload: self.payload, topic: self.topic)
            )
        }
        return PendingAccept(
            keyID: keyID,
            idempotencyKey: nil,
            bodyHash: [],
            batch: batch,
            notifications: notifications,
            answer: StoredAnswer(status: 202, body: [])
        )
    }

    /// A notification as `NotificationBatch.read` accepts `{"token": TOKEN, "payload": PAYLOAD}` with the default
    /// topic `topic` and the id `id`.
    public static func notification(
        id: String,
        token: DeviceToken,
        payload: [UInt8],
        topic: String
    )
        -> ServiceNotification
    {
        // The id is the service's own UUID and nothing else is given: nothing for the headers to refuse.
        let headers = try! APNSRequestHeaders(pushType: .alert, id: id, topic: topic)
        return ServiceNotification(id: id, token: token, payload: payload, headers: headers)
    }
}
