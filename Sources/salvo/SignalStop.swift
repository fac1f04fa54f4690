import Dispatch
import Foundation
import SalvoBinary
import SalvoConsole
import SalvoRows
import SalvoSend

#if canImport(Glibc)
import Glibc
#endif

/// SIGINT and SIGTERM during a send, as `DispatchSource` signal sources: the first asks the job to stop (it stops
/// taking rows and gives the rows in flight a short time to settle), the second stops it at once; either way the
/// summary, the report and the files are still written, and the process exits 128 + the signal (130, 143).
///
/// The second signal also arms a deadline (`secondSignalDeadline`): a job that has not returned by then (a connection
/// stuck where the engine cannot see it, the unsettled file still being read out of a large input) is not waited
/// for: `CutShortRecord` writes what can be written and the process exits 128 + the signal.
///
/// For a job that cannot be stopped in order (`stop` nil), a signal ends the process at once, as the default
/// action would.
///
/// `@unchecked Sendable`: `received` and `armed` are confined to `queue`.
final class SignalStop: @unchecked Sendable {
    /// How long after the second signal the job may take to return before the process ends without it.
    static let secondSignalDeadline: Duration = .seconds(1)

    private let queue = DispatchQueue(label: "salvo.signals")
    private var sources: [DispatchSourceSignal] = []
    private var received: Int32?
    private var armed = false

    /// With `endsBeforeStart`, a signal before the job has started (work before it that does not watch for a stop:
    /// a query's rows or standard input being read) ends the process at once, 128 + the signal, nothing sent.
    init(stop: JobStop?, record: CutShortRecord? = nil, endsBeforeStart: Bool = false) {
        let registered = DispatchSemaphore(value: 0)
        for number in [SIGINT, SIGTERM] {
            // The default action would end the process before the record is written.
            Glibc.signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: self.queue)
            source.setEventHandler { [weak self] in
                self?.handle(number, stop: stop, record: record, endsBeforeStart: endsBeforeStart)
            }
            source.setRegistrationHandler { registered.signal() }
            source.resume()
            self.sources.append(source)
        }
        // A source is registered with the kernel on Dispatch's own thread, after `resume` returns: until then the
        // signal is ignored, and one sent then was lost (a CI run's SIGINT, sent as standard input began to be read,
        // went unheard). Waiting here for both, bounded, leaves no such gap once the watch is made.
        for _ in self.sources { _ = registered.wait(timeout: .now() + .seconds(2)) }
    }

    private func handle(_ number: Int32, stop: JobStop?, record: CutShortRecord?, endsBeforeStart: Bool) {
        let name = Self.name(number)
        guard let stop else { exit(128 + number) }
        let first = self.received == nil
        if first { self.received = number }
        let message: String
        if !first {
            message = "\n\(name): stopping now\n"
        } else if record?.hasBegun == false {
            // Nothing sent yet (waiting for the journal, reading the input's first chunk): a wait ends at once.
            message = "\n\(name): stopping (nothing sent yet)\n"
        } else {
            message =
                "\n\(name): stopping; rows in flight have \(Self.seconds(stop.grace)) s to settle (again to stop now)\n"
        }
        FileHandle.standardError.write(Data(message.utf8))
        if endsBeforeStart {
            stop.request(reason: "interrupted by \(name)") {
                FileHandle.standardError.write(Data("\(name): stopped before the job began: nothing was sent\n".utf8))
                exit(128 + number)
            }
        } else {
            stop.request(reason: "interrupted by \(name)")
        }
        guard !first, !self.armed else { return }
        self.armed = true
        let deadline = Self.secondSignalDeadline
        self.queue.asyncAfter(deadline: .now() + Self.interval(deadline)) {
            // The first signal's number decides the status, as it does when the job returns.
            let status = self.received ?? number
            guard let record else { exit(128 + status) }
            Self.end(record.deadlinePassed(second: name, after: deadline), status: status)
        }
    }

    /// Ends the process as the record's deadline says: at once when the send never began, with the record printed
    /// when it was written; a job that returned or whose record was whole ends by itself.
    private static func end(_ ending: CutShortRecord.Ending, status: Int32) {
        switch ending {
        case .jobReturned, .jobRecordWhole:
            return
        case .notStarted(let message):
            printError(message)
            _exit(128 + status)
        case .written(let report, let errors, let outputs):
            print(SendConsole.terminalSafe(report.summary))
            for error in errors { printError(error) }
            fflush(nil)
            // Once more: a file the job began meanwhile (its spill's first row) is not left behind.
            outputs.clearLeftovers()
            // Not `exit`: the job's threads still run, and the process's exit handlers must not run under them.
            _exit(128 + status)
        }
    }

    /// The first signal received, if any.
    var signal: Int32? { self.queue.sync { self.received } }

    /// Ends the watch: the default actions come back, unless a signal was received. Then the process is on its way
    /// out with 128 + that signal, its record written, and a second signal in that last moment (after the job returned,
    /// before the process exited) must not kill it by the default action, which would end it with the signal itself
    /// instead of the documented status: the signals stay ignored.
    func cancel() {
        for source in self.sources { source.cancel() }
        guard self.signal == nil else { return }
        Glibc.signal(SIGINT, SIG_DFL)
        Glibc.signal(SIGTERM, SIG_DFL)
    }

    static func name(_ number: Int32) -> String { number == SIGINT ? "SIGINT" : "SIGTERM" }

    static func interval(_ duration: Duration) -> DispatchTimeInterval {
        let (seconds, attoseconds) = duration.components
        return .nanoseconds(Int(max(0, seconds * 1_000_000_000 + attoseconds / 1_000_000_000)))
    }

    static func seconds(_ duration: Duration) -> String {
        String(Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18)
    }
}
