import APNSWire
import ArgumentParser
import Foundation
import SalvoBinary
import SalvoConsole
import SalvoHTTP2
import SalvoIO
import SalvoRows
import SalvoSend

/// How to read the token files (shared by `send` and `demo`).
struct InputOptions: ParsableArguments {
    @Option(help: "The token column: a header name, or a 1-based column number.")
    var column: String = "token"

    @Option(help: "Whether the first row is a header: auto, present, absent.")
    var header: HeaderMode = .auto

    @Flag(help: "Refuse a token already seen earlier in the input (keeps a set of every token in memory).")
    var dedupe = false

    @Option(help: "How the column writes tokens: hex (64 digits, spaces or <…> allowed) or base64 (32 raw bytes).")
    var tokenEncoding: TokenEncoding = .hex

    @Option(
        help:
            "Send only partition K of N (K/N, K from 0): the rows whose token hashes to K; N workers with K = 0…N−1 send every row once."
    )
    var partition: String?

    @Option(
        name: .customLong("partition-from-env"),
        help:
            "Take K from this environment variable (e.g. JOB_COMPLETION_INDEX of a Kubernetes Indexed Job); needs --partitions."
    )
    var partitionVariable: String?

    @Option(help: "N, with --partition-from-env.")
    var partitions: Int?

    var tokenSourceOptions: TokenSource.Options {
        let column: TokenColumn = Int(self.column).map { .number($0) } ?? .name(self.column)
        // `validate()` has checked the partition.
        let partition = try? self.resolvedPartition()
        return TokenSource.Options(
            column: column,
            header: self.header,
            dedupe: self.dedupe,
            partition: partition,
            encoding: self.tokenEncoding
        )
    }

    func validate() throws {
        _ = try self.resolvedPartition()
    }

    /// `--partition K/N`, or K from `--partition-from-env VAR` with `--partitions N`; nil when neither is given.
    func resolvedPartition() throws(ValidationError) -> Partition? {
        switch (self.partition, self.partitionVariable, self.partitions) {
        case (nil, nil, nil):
            return nil
        case (let text?, nil, nil):
            guard let partition = Partition(text) else {
                throw ValidationError("--partition is K/N with 0 ≤ K < N (got \(text))")
            }
            return partition
        case (nil, let variable?, let count?):
            guard let value = ProcessInfo.processInfo.environment[variable] else {
                throw ValidationError("--partition-from-env \(variable): the variable is not set")
            }
            guard let index = Int(value), let partition = Partition(index: index, count: count) else {
                throw ValidationError(
                    "--partition-from-env \(variable)=\(value) with --partitions \(count): need 0 ≤ K < N"
                )
            }
            return partition
        default:
            throw ValidationError("give --partition K/N, or --partition-from-env VAR with --partitions N")
        }
    }
}

/// What to send and how (shared by `send` and `demo`).
struct DeliveryOptions: ParsableArguments {
    @Option(help: "The binary command: 2 (framed, priority, 2048-byte payloads), 1 (enhanced), 0 (simple).")
    var format: UInt8 = 2

    @Option(
        help:
            "Expiry: UNIX seconds, +SECONDS from now, or 0 = now or never (not stored for an offline device). Default: stored — HTTP/2 leaves apns-expiration out (APNs' storage policy), binary sends now + 30 days."
    )
    var expiry: String?

    @Option(
        help:
            "Priority: 10 (now) or 5 (power-friendly); command 2 and HTTP/2. Default: 10, or 5 for --push-type background."
    )
    var priority: UInt8?

    @Option(
        help: """
            Gateway connections, 1 to 64, or auto (the default): binary, one shard per core; HTTP/2, one per core \
            at first and more while the measured round trip needs them, up to --max-connections.
            """
    )
    var connections: ConnectionCount = .auto

    @Option(help: "HTTP/2 with --connections auto: the most connections, 1 to 256.")
    var maxConnections: Int = 32

    /// Binary shards: the fixed count, or one per core.
    var shards: Int {
        if case .fixed(let count) = self.connections { return count }
        return Processors.online
    }

    /// Applies `--connections` and `--max-connections` to an HTTP/2 client: a fixed count, or auto from one per
    /// core (at most the maximum) up to the maximum.
    func applyConnections(to client: inout HTTP2ClientConfiguration) {
        switch self.connections {
        case .fixed(let count):
            client.connections = count
            client.maximumConnections = nil
        case .auto:
            client.connections = min(Processors.online, self.maxConnections)
            client.maximumConnections = self.maxConnections
        }
    }

    @Option(help: "Write once this many bytes are encoded.")
    var flushBytes: Int = FlushPolicy.default.bytes

    @Option(help: "…or once the oldest encoded notification is this many microseconds old.")
    var flushMicroseconds: Int = Int(FlushPolicy.default.delay / .microseconds(1))

    @Option(help: "Milliseconds without an error after which a written notification is presumed accepted.")
    var settleMilliseconds: Int = 1000

