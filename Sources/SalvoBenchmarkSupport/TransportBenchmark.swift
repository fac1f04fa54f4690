import Dispatch
import NIOConcurrencyHelpers
import NIOCore
import SalvoIO
import SalvoTestSupport

/// Bulk TLS throughput of one connection to a local sink on 127.0.0.1: the client writes batches of
/// 160-byte frames (the size of a typical binary-interface notification) with AES-GCM, the sink (same
/// process, its own queue and transport) decrypts and counts. Measures from the first write until the
/// sink has every byte. Meant for release builds.
public enum TransportBenchmark {
    /// One measurement.
    public struct Result: Sendable, CustomStringConvertible {
        /// The transport measured.
        public var transport: TransportKind
        /// The negotiated cipher suite.
        public var cipher: String
        /// Plaintext bytes the sink received.
        public var bytes: Int
        /// From the first write until the sink had every byte.
        public var seconds: Double
        /// Frame size used to express the rate in frames per second.
        public var frameSize: Int
        /// The client's transport counters.
        public var statistics: TransportStatistics

        /// Plaintext throughput in MB/s (10^6 bytes).
        public var megabytesPerSecond: Double { Double(bytes) / seconds / 1_000_000 }
        /// Whole frames per second.
        public var framesPerSecond: Double { Double(bytes / frameSize) / seconds }

        public var description: String {
            let mbps = (megabytesPerSecond * 10).rounded() / 10
            let frames = (framesPerSecond / 10_000).rounded() / 100
            let secs = (seconds * 1000).rounded() / 1000
            return "\(transport): \(mbps) MB/s, \(frames) M frames/s (\(frameSize) B) — \(bytes >> 20) MiB in "
                + "\(secs) s, \(cipher), sends \(statistics.sends), partial \(statistics.partialSends)"
        }
    }

    /// Runs one measurement over `transport`: `bytes` in batches of `batchSize` (bounded by `timeLimit`).
    /// Blocks the calling thread until done; call it from a plain thread, not from a connection's queue.
    public static func run(
        transport: TransportKind,
        bytes: Int = 2 << 30,
        batchSize: Int = 64 * 1024,
        frameSize: Int = 160,
        timeLimit: Duration = .seconds(30)
    ) throws -> Result {
        let certificates = CertificateFactory.sharedFolder
        var serverConfiguration = TLSConfiguration.server(
            credentials: .pem(certificateChainFile: certificates.server, privateKeyFile: certificates.serverKey)
        )
        serverConfiguration.cipherSuites = "TLS_AES_128_GCM_SHA256"
        var clientConfiguration = TLSConfiguration(
            role: .client,
            credentials: nil,
            trustedCAFile: nil,
            verifyPeer: false
        )
        clientConfiguration.cipherSuites = "TLS_AES_128_GCM_SHA256"
        let serverTLS = try TLSContext(configuration: serverConfiguration)
        let clientTLS = try TLSContext(configuration: clientConfiguration)

        let sinkContext = try IOContext(queue: DispatchQueue(label: "salvo.iobench.sink"), transport: transport)
        let clientContext = try IOContext(queue: DispatchQueue(label: "salvo.iobench.client"), transport: transport)
        let total = bytes - bytes % batchSize
        let done = DispatchSemaphore(value: 0)
        let failure = NIOLockedValueBox<SalvoIOError?>(nil)
        let state = BenchmarkState(total: total)

        let listener = try TLSListener(tls: serverTLS, context: sinkContext) { result in
            guard case .success(let connection) = result else { return }
            connection.onPlaintext = { buffer in
                state.received += buffer.readableBytes
                if state.received >= total, state.end == nil {
                    state.end = .now
                    done.signal()
                }
            }
        }

        clientContext.queue.async {
            TLSConnection.connect(host: "127.0.0.1", port: listener.port, tls: clientTLS, context: clientContext) {
                result in
                switch result {
                case .failure(let error):
                    failure.withLockedValue { $0 = error }
                    done.signal()
                case .success(let connection):
                    let producer = BenchmarkProducer(
                        connection: connection,
                        total: total,
                        batchSize: batchSize,
                        frameSize: frameSize
                    )
                    state.client = connection
                    state.start = .now
                    connection.onWritable = { producer.pump() }
                    connection.onClose = { end in
                        if let error = end.error {
                            failure.withLockedValue { $0 = error }
                            done.signal()
                        }
                    }
                    producer.pump()
                }
            }
        }

        let timedOut = done.wait(timeout: .now() + .milliseconds(Int(timeLimit / .milliseconds(1)))) == .timedOut
        if let error = failure.withLockedValue({ $0 }) {
            throw error
        }
        let result = clientContext.queue.sync { () -> Result in
            let end = sinkContext.queue.sync { state.end } ?? .now
            let start = state.start ?? end
            let received = sinkContext.queue.sync { state.received }
            let elapsed = start.duration(to: end)
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            let client = state.client
            let measured = Result(
                transport: transport,
                cipher: client?.cipherName ?? "?",
                bytes: received,
                seconds: seconds,
                frameSize: frameSize,
                statistics: client?.statistics ?? TransportStatistics()
            )
            client?.close()
            return measured
        }
        sinkContext.queue.sync { listener.close() }
        if timedOut {
            throw SalvoIOError(.timedOut, "benchmark over \(transport) did not finish within its time limit: \(result)")
        }
        return result
    }
}

/// Shared between the benchmark's two queues; each field is written by one queue (`received`, `end`:
/// the sink's; `start`, `client`: the client's) and read by the other only after the run ends.
private final class BenchmarkState: @unchecked Sendable {
    let total: Int
    var received = 0
    var start: ContinuousClock.Instant?
    var end: ContinuousClock.Instant?
    var client: TLSConnection?

    init(total: Int) {
        self.total = total
    }
}

/// Writes preallocated batches of frames, keeping at most two batches queued. Confined to the
/// connection's queue.
private final class BenchmarkProducer: @unchecked Sendable {
    let connection: TLSConnection
    let total: Int
    var written = 0
    var batch: ByteBuffer

    init(connection: TLSConnection, total: Int, batchSize: Int, frameSize: Int) {
        self.connection = connection
        self.total = total
        batch = ByteBufferAllocator().buffer(capacity: batchSize)
        // Frames shaped like binary-interface notifications: command byte, length, then filler.
        var frame = [UInt8](repeating: 0, count: frameSize)
        frame[0] = 2
        for index in 1..<frameSize {
            frame[index] = UInt8(truncatingIfNeeded: index &* 31)
        }
        while batch.readableBytes + frameSize <= batchSize {
            batch.writeBytes(frame)
        }
        let tail = batchSize - batch.readableBytes
        batch.writeBytes(frame[0..<tail])
    }

    func pump() {
        // Bounded by `total`; stops while two batches wait (onWritable calls again).
        while written < total, connection.queuedBytes < 2 * batch.readableBytes {
            do {
                try connection.write(batch)
            } catch {
                return
            }
            written += batch.readableBytes
        }
    }
}
