import Foundation
import SalvoService

/// One `serve --webhook` value: the receiver's URL and the kinds of event it takes,
/// `URL [events=gone,refused,outcome,campaign]` (every kind when `events=` is left out).
public struct WebhookEndpoint: Hashable, Sendable {
    /// The URL as given: also the endpoint's name in the outbox, so that a restart with the same option carries on
    /// with the same events.
    public var url: String
    public var kinds: Set<WebhookKind>

    public init(url: String, kinds: Set<WebhookKind> = Set(WebhookKind.allCases)) {
        self.url = url
        self.kinds = kinds
    }

    /// Reads `URL [events=K,K,…]`.
    ///
    /// - Throws: `WebhookOptionError` naming what is wrong: no URL, a URL that is not `http` or `https` with a
    ///   host, an unknown kind, an unknown word.
    public static func parse(_ text: String) throws(WebhookOptionError) -> WebhookEndpoint {
        let words = text.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        guard let url = words.first else { throw WebhookOptionError("--webhook needs a URL") }
        try Self.check(url)
        var kinds: Set<WebhookKind>?
        for word in words.dropFirst() {
            guard word.hasPrefix("events=") else {
                throw WebhookOptionError(
                    "--webhook \(url): \(word) is not understood (after the URL: events=gone,refused,outcome,campaign)"
                )
            }
            guard kinds == nil else { throw WebhookOptionError("--webhook \(url): events= is given twice") }
            var chosen: Set<WebhookKind> = []
            for name in word.dropFirst("events=".count).split(separator: ",", omittingEmptySubsequences: false) {
                guard let kind = WebhookKind(rawValue: String(name)) else {
                    let known = WebhookKind.allCases.map(\.rawValue).joined(separator: ", ")
                    throw WebhookOptionError("--webhook \(url): unknown event kind \"\(name)\" (known: \(known))")
                }
                chosen.insert(kind)
            }
            kinds = chosen
        }
        return WebhookEndpoint(url: url, kinds: kinds ?? Set(WebhookKind.allCases))
    }

    /// An absolute `http` or `https` URL with a host and no fragment.
    static func check(_ url: String) throws(WebhookOptionError) {
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
            scheme == "http" || scheme == "https"
        else {
            throw WebhookOptionError("--webhook \(Self.shown(url)): not an http:// or https:// URL")
        }
        guard let host = components.host, !host.isEmpty else {
            throw WebhookOptionError("--webhook \(Self.shown(url)): the URL has no host")
        }
        guard components.fragment == nil else {
            throw WebhookOptionError("--webhook \(Self.shown(url)): a webhook URL takes no #fragment")
        }
    }

    /// What logs and metrics call the endpoint: its URL without user, password or query (which may hold secrets).
    public var label: String {
        guard var components = URLComponents(string: self.url) else { return "webhook" }
        components.user = nil
        components.password = nil
        components.query = nil
        return components.string ?? "webhook"
    }

    private static func shown(_ text: String) -> String {
        text.count > 80 ? String(text.prefix(77)) + "..." : text
    }

    /// The routes of `endpoints`: which endpoint takes which kind.
    public static func routes(_ endpoints: [WebhookEndpoint]) -> WebhookRoutes {
        WebhookRoutes(endpoints.map { ($0.url, $0.kinds) })
    }
}

/// A `--webhook` or `--webhook-secret-file` value that cannot be used, and why.
public struct WebhookOptionError: Error, Hashable, Sendable, CustomStringConvertible {
    public var message: String

    public init(_ message: String) { self.message = message }

    public var description: String { self.message }
}

/// The secret the webhooks' bodies are signed with: never shown (its description is a placeholder).
public struct WebhookSecret: Sendable, CustomStringConvertible {
    let bytes: [UInt8]

    public init(bytes: [UInt8]) { self.bytes = bytes }

    /// The fewest bytes a secret may have.
    public static let minimumBytes = 16

    /// Reads the secret from `path`: the file's bytes without the line ends and blanks at its end.
    public static func load(path: String) throws(WebhookOptionError) -> WebhookSecret {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw WebhookOptionError("--webhook-secret-file \(path): cannot read the file")
        }
        var bytes = Array(data)
        while let last = bytes.last, [0x0A, 0x0D, 0x20, 0x09].contains(last) { bytes.removeLast() }
        guard bytes.count >= Self.minimumBytes else {
            throw WebhookOptionError(
                "--webhook-secret-file \(path): the secret has \(bytes.count) bytes; at least \(Self.minimumBytes)"
            )
        }
        return WebhookSecret(bytes: bytes)
    }

    public var description: String { "<webhook secret>" }
}
