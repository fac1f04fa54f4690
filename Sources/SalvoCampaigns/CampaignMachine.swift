/// What a campaign is doing, as the API names it.
public enum CampaignState: String, CaseIterable, Hashable, Sendable {
    /// Waiting for its `send_at`.
    case scheduled
    /// Its job runs (or is about to, or is being stopped for a pause or a cancel).
    case running
    /// Stopped by a pause: its journal keeps what was settled, and a resume sends the rest.
    case paused
    /// Its job ended with every row given its outcome.
    case finished
    /// Stopped for good: the rows not sent are `notSent` in its report.
    case cancelled
    /// Its job could not run or could not go on (credentials refused, the gateway given up on, its input changed);
    /// a resume runs it again on its journal.
    case failed

    /// No operation changes it any more (a failed campaign can still be resumed or cancelled).
    public var isFinal: Bool { self == .finished || self == .cancelled }
}

/// Every decision about when campaigns run, as a value: which campaign starts when, what pause, resume and cancel
/// do in each state (and which of them are refused), what a job's end makes of its campaign, and what a restart
/// resumes. It takes events with the time (milliseconds since 1970) and returns actions; `CampaignRunner` carries
/// them out (runs and stops the jobs, records the states) and the tests drive it with a time of their own.
public struct CampaignMachine: Sendable {
    /// One campaign as the machine knows it.
    public struct Campaign: Hashable, Sendable {
        public var state: CampaignState
        /// When it is to start (milliseconds since 1970).
        public var sendAt: Int64
        /// A job runs for it (started and not yet ended): a run, or the closing run of a cancel.
        public var jobRunning = false
        /// Why its job is being stopped, when it is.
        public var stopping: StopReason?
        /// The state another worker of the fleet recorded, which this one's job is being stopped for.
        public var followed: CampaignState?

        public init(state: CampaignState, sendAt: Int64) {
            self.state = state
            self.sendAt = sendAt
        }
    }

    /// Why a running job is stopped.
    public enum StopReason: Hashable, Sendable {
        case pause
        case cancel
        /// The service stops: the campaign stays `running` and the next start resumes it.
        case shutdown
        /// Another worker of the fleet recorded another state (a pause, a cancel, a failure): this worker's part
        /// stops and the campaign takes that state, recorded already.
        case elsewhere
    }

    /// How a campaign's job ended.
    public enum JobEnd: Hashable, Sendable {
        /// Every row has its outcome.
        case finished
        /// Stopped before its end: by a request of ours (pause, cancel, shutdown), or on its own (credentials
        /// refused, the gateway given up on), with the reason.
        case stopped(String)
        /// It could not run (its input or journal refused it), with the reason.
        case failed(String)
    }

    public enum Action: Hashable, Sendable {
        /// Run the campaign's job: a new one, or its journal resumed.
        case start(String)
        /// Stop the campaign's job cleanly (the rows in flight settle, its journal keeps them).
        case stop(String, StopReason)
        /// Run the job of a cancelled campaign that has none running, stopped before its first row, so that its
        /// report counts every row not sent as `notSent` (and its unsettled file lists them).
        case closeOut(String)
        /// Record the campaign's new state (with the reason of a failure).
        case record(String, CampaignState, message: String?)
    }

    /// An operation the campaign's state does not allow.
    public struct Refusal: Error, Hashable, Sendable {
        public var id: String
        public var state: CampaignState
        public var reason: String
    }

    /// The operations of the API that change a campaign.
    public enum Operation: String, Hashable, Sendable {
        case pause, resume, cancel
    }

    public private(set) var campaigns: [String: Campaign] = [:]
    /// The service is stopping: no job starts any more.
    public private(set) var shuttingDown = false

    public init() {}

    // MARK: Events

    /// A campaign read from the store at a start: a running one is resumed at once (its journal says what is left);
    /// a scheduled one waits for its time (which may have passed: the next `tick` starts it); the others stay as
    /// they are.
    public mutating func restore(id: String, state: CampaignState, sendAt: Int64) -> [Action] {
        var campaign = Campaign(state: state, sendAt: sendAt)
        guard state == .running, !self.shuttingDown else {
            self.campaigns[id] = campaign
            return []
        }
        campaign.jobRunning = true
        self.campaigns[id] = campaign
        return [.start(id)]
    }

