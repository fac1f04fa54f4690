import ArgumentParser
import SalvoBenchmarkSupport
import SalvoConsole
import SalvoIO

extension BenchCommand {
    /// `salvo-bench transport`: bulk TLS throughput of one connection, io_uring and the socket fallback.
    struct Transport: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "TLS throughput of one connection to a local sink (AES-GCM, 64 KiB batches of 160-byte frames)."
        )

        @Option(help: "MiB per run.")
        var mebibytes: Int = 2048

        @Option(help: "Runs per transport; the best and the median are reported.")
        var runs: Int = 3

        func validate() throws {
            guard (1...65536).contains(self.mebibytes) else {
                throw ValidationError("--mebibytes is 1 to 65536 (got \(self.mebibytes))")
            }
            guard (1...20).contains(self.runs) else { throw ValidationError("--runs is 1 to 20 (got \(self.runs))") }
        }

        func run() throws {
            var failed = false
            for transport in [TransportKind.uring, .socket] {
                if transport == .uring, let refusal = TransportKind.uringRefusal {
                    print("uring: skipped, io_uring is refused here: \(refusal)")
                    continue
                }
                var results: [TransportBenchmark.Result] = []
                do {
                    for _ in 0..<self.runs {
                        results.append(try TransportBenchmark.run(transport: transport, bytes: self.mebibytes << 20))
                    }
                } catch {
                    print("\(transport): failed: \(error)")
                    failed = true
                    continue
                }
                results.sort { $0.megabytesPerSecond > $1.megabytesPerSecond }
                let median = results[results.count / 2].megabytesPerSecond
                print("\(results[0]); median of \(self.runs): \((median * 10).rounded() / 10) MB/s")
            }
            if failed { throw ExitCode(1) }
        }
    }
}
