import Logging

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// How log lines look: `text` for people, `json` (one object per line) for log collectors.
public enum LogFormat: String, Sendable, CaseIterable {
    case text
    case json
}

/// A swift-log handler that writes one JSON object per line to standard error: `time` (ISO 8601 with
/// milliseconds), `level`, `label`, `message` and the metadata's keys. One `write` per line, so lines of several
/// threads never interleave.
public struct JSONLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .info
    private let label: String

    public init(label: String) {
        self.label = label
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { self.metadata[key] }
        set { self.metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var all = self.metadata
        if let extra = event.metadata { all.merge(extra) { $1 } }
        let line = Self.line(
            time: Self.now(),
            level: event.level,
            label: self.label,
            message: "\(event.message)",
            metadata: all
        )
        line.utf8CString.withUnsafeBufferPointer { bytes in
            _ = write(STDERR_FILENO, bytes.baseAddress, bytes.count - 1)
        }
    }

    /// One log line, with its line end.
    public static func line(
        time: String = JSONLogHandler.now(),
        level: Logger.Level,
        label: String,
        message: String,
        metadata: Logger.Metadata
    ) -> String {
        var fields = [
            "\"time\":\(Self.quoted(time))", "\"level\":\(Self.quoted(level.rawValue))",
            "\"label\":\(Self.quoted(label))", "\"message\":\(Self.quoted(message))",
        ]
        for key in metadata.keys.sorted() where !["time", "level", "label", "message"].contains(key) {
            fields.append("\(Self.quoted(key)):\(Self.quoted("\(metadata[key]!)"))")
        }
        return "{" + fields.joined(separator: ",") + "}\n"
    }

    /// `text` as a JSON string: quotes, backslashes and control characters escaped.
    static func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    /// Now, in ISO 8601 with milliseconds (UTC).
    public static func now() -> String {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        var seconds = spec.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let milliseconds = Int(spec.tv_nsec / 1_000_000)
        let fraction =
            milliseconds < 10 ? "00\(milliseconds)" : milliseconds < 100 ? "0\(milliseconds)" : "\(milliseconds)"
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T\(two(parts.tm_hour)):"
            + "\(two(parts.tm_min)):\(two(parts.tm_sec)).\(fraction)Z"
    }
}

extension LoggingSystem {
    /// Sets up the process's logging once: lines on standard error in `format`, at `level` and above.
    public static func bootstrap(format: LogFormat, level: Logger.Level) {
        LoggingSystem.bootstrap { label in
            switch format {
            case .json:
                var handler = JSONLogHandler(label: label)
                handler.logLevel = level
                return handler
            case .text:
                var handler = StreamLogHandler.standardError(label: label)
                handler.logLevel = level
                return handler
            }
        }
    }
}