    @Option(
        help: ArgumentHelp(
            "Unsettled notifications the job may hold in all (16 bytes each).",
            discussion: "Rows are presumed a settle time after the gateway read them, and a healthy connection is "
                + "never closed to settle them sooner, so this bounds the rate: at most window / settle time."
        )
    )
    var windowRows: Int = BinaryJobConfiguration.defaultWindowRows

    @Option(help: "Rows on a connection that ended without an answer: resend (at least once) or report (at most once).")
    var onUncertain: OnUncertain = .resend

    @Option(help: "Least milliseconds between two connects of one connection slot.")
    var reconnectFloorMilliseconds: Int = Int(ReconnectPolicy.default.minimumInterval / .milliseconds(1))

    @Option(
        help: ArgumentHelp(
            "Seconds with no row settled after which a stalled job stops (exit 3).",
            discussion: "Binary: connects failing all that time. HTTP/2: no answer all that time, whatever the job "
                + "waits on (no stream allowed, GOAWAY, refused streams, no SETTINGS, closed windows). A gateway "
                + "that refuses some connects while rows still settle is backed off from, never given up on."
        )
    )
    var giveUpSeconds: Int = Int(ReconnectPolicy.default.giveUpAfter.components.seconds)

    /// The reconnect policy both interfaces follow: `--reconnect-floor-milliseconds` and `--give-up-seconds`.
    func reconnectPolicy() -> ReconnectPolicy {
        var reconnect = ReconnectPolicy.default
        reconnect.minimumInterval = .milliseconds(self.reconnectFloorMilliseconds)
        reconnect.giveUpAfter = .seconds(self.giveUpSeconds)
        return reconnect
    }

    @Option(help: "Transport: uring or socket (default: SALVO_TRANSPORT, else io_uring where the kernel allows it).")
    var transport: BinaryTransport?

    /// `--transport`, else the `SALVO_TRANSPORT` environment variable (`socket` forces the fallback, `uring`
    /// requires io_uring, `auto` or unset lets the probe choose). Read here, not in the libraries: they take the
    /// choice as an argument.
    func transportChoice() throws -> BinaryTransport? {
        if let transport { return transport }
        guard let variable = ProcessInfo.processInfo.environment["SALVO_TRANSPORT"], variable != "auto" else {
            return nil
        }
        guard let transport = BinaryTransport(rawValue: variable) else {
            throw ValidationError("SALVO_TRANSPORT=\(variable) is not understood; use socket, uring or auto")
        }
        return transport
    }

    func validate() throws {
        guard [0, 1, 2].contains(self.format) else {
            throw ValidationError("--format is 0, 1 or 2 (got \(self.format))")
        }
        if let priority, priority != 10 && priority != 5 {
            throw ValidationError("--priority is 10 or 5 (got \(priority))")
        }
        if case .fixed(let count) = self.connections, !(1...64).contains(count) {
            throw ValidationError("--connections is 1 to 64 or auto (got \(count))")
        }
        guard (1...256).contains(self.maxConnections) else {
            throw ValidationError("--max-connections is 1 to 256 (got \(self.maxConnections))")
        }
        guard self.flushBytes >= 256 && self.flushBytes <= 16 << 20 else {
            throw ValidationError("--flush-bytes is 256 to 16777216 (got \(self.flushBytes))")
        }
        // Ranges, not only signs: a value past these would overflow a duration or ask for memory no machine has.
        let ranges: [(option: String, value: Int, range: ClosedRange<Int>)] = [
            ("--flush-microseconds", self.flushMicroseconds, 0...10_000_000),
            ("--settle-milliseconds", self.settleMilliseconds, 1...600_000),
            ("--window-rows", self.windowRows, 1024...100_000_000),
            ("--reconnect-floor-milliseconds", self.reconnectFloorMilliseconds, 0...60_000),
            ("--give-up-seconds", self.giveUpSeconds, 1...3600),
        ]
        for (option, value, range) in ranges where !range.contains(value) {
            throw ValidationError("\(option) is \(range.lowerBound) to \(range.upperBound) (got \(value))")
        }
        _ = try self.http2Expiration()
        _ = try self.transportChoice()
    }

    /// `--priority`, or when it is absent what the push type wants: 5 for background pushes (APNs refuses 10
    /// there), 10 otherwise.
    func resolvedPriority(for pushType: APNSPushType?) -> NotificationPriority {
        self.priority.map(NotificationPriority.init(rawValue:)) ?? (pushType ?? .alert).defaultPriority
    }

    /// How long a binary notification is stored for an offline device without `--expiry`: 30 days. APNs keeps a
    /// notification "for a limited period" of its own choosing; an expiry at least that far ahead leaves the
    /// decision to APNs, as HTTP/2 does when `apns-expiration` is left out, while a shorter one would drop
    /// notifications APNs would still have delivered.
    static let defaultStorageSeconds: UInt32 = 30 * 86_400