    /// A new campaign. One whose `sendAt` is not after `now` starts at once (`startedNow`); the others are
    /// scheduled. The caller has recorded it with the state returned.
    public mutating func create(
        id: String,
        sendAt: Int64,
        now: Int64
    ) -> (
        state: CampaignState, startedNow: Bool, actions: [Action]
    ) {
        guard sendAt <= now, !self.shuttingDown else {
            self.campaigns[id] = Campaign(state: .scheduled, sendAt: sendAt)
            return (.scheduled, false, [])
        }
        var campaign = Campaign(state: .running, sendAt: sendAt)
        campaign.jobRunning = true
        self.campaigns[id] = campaign
        return (.running, true, [.start(id)])
    }

    /// The time is `now`: every scheduled campaign whose time has come starts, oldest `sendAt` first.
    public mutating func tick(now: Int64) -> [Action] {
        guard !self.shuttingDown else { return [] }
        let due = self.campaigns.filter { $0.value.state == .scheduled && $0.value.sendAt <= now }
            .sorted { ($0.value.sendAt, $0.key) < ($1.value.sendAt, $1.key) }
        var actions: [Action] = []
        for (id, _) in due {
            self.campaigns[id]?.state = .running
            self.campaigns[id]?.jobRunning = true
            actions += [.record(id, .running, message: nil), .start(id)]
        }
        return actions
    }

    /// When the next scheduled campaign is due, if any is.
    public var nextDue: Int64? {
        self.campaigns.values.filter { $0.state == .scheduled }.map(\.sendAt).min()
    }

    /// `POST …/pause`: a running campaign's job is stopped (it is `paused` once the job has ended, `jobEnded`); a
    /// scheduled one is paused at once. Pausing a paused campaign changes nothing.
    ///
    /// - Throws: `Refusal` for a finished, cancelled or failed campaign, or one being cancelled.
    public mutating func pause(id: String) throws(Refusal) -> [Action] {
        let campaign = try self.campaign(id, for: .pause)
        switch campaign.state {
        case .paused:
            return []
        case .scheduled:
            self.campaigns[id]?.state = .paused
            return [.record(id, .paused, message: nil)]
        case .running:
            switch campaign.stopping {
            case .pause?: return []
            case .cancel?: throw Refusal(id: id, state: .running, reason: "the campaign is being cancelled")
            case .shutdown?: throw Refusal(id: id, state: .running, reason: "the service is stopping")
            case .elsewhere?:
                throw Refusal(id: id, state: .running, reason: "another worker of the fleet is stopping it")
            case nil:
                self.campaigns[id]?.stopping = .pause
                return [.stop(id, .pause)]
            }
        case .finished, .cancelled, .failed:
            throw Refusal(
                id: id,
                state: campaign.state,
                reason: "a \(campaign.state.rawValue) campaign cannot be paused"
            )
        }
    }

    /// `POST …/resume`: a paused or failed campaign runs again on its journal (or waits, scheduled, when its time
    /// has not come). Resuming a running or scheduled campaign changes nothing.
    ///
    /// - Throws: `Refusal` for a finished or cancelled campaign, one whose pause has not ended yet, or while the
    ///   service stops.
    public mutating func resume(id: String, now: Int64) throws(Refusal) -> [Action] {
        let campaign = try self.campaign(id, for: .resume)
        switch campaign.state {
        case .scheduled:
            return []
        case .running:
            guard campaign.stopping == nil else {
                throw Refusal(id: id, state: .running, reason: "the campaign is being stopped; resume it once paused")
            }
            return []
        case .paused, .failed:
            guard !self.shuttingDown else {
                throw Refusal(id: id, state: campaign.state, reason: "the service is stopping")
            }
            guard !campaign.jobRunning else {
                throw Refusal(id: id, state: campaign.state, reason: "the campaign's last run has not ended yet")
            }
            if campaign.sendAt > now {
                self.campaigns[id]?.state = .scheduled
                return [.record(id, .scheduled, message: nil)]
            }
            self.campaigns[id]?.state = .running
            self.campaigns[id]?.jobRunning = true
            return [.record(id, .running, message: nil), .start(id)]
        case .finished, .cancelled:
            throw Refusal(
                id: id,
                state: campaign.state,
                reason: "a \(campaign.state.rawValue) campaign cannot be resumed"
            )
        }
    }

