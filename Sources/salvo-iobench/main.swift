import SalvoIO

#if canImport(Glibc)
import Glibc
#endif

// salvo-iobench [MiB]: bulk TLS throughput of one connection over io_uring and over the socket fallback,
// one line per transport. Build with `swift build -c release`.
func runBenchmarks() -> Int32 {
    let mebibytes = CommandLine.arguments.dropFirst().first.flatMap { Int($0) } ?? 2048
    var status: Int32 = 0
    for transport in [TransportKind.uring, .socket] {
        if transport == .uring, let refusal = TransportKind.uringRefusal {
            print("uring: skipped, io_uring is refused here: \(refusal)")
            continue
        }
        do {
            let result = try TransportBenchmark.run(transport: transport, bytes: mebibytes << 20)
            print(result)
        } catch {
            print("\(transport): failed: \(error)")
            status = 1
        }
    }
    return status
}

exit(runBenchmarks())
