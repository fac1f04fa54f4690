import SalvoIO

#if canImport(Glibc)
import Glibc
#endif

// salvo-iobench [MiB per run] [runs]: bulk TLS throughput of one connection over io_uring and over the
// socket fallback, one line per transport (the best run, and the median). Build with
// `swift build -c release`; on a shared machine the best run says most about the code.
func runBenchmarks() -> Int32 {
    let arguments = CommandLine.arguments.dropFirst().compactMap { Int($0) }
    let mebibytes = arguments.first ?? 2048
    let runs = max(1, min(arguments.dropFirst().first ?? 3, 20))
    var status: Int32 = 0
    for transport in [TransportKind.uring, .socket] {
        if transport == .uring, let refusal = TransportKind.uringRefusal {
            print("uring: skipped, io_uring is refused here: \(refusal)")
            continue
        }
        var results: [TransportBenchmark.Result] = []
        do {
            for _ in 0..<runs {
                results.append(try TransportBenchmark.run(transport: transport, bytes: mebibytes << 20))
            }
        } catch {
            print("\(transport): failed: \(error)")
            status = 1
            continue
        }
        results.sort { $0.megabytesPerSecond > $1.megabytesPerSecond }
        let median = results[results.count / 2].megabytesPerSecond
        print("\(results[0]); median of \(runs): \((median * 10).rounded() / 10) MB/s")
    }
    return status
}

exit(runBenchmarks())