    /// `POST …/cancel`: a running campaign's job is stopped and the campaign is `cancelled` once it has ended; a
    /// scheduled, paused or failed one is cancelled at once, and its closing run counts the rows not sent.
    /// Cancelling a cancelled campaign changes nothing.
    ///
    /// - Throws: `Refusal` for a finished campaign.
    public mutating func cancel(id: String) throws(Refusal) -> [Action] {
        let campaign = try self.campaign(id, for: .cancel)
        switch campaign.state {
        case .cancelled:
            return []
        case .running:
            guard campaign.stopping != .cancel else { return [] }
            self.campaigns[id]?.stopping = .cancel
            return [.stop(id, .cancel)]
        case .scheduled, .paused, .failed:
            self.campaigns[id]?.state = .cancelled
            guard !campaign.jobRunning, !self.shuttingDown else { return [.record(id, .cancelled, message: nil)] }
            self.campaigns[id]?.jobRunning = true
            return [.record(id, .cancelled, message: nil), .closeOut(id)]
        case .finished:
            throw Refusal(id: id, state: .finished, reason: "a finished campaign cannot be cancelled")
        }
    }

    /// A campaign's job ended: what that makes of the campaign.
    public mutating func jobEnded(id: String, _ end: JobEnd) -> [Action] {
        guard var campaign = self.campaigns[id] else { return [] }
        let stopping = campaign.stopping
        campaign.jobRunning = false
        campaign.stopping = nil
        defer { self.campaigns[id] = campaign }
        // A closing run (or any run that ends once the campaign is cancelled) changes nothing more.
        guard campaign.state == .running else { return [] }
        let next: (CampaignState, String?)?
        switch (end, stopping) {
        case (_, .cancel?):
            next = (.cancelled, nil)
        case (_, .elsewhere?):
            campaign.state = campaign.followed ?? campaign.state
            campaign.followed = nil
            return []
        case (.finished, _):
            next = (.finished, nil)
        case (.stopped, .pause?):
            next = (.paused, nil)
        case (.stopped, .shutdown?):
            // Stays running: the next start resumes it.
            next = nil
        case (.stopped(let reason), nil), (.failed(let reason), _):
            next = (.failed, reason)
        }
        guard let (state, message) = next else { return [] }
        campaign.state = state
        return [.record(id, state, message: message)]
    }

    /// A fleet's campaign as another worker recorded it (read from the shared store): one not known here is taken up
    /// (and its job started when it is running), one whose job runs here and is no longer `running` there has its job
    /// stopped (`elsewhere`: the state is taken once the job ended, not recorded again), and one without a job here
    /// takes the state, starting its job when it is `running`.
    public mutating func follow(id: String, state: CampaignState, sendAt: Int64) -> [Action] {
        guard var campaign = self.campaigns[id] else { return self.restore(id: id, state: state, sendAt: sendAt) }
        campaign.sendAt = sendAt
        defer { self.campaigns[id] = campaign }
        if campaign.jobRunning {
            guard state != .running, campaign.state == .running, campaign.stopping == nil else { return [] }
            campaign.stopping = .elsewhere
            campaign.followed = state
            return [.stop(id, .elsewhere)]
        }
        guard state != campaign.state else { return [] }
        campaign.state = state
        guard state == .running, !self.shuttingDown else { return [] }
        campaign.jobRunning = true
        return [.start(id)]
    }

    /// A campaign made (`create`) and then not recorded after all: as if it never was.
    public mutating func forget(id: String) {
        self.campaigns[id] = nil
    }

    /// The service stops: every running job is stopped, its campaign left `running` for the next start, and no
    /// job starts from here on.
    public mutating func shutdown() -> [Action] {
        self.shuttingDown = true
        var actions: [Action] = []
        for (id, campaign) in self.campaigns.sorted(by: { $0.key < $1.key }) where campaign.jobRunning {
            guard campaign.state == .running, campaign.stopping == nil else { continue }
            self.campaigns[id]?.stopping = .shutdown
            actions.append(.stop(id, .shutdown))
        }
        return actions
    }

    private func campaign(_ id: String, for operation: Operation) throws(Refusal) -> Campaign {
        guard let campaign = self.campaigns[id] else {
            // The runner answers 404 before it asks; a campaign unknown here is refused all the same.
            throw Refusal(id: id, state: .failed, reason: "no campaign \(id)")
        }
        return campaign
    }
}
