import APNSWire
import ArgumentParser
import Foundation
import SalvoConsole

/// `salvo payload check FILE`: is this payload sendable, and in which formats? `salvo payload liveactivity …`: a
/// Live Activity payload template.
struct PayloadCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "payload",
        abstract: "Inspect notification payloads, and write Live Activity payload templates.",
        subcommands: [Check.self, LiveActivity.self]
    )

    struct Check: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check a payload file: valid JSON with an aps object, its compact size, and the formats it fits."
        )

        @Argument(help: "A JSON payload file.")
        var file: String

        @Option(help: "The format to check against: legacy (commands 0/1), binary (command 2), h2, h2-voip.")
        var format: PayloadFormat = .binary

        @Option(help: "The priority it will be sent with (10 or 5; 1 for h2).")
        var priority: UInt8 = 10

        func validate() throws {
            // Apple defines 10, 5 and (HTTP/2 only) 1: anything else is refused on every send.
            let allowed: [UInt8] = self.format == .h2 || self.format == .h2VoIP ? [10, 5, 1] : [10, 5]
            guard allowed.contains(self.priority) else {
                throw ValidationError(
                    "--priority is \(allowed.map(String.init).joined(separator: ", ")) for --format "
                        + "\(self.format.rawValue), not \(self.priority)"
                )
            }
        }

        func run() throws {
            let payload: Payload
            do {
                payload = try Payload(jsonBytes: try readFile(self.file))
                try payload.check(limit: self.format.limit)
                try payload.check(priority: NotificationPriority(rawValue: self.priority))
            } catch let error as PayloadError {
                throw UserError("\(self.file): \(error.message)")
            }
            print("\(self.file): ok, \(payload.byteCount) bytes compact")
            for limit in [PayloadLimit.legacy, .binary, .http2, .http2VoIP] {
                let fits = payload.byteCount <= limit.bytes ? "fits" : "too large"
                print("  \(limit.name): \(fits) (limit \(limit.bytes))")
            }
            print(payload.text)
        }
    }
}

