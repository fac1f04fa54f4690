import NIOConcurrencyHelpers
import NIOCore
import NIOSSL
import SalvoEngine

/// A job's connections: `configuration.connections` slots spread over the event loops of a group, each keeping
/// one connection open (and replacing it) while the job has work. When every slot has given up connecting, the
/// job stops with the connection errors as its explanation.
///
/// Thread-safe: slots are confined to their loops; the give-up count is locked.
final class HTTP2ConnectionPool: Sendable {
    private let slots: [HTTP2ConnectionSlot]

    init(
        configuration: HTTP2ClientConfiguration,
        sslContext: NIOSSLContext?,
        job: HTTP2JobContext,
        group: any EventLoopGroup
    ) {
        let gaveUp = NIOLockedValueBox(0)
        let count = configuration.connections
        let onGiveUp: @Sendable () -> Void = {
            let all = gaveUp.withLockedValue { value -> Bool in
                value += 1
                return value == count
            }
            guard all else { return }
            let errors = job.connectionErrors.withLockedValue { $0 }
            let detail = errors.suffix(3).joined(separator: "; ")
            job.work.stop(
                HTTP2JobStop(
                    reason: nil,
                    message: "cannot keep a connection to \(configuration.host):\(configuration.port) "
                        + "after \(configuration.reconnect.maximumAttempts) attempts per connection: \(detail)"
                )
            )
        }
        self.slots = (0..<count).map { index in
            HTTP2ConnectionSlot(
                eventLoop: group.next(),
                random: SplitMix64(seed: configuration.randomSeed &+ UInt64(index) &* 0x9E37_79B9_7F4A_7C15),
                configuration: configuration,
                sslContext: sslContext,
                job: job,
                onGiveUp: onGiveUp
            )
        }
    }

    func start() {
        for slot in self.slots { slot.start() }
    }

    /// Closes every connection.
    func stop() async {
        for slot in self.slots { try? await slot.stop().get() }
    }
}