    /// `--expiry` as `apns-expiration`: nil (the header left out, so APNs stores the notification by its own
    /// policy) when the option is absent.
    func http2Expiration() throws -> UInt32? {
        guard let expiry = self.expiry else { return nil }
        if expiry.hasPrefix("+"), let relative = UInt32(expiry.dropFirst()) {
            return UInt32(truncatingIfNeeded: wallClockSeconds()) &+ relative
        }
        guard let absolute = UInt32(expiry) else {
            throw ValidationError("--expiry is UNIX seconds, +SECONDS or 0 (got \(expiry))")
        }
        return absolute
    }

    /// `--expiry` as the binary frame's expiry: without the option, `defaultStorageSeconds` from now (the frame
    /// has no way to say "APNs' policy").
    func binaryExpiry() throws -> UInt32 {
        try self.http2Expiration() ?? UInt32(truncatingIfNeeded: wallClockSeconds()) &+ Self.defaultStorageSeconds
    }

    func template(payloadFile: String) throws -> FrameTemplate {
        let payload: Payload
        do {
            payload = try Payload(jsonBytes: try readFile(payloadFile))
        } catch let error as PayloadError {
            throw UserError("\(payloadFile): \(error.message)")
        }
        return try self.template(payload: payload, file: payloadFile)
    }

    /// The frame of `payload` (read from `file`, named in messages) in the chosen command, expiry and priority.
    func template(payload: Payload, file payloadFile: String) throws -> FrameTemplate {
        let command = FrameCommand(rawValue: self.format)!
        do {
            return try FrameTemplate(
                command: command,
                payload: payload,
                expiry: try self.binaryExpiry(),
                priority: self.resolvedPriority(for: nil)
            )
        } catch let error as PayloadError {
            throw UserError("\(payloadFile): \(error.message)")
        }
    }

    func configuration(
        host: String,
        port: Int,
        serverName: String?,
        credentials: GatewayCredentials,
        template: FrameTemplate
    ) throws -> BinaryJobConfiguration {
        BinaryJobConfiguration(
            host: host,
            port: port,
            serverName: serverName,
            credentials: credentials,
            template: template,
            connections: self.shards,
            flush: FlushPolicy(bytes: self.flushBytes, delay: .microseconds(self.flushMicroseconds)),
            reconnect: self.reconnectPolicy(),
            settle: .milliseconds(self.settleMilliseconds),
            windowRows: self.windowRows,
            onUncertain: self.onUncertain,
            transport: try self.transportChoice()
        )
    }
}

// The library's option enums are the command line's values: no mirror enums to keep in step.
extension HeaderMode: ExpressibleByArgument {}
extension OnUncertain: ExpressibleByArgument {}
extension BinaryTransport: ExpressibleByArgument {}
extension TokenEncoding: ExpressibleByArgument {}

/// Where the results go (shared by `send` and `demo`).
struct OutputOptions: ParsableArguments {
    @Option(help: "Write the report as JSON to this file.")
    var report: String?

    @Option(help: "Write refused rows (bad input and gateway rejections) as CSV to this file.")
    var rejects: String?

    @Option(
        help:
            "Write every valid row not settled (uncertain, unanswered, unsent) as a token file to this file (default: next to --report, REPORT.unsettled.csv)."
    )
    var unsettled: String?

    @Flag(help: "No progress line, even on a terminal.")
    var quiet = false

    func outputs(unregistered: String? = nil) -> SendOutputs {
        SendOutputs(
            report: self.report,
            rejects: self.rejects,
            unregistered: unregistered,
            unsettled: self.unsettled ?? self.report.map(SendOutputs.unsettledPath(nextTo:))
        )
    }
}

#if canImport(Glibc)
import Glibc
#endif

/// How a send treats its journal folder besides naming it (`--journal`).
struct JournalOptions: ParsableArguments {
    @Option(
        name: .customLong("wait-for-journal"),
        help: ArgumentHelp(
            """
            With --journal: when another run holds the journal, wait up to this many seconds for it to end (default: \
            refuse at once, exit 3).
            """,
            valueName: "seconds"
        )
    )
    var waitForJournal: Double?

    @Flag(
        name: .customLong("journal-restart"),
        help: """
            With --journal: begin the job again in that folder, whatever it holds (a damaged or foreign journal \
            included). Rows an earlier run delivered may be sent again.
            """
    )
    var journalRestart = false

    func validate() throws {
        if let seconds = self.waitForJournal, !(seconds >= 0 && seconds <= 86_400) {
            throw ValidationError("--wait-for-journal is seconds from 0 to 86400 (got \(seconds))")
        }
    }

    /// The journal of a send whose `--journal` is `directory`, nil without one.
    func journal(_ directory: String?, settings: [String: String]) throws -> SendJournal? {
        guard let directory else {
            if self.waitForJournal != nil || self.journalRestart {
                throw ValidationError("--wait-for-journal and --journal-restart need --journal")
            }
            return nil
        }
        // The notice of a restart is the console's, once the run holds the journal (`SendConsole.run`).
        return SendJournal(
            directory: directory,
            settings: settings,
            waitSeconds: self.waitForJournal ?? 0,
            restart: self.journalRestart
        )
    }
}
