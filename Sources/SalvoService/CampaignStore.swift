/// Where the service keeps its campaigns' records: what each campaign is (its settings as the API took them), who
/// made it, its state and its times. The campaign's rows, journal and result files live in its folder beside the
/// store; the record is what a restart reads to know which campaigns to resume. One node keeps the records in the
/// notifications' SQLite file (`SQLiteNotificationStore`); a shared database would keep them behind the same
/// interface.
public protocol CampaignStore: Sendable {
    /// Every campaign, oldest first.
    func campaigns() async throws(StoreFailure) -> [CampaignRecord]

    /// The campaign with this id, or nil.
    func campaign(id: String) async throws(StoreFailure) -> CampaignRecord?

    /// Stores `record` durably, a new campaign or a campaign's new state (replacing the record of its id), with
    /// `events` put in the webhooks' outbox (for the endpoints of `routes`) in the same transaction.
    func putCampaign(
        _ record: CampaignRecord,
        events: [WebhookEvent],
        routes: WebhookRoutes
    ) async throws(StoreFailure)
}

extension CampaignStore {
    /// `putCampaign` with no event.
    public func putCampaign(_ record: CampaignRecord) async throws(StoreFailure) {
        try await self.putCampaign(record, events: [], routes: WebhookRoutes())
    }
}

/// A campaign as stored. The state is kept as its name (`CampaignState` is the campaigns' own type).
public struct CampaignRecord: Hashable, Sendable {
    public var id: String
    /// `scheduled`, `running`, `paused`, `finished`, `cancelled` or `failed`.
    public var state: String
    /// The campaign's settings, JSON, as the service rebuilds its job from them on every run.
    public var settings: [UInt8]
    /// The id of the API key that made it.
    public var createdBy: String
    /// Milliseconds since 1970.
    public var createdAt: Int64
    /// When it is to start (milliseconds since 1970).
    public var sendAt: Int64
    /// When its first run began, and when it reached a final state.
    public var startedAt: Int64?
    public var endedAt: Int64?
    /// Why it failed, or how it ended, for a person.
    public var message: String?

    public init(
        id: String,
        state: String,
        settings: [UInt8],
        createdBy: String,
        createdAt: Int64,
        sendAt: Int64,
        startedAt: Int64? = nil,
        endedAt: Int64? = nil,
        message: String? = nil
    ) {
        self.id = id
        self.state = state
        self.settings = settings
        self.createdBy = createdBy
        self.createdAt = createdAt
        self.sendAt = sendAt
        self.startedAt = startedAt
        self.endedAt = endedAt
        self.message = message
    }
}
