import APNSWire
import ArgumentParser
import Foundation

/// `salvo payload check FILE`: is this payload sendable, and in which formats?
struct PayloadCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "payload",
        abstract: "Inspect notification payloads.",
        subcommands: [Check.self]
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
