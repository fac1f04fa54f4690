import Dispatch
import Foundation
import SalvoEngine

#if canImport(Glibc)
import Glibc
#endif

/// SIGINT and SIGTERM during a send, as `DispatchSource` signal sources: the first asks the job to stop (it stops
/// taking rows and gives the rows in flight a short time to settle), the second stops it at once; either way the
/// summary, the report and the files are still written, and the process exits 128 + the signal (130, 143).
///
/// For a job that cannot be stopped in order (`stop` nil), a signal ends the process at once, as the default
/// action would.
///
/// `@unchecked Sendable`: `received` is confined to `queue`.
final class SignalStop: @unchecked Sendable {
    private let queue = DispatchQueue(label: "salvo.signals")
    private var sources: [DispatchSourceSignal] = []
    private var received: Int32?

    init(stop: JobStop?) {
        for number in [SIGINT, SIGTERM] {
            // The default action would end the process before the record is written.
            Glibc.signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: self.queue)
            source.setEventHandler { [weak self] in self?.handle(number, stop: stop) }
            source.resume()
            self.sources.append(source)
        }
    }

    private func handle(_ number: Int32, stop: JobStop?) {
        let name = number == SIGINT ? "SIGINT" : "SIGTERM"
        guard let stop else { exit(128 + number) }
        let first = self.received == nil
        if first { self.received = number }
        let message =
            first
            ? "\n\(name): stopping; rows in flight have \(Self.seconds(stop.grace)) s to settle (again to stop now)\n"
            : "\n\(name): stopping now\n"
        FileHandle.standardError.write(Data(message.utf8))
        stop.request(reason: "interrupted by \(name)")
    }

    /// The first signal received, if any.
    var signal: Int32? { self.queue.sync { self.received } }

    /// Puts the default actions back.
    func cancel() {
        for source in self.sources { source.cancel() }
        Glibc.signal(SIGINT, SIG_DFL)
        Glibc.signal(SIGTERM, SIG_DFL)
    }

    private static func seconds(_ duration: Duration) -> String {
        String(Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18)
    }
}
