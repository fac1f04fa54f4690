import SalvoPostgres
import SalvoTestTraits
import Testing

/// Which spool a run of `--from-postgres` reads (`PostgresSourcePlan`): decided from what the journal folder holds,
/// with no server and no file.
@Suite(.tags(.pure), .runs(.pure)) struct PostgresSourcePlanTests {
    static let query = "SELECT token FROM devices"
    static let server = "db.example:5432/app"
    static let sameJob = ["--query": Self.query, "--from-postgres": Self.server]

    static func decide(_ journal: PostgresSourcePlan.Journal?) -> PostgresSourcePlan {
        PostgresSourcePlan.decide(journal: journal, query: Self.query, server: Self.server)
    }

    @Test func withoutAJournalTheRowsAreStreamed() {
        #expect(Self.decide(nil) == .stream)
    }

    @Test func aNewJournalTakesASnapshotFirst() {
        let journal = PostgresSourcePlan.Journal(directory: "/j", holdsSnapshotAndJob: false)
        #expect(Self.decide(journal) == .snapshot(journal: "/j"))
    }

    @Test func aJournalWithItsSnapshotAndJobResumesAgainstIt() {
        let journal = PostgresSourcePlan.Journal(
            directory: "/j",
            holdsSnapshotAndJob: true,
            storedSettings: Self.sameJob
        )
        #expect(Self.decide(journal) == .resume(snapshot: PostgresSpool.journalPath("/j"), announce: true))
    }

    @Test func aRestartTakesANewSnapshotWhateverTheFolderHolds() {
        let journal = PostgresSourcePlan.Journal(
            directory: "/j",
            restart: true,
            holdsSnapshotAndJob: true,
            storedSettings: Self.sameJob
        )
        #expect(Self.decide(journal) == .snapshot(journal: "/j"))
    }

    /// Another query or server: the journal refuses the run, naming the option; no note of a snapshot is given.
    @Test(arguments: [
        ["--query": "SELECT 1", "--from-postgres": Self.server],
        ["--query": Self.query, "--from-postgres": "other:5432/app"],
        [:],
    ])
    func aJournalOfAnotherJobResumesWithoutTheNote(settings: [String: String]) {
        let journal = PostgresSourcePlan.Journal(directory: "/j", holdsSnapshotAndJob: true, storedSettings: settings)
        #expect(Self.decide(journal) == .resume(snapshot: PostgresSpool.journalPath("/j"), announce: false))
    }

    @Test func aManifestThatCannotBeReadResumesWithoutTheNote() {
        let journal = PostgresSourcePlan.Journal(directory: "/j", holdsSnapshotAndJob: true, storedSettings: nil)
        #expect(Self.decide(journal) == .resume(snapshot: PostgresSpool.journalPath("/j"), announce: false))
    }
}
