import Foundation
import SalvoBroadcast
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The real `salvo` executable killed with SIGKILL in the middle of `channels create` and of `broadcast`, and run
/// again: no name gets a second channel, no channel gets an update twice, and then every channel is deleted.
@Suite(.tags(.process), .runs(.process), .serialized, .timeLimit(.minutes(4)))
struct BroadcastKillTests {
    /// `salvo`, built next to the test bundle (`TestProcess.salvoPath`).
    static var executable: String? { TestProcess.salvoPath }

    static let count = 1000

    @Test func killedRunsResumeWithoutDuplicatesAndEverythingIsDeleted() async throws {
        guard let salvo = Self.executable else {
            Issue.record("salvo is not built next to the tests (\(CommandLine.arguments[0]))")
            return
        }
        let service = try await BroadcastService.start()
        defer { Task { try? await service.simulator.shutdown() } }
        let paths = CertificateFactory.sharedFolder
        let folder = URL(fileURLWithPath: try scratchFolder("broadcast-kill"))
        let names = (1...Self.count).map { "match-\($0)" }
        try Data(("name\n" + names.joined(separator: "\n") + "\n").utf8)
            .write(to: folder.appendingPathComponent("names.csv"))
        try Data(BroadcastServiceTests.template.utf8).write(to: folder.appendingPathComponent("update.json"))
        let common = [
            "--bundle-id", BroadcastService.app, "--cert", paths.client, "--key", paths.clientKey, "--ca", paths.ca,
            "--server-name", "localhost",
        ]
        let management = common + ["--host", "127.0.0.1:\(service.simulator.channelManagementPort!)"]
        let create =
            ["channels", "create"] + management
            + ["--names", "names.csv", "--inventory", "inventory.csv", "--journal", "create-journal", "--quiet"]

        // Killed once a third of the names have their channel in the journal.
        let journal = folder.appendingPathComponent("create-journal/channels.jsonl").path
        let first = try TestProcess(salvo, create + ["--concurrency", "4"], in: folder, output: .nothing)
        var landed = false
        try await eventually("a third of the channels in the journal, or the run's end", timeout: .seconds(60)) {
            let text = (try? String(contentsOfFile: journal, encoding: .utf8)) ?? ""
            landed = text.components(separatedBy: #""kind":"created""#).count > Self.count / 3
            return landed || !first.isRunning
        }
        try await first.kill()
        #expect(landed, "the kill landed after the run ended")
        let createdAtKill = service.registry.snapshot().channelsCreated
        #expect(createdAtKill < Self.count)

        let (status, output) = try await TestProcess.run(salvo, create, in: folder)
        #expect(status == 0, "\(output)")
        // Exactly one channel per name ever made: a duplicate would have been a create too many.
        #expect(service.registry.snapshot().channelsCreated == Self.count)
        let inventory = try ChannelInventory.read(folder.appendingPathComponent("inventory.csv").path)
        #expect(inventory.entries.map(\.name).sorted() == names.sorted())
        let live = Set(service.registry.channels(app: BroadcastService.app))
        #expect(Set(inventory.entries.map(\.channelID)) == live && live.count == Self.count)

        // The broadcast, slowed to 400 a second so the kill lands mid-run.
        let push = common + ["--host", "127.0.0.1:\(service.simulator.http2Port!)"]
        let broadcast =
            ["broadcast", "inventory.csv", "--payload-template", "update.json"] + push
            + [
                "--journal", "broadcast-journal", "--report", "report.json", "--window", "4", "--rate", "400",
                "--quiet",
            ]
        let second = try TestProcess(salvo, broadcast, in: folder, output: .nothing)
        var midway = false
        try await eventually("a quarter of the updates, or the broadcast's end", timeout: .seconds(60)) {
            midway = service.registry.records().count > Self.count / 4
            return midway || !second.isRunning
        }
        try await second.kill()
        #expect(midway, "the kill landed after the broadcast ended")
        #expect(service.registry.records().count < Self.count)

        let (again, text) = try await TestProcess.run(salvo, broadcast, in: folder)
        // Rows whose answer the kill lost are uncertain (exit 1) and were not sent again.
        #expect(again == 0 || again == 1, "\(text)")
        let verdict = service.registry.verdict()
        #expect(verdict.duplicates == 0, "\(verdict.summary)")
        var perChannel: [String: Int] = [:]
        for record in service.registry.records() { perChannel[record.channelID, default: 0] += 1 }
        #expect(perChannel.values.allSatisfy { $0 == 1 })
        let unsettled = try String(
            contentsOfFile: folder.appendingPathComponent("report.json.unsettled.csv").path,
            encoding: .utf8
        )
        let uncertain = Set(unsettled.split(separator: "\n").dropFirst().map { String($0.split(separator: ",")[1]) })
        let missing = live.subtracting(perChannel.keys)
        #expect(missing.isSubset(of: uncertain), "\(missing.subtracting(uncertain))")
        #expect(uncertain.count <= 4, "at most the window was in flight at the kill: \(uncertain.count)")
        #expect(perChannel.count + missing.count == Self.count)

        // A third run sends nothing.
        let before = service.registry.records().count
        _ = try await TestProcess.run(salvo, broadcast, in: folder)
        #expect(service.registry.records().count == before)

        let delete = ["channels", "delete", "--inventory", "inventory.csv"] + management
        let (deleted, log) = try await TestProcess.run(salvo, delete, in: folder)
        #expect(deleted == 0, "\(log)")
        #expect(service.registry.channels(app: BroadcastService.app).isEmpty)
        #expect(try ChannelInventory.read(folder.appendingPathComponent("inventory.csv").path).entries.isEmpty)
    }
}
