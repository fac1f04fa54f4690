import SalvoHTTP2
import SalvoRows

/// What the store records for a batch of the sending job's answers: a pure mapping, the one place where the job's
/// ends of a row (`HTTP2Answers`) become the API's states.
enum AnswerOutcomes {
    /// - Parameter at: when the answers came (milliseconds since 1970).
    static func updates(_ answers: HTTP2Answers, onUncertain: OnUncertain, at: Int64) -> [OutcomeUpdate] {
        var updates: [OutcomeUpdate] = []
        updates.reserveCapacity(answers.delivered.count + answers.refused.count + answers.unsettled.count)
        for delivery in answers.delivered {
            var update = OutcomeUpdate(seq: delivery.line, state: .delivered, at: at)
            update.status = 200
            update.apnsID = delivery.apnsID
            update.apnsUniqueID = delivery.apnsUniqueID
            // Sent again after a send that went unanswered: the first may have arrived too.
            update.uncertainResend = delivery.afterLoss
            updates.append(update)
        }
        for refusal in answers.refused {
            var update = OutcomeUpdate(seq: refusal.line, state: .refused, at: at)
            update.status = refusal.status
            update.reason = refusal.reason
            update.unregisteredAt = refusal.unregisteredSince
            updates.append(update)
        }
        for row in answers.unsettled {
            updates.append(Self.unsettled(row, onUncertain: onUncertain, at: at))
        }
        return updates
    }

    /// A row the job ended without an answer: never written (`unsent`) goes back to the queue; written and
    /// unanswered when the job stopped goes back too with `resend` (counted as an uncertain resend) and ends
    /// uncertain with `report`; one the job itself left uncertain (its resends used up, or `report`) ends uncertain.
    static func unsettled(_ row: UnsettledRow, onUncertain: OnUncertain, at: Int64) -> OutcomeUpdate {
        switch row.outcome {
        case .unsent:
            return OutcomeUpdate(seq: row.line, state: .queued, at: at)
        case .unanswered where onUncertain == .resend:
            var update = OutcomeUpdate(seq: row.line, state: .queued, at: at)
            update.uncertainResend = true
            return update
        case .unanswered, .uncertain, .connectionDropped:
            var update = OutcomeUpdate(seq: row.line, state: .uncertain, at: at)
            update.reason = "Unanswered"
            return update
        }
    }
}
