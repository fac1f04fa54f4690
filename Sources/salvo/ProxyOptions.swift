import ArgumentParser
import Foundation
import SalvoConsole
import SalvoProxy

/// The proxy every connection of a command goes through (`send`, `check`, `channels`, `broadcast`, `feedback`,
/// `prune`): `--proxy`, else the environment's `https_proxy`/`HTTPS_PROXY`/`all_proxy`/`ALL_PROXY` unless
/// `no_proxy`/`NO_PROXY` names the gateway (curl's rules, `ProxyEnvironment`), unless `--no-proxy`.
struct ProxyOptions: ParsableArguments {
    @Option(
        name: .customLong("proxy"),
        help: ArgumentHelp(
            "Connect through this proxy: http://[user@]host:port (CONNECT) or socks5://[user@]host:port.",
            discussion: """
                Default: https_proxy, HTTPS_PROXY, all_proxy or ALL_PROXY, unless no_proxy or NO_PROXY names the \
                gateway (as curl reads them); --no-proxy ignores them. The password comes from the URL, --proxy-password-file or \
                SALVO_PROXY_PASSWORD, and is never shown.
                """,
            valueName: "url"
        )
    )
    var proxy: String?

    @Flag(name: .customLong("no-proxy"), help: "Connect directly, whatever the proxy environment variables say.")
    var noProxy = false

    @Option(
        name: .customLong("proxy-password-file"),
        help: ArgumentHelp("The proxy password: the file's first line (instead of one in the URL).", valueName: "file")
    )
    var passwordFile: String?

    func validate() throws {
        if self.noProxy && (self.proxy != nil || self.passwordFile != nil) {
            throw ValidationError("--no-proxy connects directly: it takes no --proxy or --proxy-password-file")
        }
        if let refusal = self.passwordFileWithoutProxy(environment: ProcessInfo.processInfo.environment) {
            throw ValidationError(refusal)
        }
    }

    /// Why `--proxy-password-file` cannot be used, when there is no proxy for it at all: no `--proxy` and none of
    /// the proxy variables set. A password file is given for a proxy, so one without any most likely means a
    /// mistyped or unexported variable, and the job would otherwise connect directly without a word. A variable
    /// that is set but bypassed by `no_proxy` for this gateway is not a mistake: the file is then unused.
    func passwordFileWithoutProxy(environment: [String: String]) -> String? {
        guard let file = self.passwordFile, self.proxy == nil, ProxyEnvironment(environment).proxy == nil else {
            return nil
        }
        return "--proxy-password-file \(file) gives a proxy password, but there is no proxy: no --proxy, and none of "
            + "https_proxy, HTTPS_PROXY, all_proxy, ALL_PROXY is set"
    }

    /// The proxy for a connection to `host`, or nil for a direct connection.
    ///
    /// - Throws: `UserError` (exit 3) for a URL that cannot be used, a password given twice or without a user, or a
    ///   password file that cannot be read; never with the password in the message.
    func configuration(
        forHost host: String,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> ProxyConfiguration? {
        guard !self.noProxy else { return nil }
        let text: String
        let source: String
        if let proxy = self.proxy {
            (text, source) = (proxy, "--proxy")
        } else if let found = ProxyEnvironment(environment).proxy(forHost: host) {
            (text, source) = (found.value, found.variable)
        } else {
            return nil
        }
        var configuration: ProxyConfiguration
        do {
            configuration = try ProxyConfiguration(url: text)
        } catch {
            throw UserError("\(source): \(error.message)")
        }
        var password: (value: String, from: String)?
        if let file = self.passwordFile {
            guard let contents = try? String(contentsOfFile: file, encoding: .utf8) else {
                throw UserError("--proxy-password-file \(file): cannot be read")
            }
            let line = contents.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            let value = line.hasSuffix("\r") ? String(line.dropLast()) : String(line)
            guard !value.isEmpty else { throw UserError("--proxy-password-file \(file): its first line is empty") }
            password = (value, "--proxy-password-file")
        } else if let value = environment["SALVO_PROXY_PASSWORD"], !value.isEmpty {
            password = (value, "SALVO_PROXY_PASSWORD")
        }
        if let password {
            guard configuration.password == nil else {
                throw UserError("the proxy password is given twice: in \(source)'s URL and by \(password.from)")
            }
            guard configuration.username != nil else {
                throw UserError("\(password.from) gives a proxy password, but \(source) names no user (user@host)")
            }
            configuration.password = password.value
        }
        return configuration
    }
}
