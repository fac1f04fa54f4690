import APNSWire
internal import SalvoIO
import SalvoRows

extension BinaryConnectionMachine {
    struct Configuration {
        /// HOST:PORT, for messages.
        var gateway: String
        var command: FrameCommand
        var frameByteCount: Int
        /// 0: no expiry.
        var expiry: UInt32
        var flush: FlushPolicy
        var reconnect: ReconnectPolicy
        var settleNanoseconds: UInt64
        var peerReceiveBufferBytes: Int
        var windowCapacity: Int
        var processingErrorRetries: Int
        var onUncertain: OnUncertain
        /// Ciphertext the connection may hold unsent before encoding pauses.
        var queueLimitBytes: Int
        /// How long a barrier waits for its answer, and how long written bytes may wait to be read, counted from
        /// the last time the gateway's TCP acknowledged anything: a gateway silent that long is left (at least
        /// the settle time).
        var answerTimeoutNanoseconds: UInt64 = 10_000_000_000
    }
}

extension BinaryConnectionMachine.Configuration {
    /// The machine's share of a job's configuration.
    init(_ job: BinaryJobConfiguration, windowCapacity: Int) {
        self.init(
            gateway: "\(job.host):\(job.port)",
            command: job.template.command,
            frameByteCount: job.template.frameByteCount,
            expiry: job.template.expiry,
            flush: job.flush,
            reconnect: job.reconnect,
            settleNanoseconds: job.settle.nanoseconds,
            peerReceiveBufferBytes: job.peerReceiveBufferBytes,
            windowCapacity: windowCapacity,
            processingErrorRetries: job.processingErrorRetries,
            onUncertain: job.onUncertain,
            // Encoding pauses while the connection holds this much unsent: enough to keep the socket busy, little
            // enough that a connection that dies leaves few rows to settle.
            queueLimitBytes: 4 * job.flush.bytes,
            answerTimeoutNanoseconds: job.answerTimeout.nanoseconds
        )
    }
}

extension BinaryConnectionMachine.ConnectFailure {
    /// Certificate problems (every connect would fail the same way) are credentials; the rest is reachability.
    init(_ error: SalvoIOError) {
        switch error.code {
        case .unknownCA, .certificateExpired, .keyMismatch, .wrongPassphrase, .hostnameMismatch, .certificateRejected,
            .handshakeRefused, .unreadableCredential, .invalidConfiguration, .peerCertificateMissing:
            self = .credentials(error.message)
        case .nameResolution, .protocolMismatch, .proxyRefused:
            self = .hopeless(error.message)
        default:
            self = .unreachable(error.message)
        }
    }
}

/// Seconds since 1970, for expiry checks.
public func wallClockSeconds() -> Int {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    return now.tv_sec
}

#if canImport(Glibc)
import Glibc
#endif
