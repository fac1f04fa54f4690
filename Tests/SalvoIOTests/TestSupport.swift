import Dispatch
import Foundation
import NIOCore
import SalvoIO
import SalvoTestSupport

/// A value delivered from some queue and awaited (bounded) by the test, without holding a thread while it waits.
final class Waiter<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value?
    private var next = 0
    private var waiting: [Int: CheckedContinuation<Value?, Never>] = [:]

    func fulfill(_ value: Value) {
        lock.lock()
        guard self.value == nil else {
            lock.unlock()
            return
        }
        self.value = value
        let waiting = self.waiting.values
        self.waiting.removeAll()
        lock.unlock()
        for continuation in waiting { continuation.resume(returning: value) }
    }

    /// The value, or nil if none came within `seconds`.
    func wait(seconds: Double = 20) async -> Value? {
        await withCheckedContinuation { (continuation: CheckedContinuation<Value?, Never>) in
            lock.lock()
            if let value = self.value {
                lock.unlock()
                return continuation.resume(returning: value)
            }
            next += 1
            let id = next
            waiting[id] = continuation
            lock.unlock()
            DispatchQueue.global().asyncAfter(deadline: .now() + seconds) {
                self.lock.lock()
                let late = self.waiting.removeValue(forKey: id)
                self.lock.unlock()
                late?.resume(returning: nil)
            }
        }
    }
}

extension DispatchQueue {
    /// `sync`, for a test's `async` body: `work` runs on this queue while the test waits without holding a thread.
    func onQueue<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in self.async { continuation.resume(returning: work()) } }
    }
}

/// Both transports, with io_uring left out (and the reason printed) where the probe refuses it.
enum Transports {
    static func available(_ kind: TransportKind) -> Bool {
        if kind == .uring, let refusal = TransportKind.uringRefusal {
            print("skipping the io_uring case: io_uring is refused here (\(refusal))")
            return false
        }
        return true
    }
}

enum TLSFixtures {
    static var certificates: CertificateFactory.Paths { CertificateFactory.sharedFolder }

    static func server(requireClientCertificate: Bool = true) throws -> TLSContext {
        let c = certificates
        return try TLSContext(
            configuration: .server(
                credentials: .pem(certificateChainFile: c.server, privateKeyFile: c.serverKey),
                clientCAFile: requireClientCertificate ? c.ca : nil
            )
        )
    }

    static func client(
        certificate: String? = certificates.client,
        key: String? = certificates.clientKey,
        trusting caFile: String = certificates.ca,
        cipherSuites: String? = nil
    ) throws -> TLSContext {
        var credentials: TLSCredentials?
        if let certificate, let key {
            credentials = .pem(certificateChainFile: certificate, privateKeyFile: key)
        }
        var configuration = TLSConfiguration.client(credentials: credentials, trustedCAFile: caFile)
        configuration.cipherSuites = cipherSuites
        return try TLSContext(configuration: configuration)
    }
}

/// A TLS server on 127.0.0.1 built with SalvoIO's server role, on its own queue and transport.
final class TestServer: @unchecked Sendable {
    let context: IOContext
    let listener: TLSListener
    var queue: DispatchQueue { context.queue }
    var port: Int { listener.port }

    init(
        transport: TransportKind,
        tls: TLSContext,
        host: String = "127.0.0.1",
        options: ConnectionOptions = ConnectionOptions(),
        onConnection: @escaping (Result<TLSConnection, SalvoIOError>) -> Void
    ) throws {
        context = try IOContext(queue: DispatchQueue(label: "test.server"), transport: transport)
        listener = try TLSListener(
            host: host,
            tls: tls,
            context: context,
            options: options,
            onConnection: onConnection
        )
    }

    func stop() {
        queue.sync { listener.close() }
    }
}

/// Connects a client on its own queue and waits (bounded) for the result.
func connectClient(
    transport: TransportKind,
    host: String = "127.0.0.1",
    port: Int,
    tls: TLSContext,
    serverName: String? = nil,
    options: ConnectionOptions = ConnectionOptions(),
    setUp: @escaping @Sendable (TLSConnection) -> Void = { _ in }
) async throws -> (IOContext, Result<TLSConnection, SalvoIOError>?) {
    let context = try IOContext(queue: DispatchQueue(label: "test.client"), transport: transport)
    let waiter = Waiter<Result<TLSConnection, SalvoIOError>>()
    context.queue.async {
        TLSConnection.connect(
            host: host,
            port: port,
            serverName: serverName,
            tls: tls,
            context: context,
            options: options
        ) { result in
            if case .success(let connection) = result {
                setUp(connection)
            }
            waiter.fulfill(result)
        }
    }
    return (context, await waiter.wait())
}

/// A deterministic, non-repeating byte stream in 64 KiB batches: a random block with the batch number
/// stamped at its start, so a lost, duplicated or reordered batch changes the digest.
final class BatchSource {
    static let batchSize = 64 * 1024
    private let block: [UInt8]
    private var batch: ByteBuffer
    private(set) var produced = 0
    let total: Int

    init(total: Int, seed: UInt64) {
        self.total = total
        var generator = SplitMix(seed: seed)
        var block = [UInt8](repeating: 0, count: Self.batchSize)
        for index in stride(from: 0, to: block.count, by: 8) {
            withUnsafeBytes(of: generator.next()) { bytes in
                for offset in 0..<8 { block[index + offset] = bytes[offset] }
            }
        }
        self.block = block
        batch = ByteBufferAllocator().buffer(capacity: Self.batchSize)
    }

    var finished: Bool { produced >= total }

    /// The next batch (valid until the next call), or nil at the end.
    func next() -> ByteBuffer? {
        guard produced < total else { return nil }
        let size = min(Self.batchSize, total - produced)
        batch.clear()
        batch.writeBytes(block[0..<size])
        let number = UInt64(produced / Self.batchSize)
        batch.setInteger(number, at: 0)
        produced += size
        return batch
    }
}

struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Sends a `BatchSource` through a connection, keeping two batches queued, digesting what it sends.
/// Confined to the connection's queue.
final class StreamSender: @unchecked Sendable {
    let connection: TLSConnection
    let source: BatchSource
    let digest = SHA256Stream()
    var error: SalvoIOError?
    let done = Waiter<String>()
    private var finished = false

    init(connection: TLSConnection, total: Int, seed: UInt64) {
        self.connection = connection
        source = BatchSource(total: total, seed: seed)
    }

    func start() {
        pump()
    }

    func pump() {
        // Bounded by the source's size; stops while two batches wait, and onWritable calls again.
        while connection.queuedBytes < 2 * BatchSource.batchSize, let batch = source.next() {
            digest.update(batch)
            do {
                try connection.write(batch)
            } catch {
                self.error = error as? SalvoIOError
                done.fulfill("error")
                return
            }
        }
        if source.finished, connection.queuedBytes == 0, !finished {
            finished = true
            done.fulfill(digest.finish())
        }
    }
}

/// Digests everything a connection receives until `expected` bytes arrived.
final class StreamReceiver: @unchecked Sendable {
    let digest = SHA256Stream()
    let expected: Int
    let done = Waiter<String>()
    var received = 0

    init(expected: Int) {
        self.expected = expected
    }

    func receive(_ buffer: ByteBuffer) {
        digest.update(buffer)
        received += buffer.readableBytes
        if received >= expected {
            done.fulfill(digest.finish())
        }
    }
}
