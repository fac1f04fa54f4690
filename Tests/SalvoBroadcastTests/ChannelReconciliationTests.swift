import Foundation
import SalvoBroadcast
import SalvoRows
import SalvoTestTraits
import Testing

/// Settling creates a killed run left unanswered, from the journal and the app's channels (pure, no sockets).
@Suite(.tags(.pure), .runs(.pure)) struct ChannelReconciliationTests {
    /// A journal state: the job line, a baseline of `baseline`, `created` names with ids, then open `intents`.
    func state(baseline: [String], created: [(String, String)] = [], intents: [String]) -> ChannelCreationState {
        var state = ChannelCreationState()
        var job = ChannelJournalEvent(.job)
        job.bundleID = "com.example.scores"
        job.environment = .development
        job.policy = MessageStoragePolicy.none
        state.apply(job)
        var line = ChannelJournalEvent(.baseline, run: 1)
        line.ids = baseline
        state.apply(line)
        for (name, id) in created {
            state.apply(ChannelJournalEvent(.intent, run: 1, name: name))
            state.apply(ChannelJournalEvent(.created, run: 1, name: name, id: id))
        }
        for name in intents { state.apply(ChannelJournalEvent(.intent, run: 1, name: name)) }
        return state
    }

    @Test func aChannelThatAppearedForAnUnansweredCreateIsAdopted() {
        let state = self.state(baseline: ["old"], created: [("a", "ida")], intents: ["b", "c"])
        #expect(state.openIntents.map(\.name) == ["b", "c"])
        let current = ["old", "ida", "new1"]
        #expect(ChannelReconciliation.unknownChannels(state, current: current) == ["new1"])
        let result = ChannelReconciliation.reconcile(
            state,
            current: current,
            policies: ["new1": MessageStoragePolicy.none],
            policy: .none
        )
        #expect(result.adopted == [.init(name: "b", id: "new1")])
        #expect(result.retry == ["c"])
        #expect(result.unprovable.isEmpty)
    }

    @Test func nothingAppearedMeansTheCreatesMadeNothing() {
        let state = self.state(baseline: ["old"], intents: ["a", "b"])
        let result = ChannelReconciliation.reconcile(state, current: ["old"], policies: [:], policy: .none)
        #expect(result.adopted.isEmpty)
        #expect(result.retry == ["a", "b"])
    }

    @Test func moreChannelsThanCreatesProveAnotherCreatorAndNothingIsAttributed() {
        let state = self.state(baseline: [], intents: ["a"])
        let result = ChannelReconciliation.reconcile(
            state,
            current: ["x", "y"],
            policies: ["x": MessageStoragePolicy.none, "y": MessageStoragePolicy.none],
            policy: .none
        )
        #expect(result.adopted.isEmpty && result.retry.isEmpty)
        #expect(result.unprovable == ["a"])
        #expect(result.candidates == ["x", "y"])
        #expect(result.explanation?.contains("more than its 1 unanswered") == true)
    }

    @Test func aChannelOfAnotherPolicyOrUnreadableIsNotAttributed() {
        let state = self.state(baseline: [], intents: ["a", "b"])
        let other = ChannelReconciliation.reconcile(
            state,
            current: ["x"],
            policies: ["x": .mostRecent],
            policy: .none
        )
        #expect(other.unprovable == ["a", "b"])
        let unreadable = ChannelReconciliation.reconcile(state, current: ["x"], policies: [:], policy: .none)
        #expect(unreadable.unprovable == ["a", "b"])
    }

    @Test func outcomesCloseIntentsAndTheStateListsTheChannels() {
        var state = self.state(baseline: [], created: [("a", "ida")], intents: ["b", "c", "d"])
        var failed = ChannelJournalEvent(.failed, run: 1, name: "b")
        failed.reason = "FeatureNotEnabled"
        failed.status = 400
        state.apply(failed)
        state.apply(ChannelJournalEvent(.adopted, name: "c", id: "idc"))
        state.apply(ChannelJournalEvent(.forgotten, name: "d"))
        // A second outcome for a name that has a channel changes nothing.
        state.apply(ChannelJournalEvent(.created, run: 1, name: "a", id: "other"))
        #expect(state.openIntents.isEmpty)
        #expect(state.entries.map(\.channelID) == ["ida", "idc"])
        #expect(state.failures["b"] == ChannelFailure(status: 400, reason: "FeatureNotEnabled"))
        #expect(state.knownIDs == ["ida", "idc"])
    }

    @Test func theJournalFileSurvivesATornLastLine() throws {
        let folder = try scratchFolder("channel-journal")
        do {
            let journal = try ChannelJournal(directory: folder)
            var job = ChannelJournalEvent(.job)
            job.environment = .development
            job.policy = .mostRecent
            journal.append(job)
            journal.append(ChannelJournalEvent(.baseline, run: 1))
            journal.append(ChannelJournalEvent(.intent, run: 1, name: "a"))
            journal.append(ChannelJournalEvent(.created, run: 1, name: "a", id: "YQ=="))
            journal.append(ChannelJournalEvent(.intent, run: 1, name: "b"))
            try journal.sync()
        }
        // A kill in the middle of a write leaves half a line.
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: folder + "/channels.jsonl"))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(#"{"kind":"created","na"#.utf8))
        try handle.close()
        do {
            let reopened = try ChannelJournal(directory: folder)
            #expect(reopened.state.entries.map(\.channelID) == ["YQ=="])
            #expect(reopened.state.entries.first?.policy == .mostRecent)
            #expect(reopened.state.openIntents.map(\.name) == ["b"])
            reopened.append(ChannelJournalEvent(.failed, run: 1, name: "b"))
            try reopened.sync()
            // One run per journal: a second open while this one holds it is refused, naming the holder.
            let second = #expect(throws: JobError.self) { try ChannelJournal(directory: folder) }
            #expect(second?.message.contains("held by another run") == true)
            #expect(second?.message.contains("--wait-for-journal") == false)
            withExtendedLifetime(reopened) {}
        }
        let text = try String(contentsOfFile: folder + "/channels.jsonl", encoding: .utf8)
        #expect(!text.contains(#""na{"#))
        #expect(try ChannelJournal(directory: folder).state.openIntents.isEmpty)
    }
}
