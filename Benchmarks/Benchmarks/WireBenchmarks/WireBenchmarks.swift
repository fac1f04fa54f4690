import APNSWire
import Benchmark
import NIOCore

/// Wire-format benchmarks. Each iteration of a `scaledIterations` loop is one frame (or token, or payload),
/// so `throughput` reads as frames per second and `mallocCountTotal` is the allocations of a whole run:
/// zero for frame encoding means zero per frame.
let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .mallocCountTotal, .instructions],
        scalingFactor: .mega,
        maxDuration: .seconds(10),
        maxIterations: 5,
        thresholds: [.mallocCountTotal: .init(absolute: [.p90: 0])]
    )

    // A 100-byte payload makes a 161-byte command 2 frame.
    let payload = try! Payload(
        json: #"{"aps":{"alert":"Benchmark notification","badge":1,"sound":"default"},"campaign":"c-0001","p":"xxx"}"#
    )
    let template = try! FrameTemplate(command: .framed, payload: payload)
    let tokens = (0..<1024).map { index in
        try! DeviceToken(bytes: (0..<32).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index &* 7) })
    }
    // Room for 4096 frames (644 KiB): the batch a shard fills between flushes, reused without reallocation.
    let batchFrames = 4096

    Benchmark("FrameTemplate.write command 2, 100-byte payload") { benchmark in
        var buffer = ByteBuffer()
        buffer.reserveCapacity(batchFrames * template.frameByteCount)
        benchmark.startMeasurement()
        for index in benchmark.scaledIterations {
            if index % batchFrames == 0 { buffer.clear() }
            template.write(token: tokens[index & 1023], identifier: UInt32(truncatingIfNeeded: index), to: &buffer)
        }
        blackHole(buffer.readableBytes)
    }

    // A template with two placeholders (a name, a badge count) over 1024 rows of fields, as a chunk holds them.
    let rowTemplates = PayloadTemplates(
        try! PayloadTemplate(
            json: Array(
                #"{"aps":{"alert":"Hello {{name}}, your order shipped","badge":"{{badge:int}}","sound":"default"},"campaign":"c-0001"}"#
                    .utf8
            ),
            file: "benchmark.json"
        )
    )
    var fieldBytes: [UInt8] = []
    var fieldBounds: [UInt32] = []
    for index in 0..<1024 {
        for value in ["Customer \"\(index)\" Ünal", String(index % 100)] {
            fieldBounds.append(UInt32(fieldBytes.count))
            fieldBytes.append(contentsOf: value.utf8)
            fieldBounds.append(UInt32(fieldBytes.count))
        }
    }
    let rowFrame = try! FrameTemplate(command: .framed, payload: rowTemplates.templates[0].probe)
    Benchmark("PayloadTemplate measure and render into a command 2 frame, two placeholders") { benchmark in
        var buffer = ByteBuffer()
        buffer.reserveCapacity(batchFrames * rowFrame.frameByteCount(payloadCount: 200))
        benchmark.startMeasurement()
        fieldBytes.withUnsafeBytes { bytes in
            fieldBounds.withUnsafeBufferPointer { bounds in
                for index in benchmark.scaledIterations {
                    if index % batchFrames == 0 { buffer.clear() }
                    let row = index & 1023
                    let fields = PayloadFields(
                        bytes: bytes,
                        bounds: UnsafeBufferPointer(rebasing: bounds[(row * 4)..<(row * 4 + 4)])
                    )
                    guard case .success(let (template, count)) = rowTemplates.measure(fields, limit: .binary) else {
                        fatalError("every row renders")
                    }
                    rowFrame.write(
                        token: tokens[row],
                        identifier: UInt32(truncatingIfNeeded: index),
                        payload: rowTemplates.templates[template],
                        fields: fields,
                        payloadCount: count,
                        to: &buffer
                    )
                }
            }
        }
        blackHole(buffer.readableBytes)
    }

    // What a templated send does per row: the payload rendered once, checked as it is written, into the chunk's
    // store when the row is taken; the frame then copies it.
    Benchmark("PayloadTemplates render once into a store, then a command 2 frame copies it, two placeholders") {
        benchmark in
        var store = [UInt8](repeating: 0, count: PayloadLimit.binary.bytes)
        var frames = [UInt8](repeating: 0, count: batchFrames * rowFrame.frameByteCount(payloadCount: 200))
        var written = 0
        benchmark.startMeasurement()
        fieldBytes.withUnsafeBytes { bytes in
            fieldBounds.withUnsafeBufferPointer { bounds in
                store.withUnsafeMutableBytes { store in
                    frames.withUnsafeMutableBytes { frames in
                        for index in benchmark.scaledIterations {
                            if index % batchFrames == 0 { written = 0 }
                            let row = index & 1023
                            let fields = PayloadFields(
                                bytes: bytes,
                                bounds: UnsafeBufferPointer(rebasing: bounds[(row * 4)..<(row * 4 + 4)])
                            )
                            guard
                                case .success(let (_, count)) = rowTemplates.render(fields, limit: .binary, into: store)
                            else { fatalError("every row renders") }
                            written += rowFrame.write(
                                token: tokens[row],
                                identifier: UInt32(truncatingIfNeeded: index),
                                payload: UnsafeRawBufferPointer(rebasing: store[0..<count]),
                                into: UnsafeMutableRawBufferPointer(rebasing: frames[written...])
                            )
                        }
                    }
                }
            }
        }
        blackHole(written)
    }

    let hexTokens: [[UInt8]] = tokens.map { Array($0.hexString.utf8) }
    Benchmark("DeviceToken hex decode") { benchmark in
        var sum: UInt64 = 0
        for index in benchmark.scaledIterations {
            let token = hexTokens[index & 1023].withUnsafeBytes { try! DeviceToken(hexUTF8: $0) }
            sum &+= UInt64(token.hashValue & 1)
        }
        blackHole(sum)
    }

    Benchmark(
        "Payload build (builder, compact JSON)",
        configuration: .init(scalingFactor: .kilo, thresholds: [:])
    ) { benchmark in
        for index in benchmark.scaledIterations {
            let built = Payload(
                aps: APS(alert: .text("Benchmark notification \(index & 7)"), badge: 1, sound: "default"),
                custom: [JSONMember("campaign", .string("c-0001"))]
            )
            blackHole(built.byteCount)
        }
    }

    Benchmark(
        "Payload parse and validate (guide example 2)",
        configuration: .init(scalingFactor: .kilo, thresholds: [:])
    ) { benchmark in
        let text = Array(
            #"{"aps":{"alert":{"title":"Game Request","body":"Bob wants to play poker","action-loc-key":"PLAY"},"badge":5},"acme1":"bar","acme2":["bang","whiz"]}"#
                .utf8
        )
        for _ in benchmark.scaledIterations {
            blackHole(try! Payload(jsonBytes: text).byteCount)
        }
    }

    Benchmark("FrameDecoder command 2, 100-byte payload") { benchmark in
        var encoded = ByteBuffer()
        encoded.reserveCapacity(batchFrames * template.frameByteCount)
        for index in 0..<batchFrames {
            template.write(token: tokens[index & 1023], identifier: UInt32(index), to: &encoded)
        }
        let decoder = FrameDecoder()
        benchmark.startMeasurement()
        var remaining = benchmark.scaledIterations.count
        var sum: UInt32 = 0
        while remaining > 0 {
            var input = encoded
            while remaining > 0, let result = decoder.decode(&input) {
                if case .notification(let notification) = result { sum &+= notification.identifier }
                remaining -= 1
            }
        }
        blackHole(sum)
    }
}
