import ArgumentParser
import SalvoBenchmarkSupport
import SalvoConsole
import SalvoService
import SalvoServiceStores

extension BenchCommand {
    /// `salvo-bench queue`: the service's queue through its store alone (`QueueBenchmark`), without HTTP or a
    /// gateway: notifications accepted, claimed and answered a second, and what each costs the process and, on
    /// PostgreSQL, the server (CPU and write-ahead log). Checks at the end that the store has every notification
    /// delivered; exits 1 when not, 3 when the store fails.
    struct Queue: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "The service's queue through its store alone: notifications accepted, claimed and answered a second, embedded or on PostgreSQL (100-byte payload)."
        )

        @Option(
            help:
                "The store: a new folder (the embedded SQLite store), or postgres://USER@HOST:PORT/DATABASE (migrated first; it must hold no notification)."
        )
        var store: String

        @Option(
            name: [.customLong("postgres-password-file"), .customLong("password-file")],
            help: "With a PostgreSQL store: the file whose first line is the password (else the URL's, or PGPASSWORD)."
        )
        var passwordFile: String?

        @Option(
            help:
                "Workers, each a store of its own with its own loop on the same PostgreSQL database (claims with FOR UPDATE SKIP LOCKED); the embedded store has 1."
        )
        var workers = 1

        @Option(help: "Notifications in all, shared among the workers.")
        var rows = 200_000

        @Option(help: "Notifications a request.")
        var batch = 100

        @Option(help: "Requests a cycle takes at most (the requests that arrive while a cycle is written).")
        var requestsPerCycle = 16

        @Option(help: "Rows a cycle claims (the service's feed).")
        var claim = ServiceConfiguration.defaultFeedRows

        @Option(help: "The longest the run may take, in seconds (checked before every cycle).")
        var maxSeconds = 300.0

        func validate() throws {
            guard (1...50_000_000).contains(self.rows) else {
                throw ValidationError("--rows is 1 to 50000000 (got \(self.rows))")
            }
            guard (1...NotificationBatch.maximumNotifications).contains(self.batch) else {
                throw ValidationError(
                    "--batch is 1 to \(NotificationBatch.maximumNotifications), as a request (got \(self.batch))"
                )
            }
            guard (1...64).contains(self.workers) else {
                throw ValidationError("--workers is 1 to 64 (got \(self.workers))")
            }
            guard (1...10_000).contains(self.requestsPerCycle) else {
                throw ValidationError("--requests-per-cycle is 1 to 10000 (got \(self.requestsPerCycle))")
            }
            guard (1...100_000).contains(self.claim) else {
                throw ValidationError("--claim is 1 to 100000 (got \(self.claim))")
            }
            guard self.maxSeconds > 0, self.maxSeconds <= 86_400 else {
                throw ValidationError("--max-seconds is more than 0 and at most 86400 (got \(self.maxSeconds))")
            }
        }

        func run() async throws {
            var passed = false
            try await exitingOnUserError {
                passed = try await self.measure()
            }
            if !passed { throw ExitCode(1) }
        }

        /// - Returns: whether the check passed.
        private func measure() async throws -> Bool {
            let location: ServiceStoreLocation
            let stores: [any ServiceStore]
            do throws(StoreFailure) {
                location = try ServiceStoreLocation(self.store, passwordFile: self.passwordFile)
                stores = try await QueueBenchmarkStores.open(location, workers: self.workers)
            } catch {
                throw UserError(error.message)
            }
            var settings = QueueBenchmark.Settings()
            settings.rows = self.rows
            settings.batch = self.batch
            settings.requestsPerCycle = self.requestsPerCycle
            settings.claim = self.claim
            settings.maximumSeconds = self.maxSeconds
            let probe: PostgresServerProbe? =
                if case .postgres(let postgres) = location { PostgresServerProbe(location: postgres) } else { nil }
            let kind = probe == nil ? "embedded (SQLite)" : "PostgreSQL"
            print(
                "queue: \(kind) store \(location), \(self.workers) worker\(self.workers == 1 ? "" : "s"), "
                    + "\(self.rows) notifications in requests of \(self.batch), up to \(self.requestsPerCycle) a "
                    + "cycle, claims of \(self.claim)"
            )
            let outcome: (run: QueueBenchmark.Run, check: QueueBenchmark.Check, cpu: Double, server: ServerCost?)
            do throws(StoreFailure) {
                outcome = try await Self.measured(stores: stores, settings: settings, probe: probe)
            } catch {
                for store in stores { await store.close() }
                throw UserError(error.message)
            }
            for store in stores { await store.close() }
            self.report(outcome.run, check: outcome.check, cpu: outcome.cpu, server: outcome.server)
            return outcome.run.timedOut == false && outcome.run.claimedTwice == 0 && outcome.run.total.fenced == 0
                && outcome.check.passed
        }

        /// What the run cost the server: the difference of its samples around the run.
        struct ServerCost {
            var cpuSeconds: Double?
            var walBytes: UInt64
            var walRecords: Int64?
            var walFullPageImages: Int64?
            var walStatisticsBytes: Int64?
        }

        private static func measured(
            stores: [any ServiceStore],
            settings: QueueBenchmark.Settings,
            probe: PostgresServerProbe?
        ) async throws(StoreFailure) -> (QueueBenchmark.Run, QueueBenchmark.Check, Double, ServerCost?) {
            let before = try await probe?.sample()
            let cpuBefore = ResourceUsage.processCPUSeconds()
            let run = try await QueueBenchmark.run(stores: stores, settings: settings)
            let cpu = ResourceUsage.processCPUSeconds() - cpuBefore
            var cost: ServerCost?
            if let probe, let before {
                let after = try await probe.sample()
                cost = ServerCost(
                    cpuSeconds: before.cpuSeconds.flatMap { first in after.cpuSeconds.map { $0 - first } },
                    walBytes: after.walPosition &- before.walPosition,
                    walRecords: Self.difference(before.walStatistics?.records, after.walStatistics?.records),
                    walFullPageImages: Self.difference(
                        before.walStatistics?.fullPageImages,
                        after.walStatistics?.fullPageImages
                    ),
                    walStatisticsBytes: Self.difference(before.walStatistics?.bytes, after.walStatistics?.bytes)
                )
            }
            let check = try await QueueBenchmark.check(ids: run.ids, expected: settings.rows, in: stores[0])
            return (run, check, cpu, cost)
        }

        private static func difference(_ before: Int64?, _ after: Int64?) -> Int64? {
            guard let before, let after else { return nil }
            return after - before
        }

        private func report(_ run: QueueBenchmark.Run, check: QueueBenchmark.Check, cpu: Double, server: ServerCost?) {
            let total = run.total
            let seconds = max(run.seconds, 1e-9)
            /// `count` over `span` seconds.
            func rate(_ count: Int, _ span: Double?) -> String {
                span.map { "\(Self.grouped(Double(count) / max($0, 1e-9)))/s" } ?? "-"
            }
            func after(_ span: Double?) -> String { span.map { "after \(Self.fixed($0, 3)) s" } ?? "not all" }
            print(
                "accepted:  \(total.accepted) in \(total.requests) requests, all stored \(after(run.acceptSeconds)): "
                    + rate(total.accepted, run.acceptSeconds)
            )
            print(
                "claimed:   \(total.claimed) rows, all handed out \(after(run.claimSeconds)): "
                    + "\(rate(total.claimed, run.claimSeconds)) (\(total.claimedFromQueue) taken from the queue, "
                    + "\(total.claimed - total.claimedFromQueue) stored already handed out); "
                    + "\(total.claimStatements) claim statements, \(rate(total.claimStatements, seconds))"
            )
            print(
                "outcomes:  \(total.outcomes) committed, all after \(Self.fixed(seconds, 3)) s: \(rate(total.outcomes, seconds))"
            )
            print(
                "cycles:    \(total.cycles), \(rate(total.cycles, seconds)) (\(total.idle) found nothing to do; "
                    + "\(total.renewals) lease renewals)"
            )
            if run.workers.count > 1 {
                for (index, worker) in run.workers.enumerated() {
                    print(
                        "  worker \(index + 1): \(worker.cycles) cycles, \(worker.accepted) accepted, "
                            + "\(worker.claimed) claimed (\(worker.claimedFromQueue) from the queue), "
                            + "\(worker.outcomes) outcomes"
                    )
                }
            }
            let perRow = max(total.accepted, 1)
            print(
                "time:      \(Self.fixed(run.seconds, 3)) s; process CPU \(Self.fixed(cpu, 3)) s "
                    + "(\(Self.fixed(cpu / Double(perRow) * 1e6, 1)) µs a notification)"
            )
            if let server {
                if let cpuSeconds = server.cpuSeconds {
                    print(
                        "server:    CPU \(Self.fixed(cpuSeconds, 3)) s "
                            + "(\(Self.fixed(cpuSeconds / Double(perRow) * 1e6, 1)) µs a notification)"
                    )
                } else {
                    print("server:    CPU not measured (the server is not a process of this machine)")
                }
                var wal =
                    "WAL:       \(server.walBytes) bytes (\(Self.grouped(Double(server.walBytes) / Double(perRow))) "
                    + "a notification)"
                if let records = server.walRecords, let images = server.walFullPageImages {
                    wal +=
                        "; pg_stat_wal: \(records) records (\(Self.fixed(Double(records) / Double(perRow), 1)) a "
                        + "notification), \(images) full-page images"
                }
                print(wal)
            }
            if run.timedOut {
                print("check:     FAILED: --max-seconds \(Self.fixed(run.settings.maximumSeconds, 0)) passed first")
            }
            if run.claimedTwice > 0 || total.fenced > 0 {
                print("check:     FAILED: \(run.claimedTwice) rows claimed twice, \(total.fenced) outcomes fenced")
            }
            print(
                check.passed
                    ? "check:     every notification delivered (\(check.delivered) of \(check.expected))"
                    : "check:     FAILED: \(check.delivered) of \(check.expected) delivered "
                        + "(\(check.found) found in the store)"
            )
            // One line for scripts (Benchmarks/queue.sh).
            var fields: [(String, String)] = [
                ("store", server == nil ? "embedded" : "postgresql"), ("workers", "\(run.workers.count)"),
                ("rows", "\(total.accepted)"), ("seconds", Self.fixed(run.seconds, 3)),
                (
                    "accepted_per_s",
                    run.acceptSeconds.map { Self.fixed(Double(total.accepted) / max($0, 1e-9), 0) } ?? "-"
                ),
                ("claimed_per_s", run.claimSeconds.map { Self.fixed(Double(total.claimed) / max($0, 1e-9), 0) } ?? "-"),
                ("claim_statements_per_s", Self.fixed(Double(total.claimStatements) / seconds, 1)),
                ("outcomes_per_s", Self.fixed(Double(total.outcomes) / seconds, 0)),
                ("cycles_per_s", Self.fixed(Double(total.cycles) / seconds, 1)),
                ("process_cpu_s", Self.fixed(cpu, 3)),
            ]
            if let server {
                fields.append(("server_cpu_s", server.cpuSeconds.map { Self.fixed($0, 3) } ?? "-"))
                fields.append(("wal_bytes_per_row", Self.fixed(Double(server.walBytes) / Double(perRow), 0)))
            }
            let passed = !run.timedOut && run.claimedTwice == 0 && total.fenced == 0 && check.passed
            fields.append(("check", passed ? "passed" : "failed"))
            print("result " + fields.map { "\($0.0)=\($0.1)" }.joined(separator: " "))
        }

        /// `value` with `places` decimals.
        static func fixed(_ value: Double, _ places: Int) -> String {
            guard value.isFinite else { return "\(value)" }
            var scale = 1.0
            for _ in 0..<places { scale *= 10 }
            let rounded = (value * scale).rounded() / scale
            guard places > 0 else { return "\(Int64(rounded))" }
            let whole = Int64(rounded.magnitude)
            let fraction = Int64(((rounded.magnitude - Double(whole)) * scale).rounded())
            var digits = String(fraction)
            while digits.count < places { digits = "0" + digits }
            return (rounded < 0 ? "-" : "") + "\(whole).\(digits)"
        }

        /// A whole number with its thousands grouped: `61,305`.
        static func grouped(_ value: Double) -> String {
            let whole = Int64(value.rounded())
            var digits = Array(String(whole.magnitude))
            var index = digits.count - 3
            while index > 0 {
                digits.insert(",", at: index)
                index -= 3
            }
            return (whole < 0 ? "-" : "") + String(digits)
        }
    }
}
