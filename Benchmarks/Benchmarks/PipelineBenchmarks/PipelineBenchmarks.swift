import APNSWire
import Benchmark
import Foundation
import NIOCore
import SalvoBinary
import SalvoRows

/// The binary sender's per-row work without the network: read a token file in chunks (`TokenSource.nextChunk`,
/// hex decoding included) and encode each row as a command-2 frame into a reused batch buffer, as a shard does
/// between flushes. One iteration is a whole file of 1 M rows, so `mallocCountTotal` is per million rows: the
/// allocations are about one per chunk of 4096 rows (about 300 per file), none per row. The per-row benchmark reads
/// the file as `salvo send` does (`open()`, one pass) and reports per row with `--scale`.
let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .mallocCountTotal, .peakMemoryResident],
        scalingFactor: .one,
        maxDuration: .seconds(20),
        maxIterations: 5
    )

    let rows = 1_000_000
    let chunkRows = 4096
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("salvo-pipeline-\(getpid()).csv").path
    var generator = TokenGenerator(seed: 42)
    var text = "token\n"
    text.reserveCapacity(rows * 65 + 6)
    for _ in 0..<rows {
        text += generator.next().hexString
        text += "\n"
    }
    precondition(FileManager.default.createFile(atPath: path, contents: Data(text.utf8)))

    let payload = try! Payload(
        json: #"{"aps":{"alert":"Benchmark notification","badge":1,"sound":"default"},"campaign":"c-0001","p":"xxx"}"#
    )
    let template = try! FrameTemplate(command: .framed, payload: payload)

    Benchmark("Token file to command-2 frames, 1 M rows in chunks of 4096") { benchmark in
        let source = TokenSource(files: [path])
        let summary = try source.validate()
        precondition(summary.validRows == rows)
        var buffer = ByteBuffer()
        buffer.reserveCapacity(chunkRows * template.frameByteCount)
        var identifier: UInt32 = 0
        benchmark.startMeasurement()
        while let chunk = try source.nextChunk(maximumRows: chunkRows) {
            buffer.clear()
            for row in chunk {
                template.write(token: row.token, identifier: identifier, to: &buffer)
                identifier &+= 1
            }
        }
        benchmark.stopMeasurement()
        precondition(identifier == UInt32(rows))
        blackHole(buffer.readableBytes)
    }

    // The path `salvo send` takes: the file opened and each row validated as it is taken (read once: scanned, hex
    // decoded, its hash kept for the repeat count), then encoded. The file holds exactly 1 M rows and the scaling
    // factor is a million, so with `--scale` every metric reads per row: CPU time, instructions (where the host has
    // the hardware counter; a virtual machine often has not) and allocations. Retains and
    // releases are counted only where the runtime's hooks can be (`.retainCount` and `.releaseCount` need the
    // benchmark package's runtime interposer with Swift 6.3 on Linux): a class reference, closure or existential
    // held per row shows there as about one per row, and here as instructions.
    Benchmark(
        "Per row: opened token file, validated as taken, encoded (1 M rows)",
        configuration: .init(
            metrics: [.wallClock, .cpuUser, .throughput, .instructions, .mallocCountTotal],
            scalingFactor: .mega
        )
    ) { benchmark in
        precondition(benchmark.scaledIterations.count == rows)
        let source = TokenSource(files: [path])
        var buffer = ByteBuffer()
        buffer.reserveCapacity(chunkRows * template.frameByteCount)
        var identifier: UInt32 = 0
        benchmark.startMeasurement()
        // A file longer than the first chunk is not validated whole: `open` returns no summary.
        let opened = try source.open()
        precondition(opened == nil)
        while let chunk = try source.nextChunk(maximumRows: chunkRows) {
            buffer.clear()
            for row in chunk {
                template.write(token: row.token, identifier: identifier, to: &buffer)
                identifier &+= 1
            }
        }
        benchmark.stopMeasurement()
        // The repeat count runs on a thread of its own once the last row is taken; waited for outside the measure.
        let summary = source.summary!
        precondition(summary.validRows == rows && identifier == UInt32(rows) && summary.duplicates == 0)
        blackHole(buffer.readableBytes)
    }
}
