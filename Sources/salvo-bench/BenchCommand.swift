import APNSWire
import ArgumentParser
import NIOCore
import SalvoBinary
import SalvoConsole
import SalvoRows

#if canImport(Glibc)
@preconcurrency import Glibc
#endif

/// `salvo-bench`: throughput measurements of a release build, kept out of the `salvo` product with the drivers and
/// sinks it runs. Allocation counts per frame come from the package benchmarks (`Benchmarks/`), which count every
/// malloc.
@main
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "salvo-bench",
        abstract: "Measure throughput (build with -c release).",
        subcommands: [Wire.self, Transport.self, Gateway.self, Send.self, H2.self, Queue.self]
    )

    /// Standard output is line-buffered even into a pipe or a file, as in `salvo`.
    static func main() async {
        setvbuf(stdout, nil, _IOLBF, 0)
        do {
            var command = try parseAsRoot()
            if var command = command as? AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
        } catch {
            exit(withError: error)
        }
    }

    struct Wire: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Frame encoding and decoding: command 2 frames with a 100-byte payload, on one core."
        )

        @Option(help: "Frames per measurement.")
        var frames: Int = 20_000_000

        @Option(help: "Measurements; the best is reported.")
        var rounds: Int = 3

        func validate() throws {
            guard self.frames > 0, self.frames <= 1_000_000_000 else {
                throw ValidationError("--frames must be between 1 and 1000000000 (got \(self.frames))")
            }
            guard self.rounds > 0, self.rounds <= 100 else {
                throw ValidationError("--rounds must be between 1 and 100 (got \(self.rounds))")
            }
        }

        func run() throws {
            let payload = try Payload(
                json:
                    #"{"aps":{"alert":"Benchmark notification","badge":1,"sound":"default"},"campaign":"c-0001","p":"xxx"}"#
            )
            let template = try FrameTemplate(command: .framed, payload: payload)
            var generator = TokenGenerator(seed: 7)
            let tokens = (0..<1024).map { _ in generator.next() }
            let batch = 4096
            var buffer = ByteBuffer()
            buffer.reserveCapacity(batch * template.frameByteCount)

            let encode = self.best {
                var written = 0
                for index in 0..<self.frames {
                    if index % batch == 0 {
                        written &+= buffer.readableBytes
                        buffer.clear()
                    }
                    template.write(
                        token: tokens[index & 1023],
                        identifier: UInt32(truncatingIfNeeded: index),
                        to: &buffer
                    )
                }
                return written
            }
            report(
                "encode (FrameTemplate.write)",
                frames: self.frames,
                seconds: encode,
                frameBytes: template.frameByteCount
            )

            buffer.clear()
            for index in 0..<batch {
                template.write(token: tokens[index & 1023], identifier: UInt32(index), to: &buffer)
            }
            let decoder = FrameDecoder()
            let decode = self.best {
                var remaining = self.frames
                var sum = 0
                while remaining > 0 {
                    var input = buffer
                    while remaining > 0, case .notification(let notification)? = decoder.decode(&input) {
                        sum &+= Int(notification.identifier)
                        remaining -= 1
                    }
                }
                return sum
            }
            report("decode (FrameDecoder)", frames: self.frames, seconds: decode, frameBytes: template.frameByteCount)
        }

        /// Runs `body` `rounds` times and returns the fastest run's seconds.
        private func best(_ body: () -> Int) -> Double {
            var fastest = Double.infinity
            var sink = 0
            for _ in 0..<self.rounds {
                let start = ContinuousClock.now
                sink &+= body()
                let elapsed = ContinuousClock.now - start
                let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
                fastest = min(fastest, seconds)
            }
            if sink == Int.min { print("") }  // keeps the work observable
            return fastest
        }

        private func report(_ name: String, frames: Int, seconds: Double, frameBytes: Int) {
            let rate = Double(frames) / seconds
            let megabytes = rate * Double(frameBytes) / 1e6
            print(
                "\(name): \(formatRate(rate)) frames/s, \(Int(megabytes)) MB/s "
                    + "(\(frames) frames of \(frameBytes) bytes in \(String(format3(seconds))) s)"
            )
        }
    }
}

/// `12.3 M`-style rates for people.
func formatRate(_ rate: Double) -> String {
    if rate >= 1e6 { return "\(format3(rate / 1e6)) M" }
    if rate >= 1e3 { return "\(format3(rate / 1e3)) k" }
    return format3(rate)
}

/// A number with three significant-ish decimals, without Foundation's formatters.
func format3(_ value: Double) -> String {
    let scaled = (value * 1000).rounded() / 1000
    return String(scaled)
}
