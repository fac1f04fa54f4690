import NIOConcurrencyHelpers
import SalvoHTTP2
import SalvoRows
import SalvoService

/// The question a fleet partition's job asks right before it writes a row: may this worker still write the
/// partition's rows? Not once its lease, as last renewed by a committed checkpoint, has less than the margin left
/// (`CampaignPartitions.mustStop`, read on the worker's own clock at the moment of the write): another worker may take
/// the partition over at the lease's end, and a worker that wakes from a stall (`SIGSTOP`, a long pause) learns so
/// from its clock before any checkpoint of its runs. Then every row is withheld (left unsent, or unanswered when a
/// send of it was lost) and the job is stopped. Called on the connections' event loops: a lock and a clock read.
final class PartitionWriteGate: HTTP2WriteGate {
    private let state: NIOLockedValueBox<(renewed: Int64, stopped: Bool)>
    private let lease: Int64
    private let margin: Int64
    private let now: @Sendable () -> Int64
    private let stop: JobStop

    /// - Parameters:
    ///   - claimedAt: when the partition was claimed (its lease's first start).
    ///   - stop: the partition job's stop, asked once the gate closes.
    init(claimedAt: Int64, fleet: CampaignFleet, now: @escaping @Sendable () -> Int64, stop: JobStop) {
        self.state = NIOLockedValueBox((claimedAt, false))
        self.lease = fleet.lease
        self.margin = fleet.margin
        self.now = now
        self.stop = stop
    }

    /// A checkpoint taken at `time` was committed under the claim's fence: the lease runs from then.
    func renewed(at time: Int64) {
        self.state.withLockedValue { $0.renewed = max($0.renewed, time) }
    }

    /// Whether the partition's rows may no longer be written at `time`.
    func isClosed(at time: Int64) -> Bool {
        let renewed = self.state.withLockedValue { $0.renewed }
        return CampaignPartitions.mustStop(lastRenewed: renewed, lease: self.lease, margin: self.margin, now: time)
    }

    /// The whole partition is one lease: once it may have run out, not a byte more leaves (the frames of rows taken
    /// before included).
    func forbidsEveryWrite() -> Bool {
        guard self.isClosed(at: self.now()) else { return false }
        self.stopOnce()
        return true
    }

    func withheld(_ lines: [Int]) -> Set<Int> {
        self.forbidsEveryWrite() ? Set(lines) : []
    }

    /// The job is asked to stop once: the streams already written keep the stop's grace for their answers.
    private func stopOnce() {
        let first = self.state.withLockedValue { state in
            defer { state.stopped = true }
            return !state.stopped
        }
        if first { self.stop.request(reason: "the partition's lease may have run out") }
    }
}
