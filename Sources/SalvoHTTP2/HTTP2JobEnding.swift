import NIOCore

/// How a job closes its connections once it has ended (every row answered, or a stop): all of them at once, never
/// one after another, and the job waits for the peers' goodbyes (the server's close_notify, its close) at most
/// `goodbyeWait`; a connection still open then is cut (TCP closed under TLS) and the job returns.
///
/// Closing delivers nothing: every row already has its answer. Waiting a little lets a healthy server finish a
/// clean close (its close_notify read, a FIN rather than a reset answering its last bytes); waiting longer only
/// delays the user. The bound is one round trip (a goodbye needs one), at least `minimumWait` (nearby, where a
/// round trip is under a millisecond, the close still takes event-loop turns and a busy server's scheduling), at
/// most `maximumWait`. Closed one after another, 16 connections 100 ms away took 1.6 s; together, about 0.1 s.
///
/// Events in, actions out; time comes from the caller (a fake clock in tests).
struct HTTP2JobEnding: Hashable, Sendable {
    /// The shortest wait for the goodbyes.
    static let minimumWait = TimeAmount.milliseconds(100)
    /// The longest, however far the server is.
    static let maximumWait = TimeAmount.seconds(1)

    /// How long a job waits for its connections' goodbyes: one round trip (the shortest measured, else the
    /// shortest TLS handshake), within `minimumWait`…`maximumWait`.
    static func goodbyeWait(roundTrip: TimeAmount?) -> TimeAmount {
        min(Self.maximumWait, max(Self.minimumWait, roundTrip ?? .zero))
    }

    /// What the driver does now.
    struct Actions: Hashable, Sendable {
        /// Connection places to close now (TLS close_notify, then the close).
        var close: [Int] = []
        /// Connection places whose close did not finish in time: closed at once, without waiting for the peer.
        var cut: [Int] = []
        /// When to call `tick` (nil: nothing to wait for).
        var wakeUpAt: NIODeadline?
        /// Every connection is closed: the job returns.
        var done = false
    }

    /// Connection places not yet closed.
    private(set) var open: Set<Int>
    /// When waiting for goodbyes ends.
    let deadline: NIODeadline
    private(set) var cutDone = false

    /// The job ended at `now` with `places` connection places (each may hold connections or none).
    init(places: Int, roundTrip: TimeAmount?, now: NIODeadline) {
        self.open = Set(0..<places)
        self.deadline = now + Self.goodbyeWait(roundTrip: roundTrip)
    }

    /// The first actions: every place is closed now, together.
    var start: Actions {
        guard !self.open.isEmpty else { return Actions(done: true) }
        return Actions(close: self.open.sorted(), wakeUpAt: self.deadline)
    }

    /// A place's connections are all closed.
    mutating func closed(_ place: Int) -> Actions {
        self.open.remove(place)
        return Actions(done: self.open.isEmpty)
    }

    /// The wake-up: past the deadline, the places still open are cut.
    mutating func tick(now: NIODeadline) -> Actions {
        guard !self.open.isEmpty else { return Actions(done: true) }
        guard now >= self.deadline else { return Actions(wakeUpAt: self.deadline) }
        guard !self.cutDone else {
            // A cut that never reports back (a socket close that never completes) ends the wait too.
            return now >= self.deadline + Self.maximumWait ? Actions(done: true) : Actions()
        }
        self.cutDone = true
        return Actions(cut: self.open.sorted(), wakeUpAt: self.deadline + Self.maximumWait)
    }
}