extension PayloadCommand {
    /// `salvo payload liveactivity --event update --content-state FILE|JSON …`: writes a payload template for
    /// `send --push-type liveactivity --payload-template`: the content state as written (its `{{column}}` slots are
    /// filled from each row), `timestamp` and the other times filled with the send time (`{{$now}}`,
    /// `{{$now+SECONDS}}`). The template is checked as `send` checks it before it is written.
    struct LiveActivity: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "liveactivity",
            abstract: "Write a Live Activity payload template (timestamp filled at send time, {{column}} per row)."
        )

        @Option(help: "start (push-to-start), update or end.")
        var event: String

        @Option(
            help:
                "The activity's ContentState: a JSON object, or a file holding one. Its strings may hold {{column}}; \"{{column:int}}\" as a whole value takes a number."
        )
        var contentState: String?

        @Option(help: "The activity turns stale this long after the send time (90s, 15m, 1h30m).")
        var staleIn: String?

        @Option(
            help: "With --event end: the activity leaves the Lock Screen this long after the send time (at most 4h)."
        )
        var dismissalIn: String?

        @Option(help: "The alert's title (lights the screen; required with --event start).")
        var alertTitle: String?

        @Option(help: "The alert's body.")
        var alertBody: String?

        @Option(help: "The alert's sound.")
        var sound: String?

        @Option(help: "The relevance score (Dynamic Island and order): a number, or {{column}}.")
        var relevanceScore: String?

        @Option(help: "With --event start: the ActivityAttributes type's name.")
        var attributesType: String?

        @Option(help: "With --event start: the activity's attributes, a JSON object or a file holding one.")
        var attributes: String?

        @Flag(help: "With --event start (iOS 18): the started activity issues an update token.")
        var inputPushToken = false

        @Option(help: "With --event start (iOS 18): the channel id the started activity subscribes to.")
        var inputPushChannel: String?

        @Option(help: "The priority it will be sent with (10 or 5): 10 is charged against the activity's budget.")
        var priority: UInt8 = 10

        @Option(help: "Where to write the template (default: standard output).")
        var output: String?

        func validate() throws {
            guard LiveActivityEvent(rawValue: self.event) != nil else {
                throw ValidationError("--event is start, update or end (got \(self.event))")
            }
            guard self.priority == 10 || self.priority == 5 else {
                throw ValidationError("--priority is 10 or 5 for a Live Activity (got \(self.priority))")
            }
            for (option, value) in [("--stale-in", self.staleIn), ("--dismissal-in", self.dismissalIn)] {
                guard let value else { continue }
                guard LiveActivityTemplate.seconds(value) != nil else {
                    throw ValidationError("\(option) is a duration such as 90s, 15m or 1h30m (got \(value))")
                }
            }
        }

        func run() throws {
            var template = LiveActivityTemplate(event: LiveActivityEvent(rawValue: self.event)!)
            do throws(LiveActivityTemplate.Failure) {
                if let state = self.contentState {
                    template.contentState = try Self.object(state, option: "--content-state")
                }
                if let attributes = self.attributes {
                    template.attributes = try Self.object(attributes, option: "--attributes")
                }
            } catch {
                throw UserError(error.description)
            }
            template.staleIn = self.staleIn.flatMap(LiveActivityTemplate.seconds)
            template.dismissalIn = self.dismissalIn.flatMap(LiveActivityTemplate.seconds)
            template.alertTitle = self.alertTitle
            template.alertBody = self.alertBody
            template.sound = self.sound
            template.relevanceScore = self.relevanceScore
            template.attributesType = self.attributesType
            template.inputPushToken = self.inputPushToken
            template.inputPushChannel = self.inputPushChannel
            // The template is made of the options alone: what it lacks or holds wrongly is a usage error (exit 64).
            let text: String
            do throws(LiveActivityTemplate.Failure) {
                text = LiveActivityTemplate.indented(try template.json())
            } catch {
                throw ValidationError(error.description)
            }
            // Checked as `send --push-type liveactivity` checks it: it compiles, and the rules hold.
            let name = self.output ?? "<standard output>"
            let compiled: PayloadTemplate
            do {
                compiled = try PayloadTemplate(json: Array(text.utf8), file: name)
            } catch {
                throw UserError(error.description)
            }
            let report = LiveActivityCheck.check(
                template: compiled,
                priority: NotificationPriority(rawValue: self.priority),
                now: Int64(Date().timeIntervalSince1970)
            )
            guard report.errors.isEmpty else {
                throw ValidationError(report.errors.map(\.description).joined(separator: "; "))
            }
            for warning in report.warnings { printError(warning.description, prefix: "Warning: ") }
            if let output = self.output {
                guard FileManager.default.createFile(atPath: output, contents: Data(text.utf8)) else {
                    throw UserError(
                        "\(output): cannot write the template (does the folder exist, and may it be written?)"
                    )
                }
                let columns = compiled.columns.isEmpty ? "none" : compiled.columns.joined(separator: ", ")
                print("\(output): \(compiled.literalByteCount) bytes with every field empty; columns: \(columns)")
            } else {
                print(text, terminator: "")
            }
        }

        /// `text` as JSON when it starts like an object, else the file it names.
        private static func object(
            _ text: String,
            option: String
        ) throws(LiveActivityTemplate.Failure)
            -> JSONValue
        {
            if text.drop(while: { $0 == " " || $0 == "\n" || $0 == "\t" }).first == "{" {
                return try LiveActivityTemplate.object(Array(text.utf8), option: option)
            }
            guard let data = FileManager.default.contents(atPath: text) else {
                throw LiveActivityTemplate.Failure(
                    option: option,
                    message: "\(text): neither a JSON object nor a file that can be read"
                )
            }
            return try LiveActivityTemplate.object([UInt8](data), option: "\(option) \(text)")
        }
    }
}

/// A payload format's name on the command line.
enum PayloadFormat: String, ExpressibleByArgument, CaseIterable {
    case legacy
    case binary
    case h2
    case h2VoIP = "h2-voip"

    var limit: PayloadLimit {
        switch self {
        case .legacy: .legacy
        case .binary: .binary
        case .h2: .http2
        case .h2VoIP: .http2VoIP
        }
    }
}

/// Reads a whole file, with an error that names it.
func readFile(_ path: String) throws -> [UInt8] {
    guard let data = FileManager.default.contents(atPath: path) else {
        throw UserError("\(path): cannot read the file (does it exist, and may it be read?)")
    }
    return [UInt8](data)
}
