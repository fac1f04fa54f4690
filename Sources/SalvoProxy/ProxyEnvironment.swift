/// The proxy a connection takes from the environment, by curl's rules for an `https://` URL: `https_proxy`, then
/// `HTTPS_PROXY`, then `all_proxy`, then `ALL_PROXY` (an empty value counts as unset); `no_proxy` (then `NO_PROXY`)
/// lists the hosts reached directly. Both interfaces follow the same rules (the binary gateway is TLS too).
///
/// A value, tested without an environment: the command line hands it `ProcessInfo`'s.
public struct ProxyEnvironment: Sendable {
    /// The variable the proxy came from, and its value.
    public var proxy: (variable: String, value: String)?
    /// The `no_proxy` list, nil when unset.
    public var noProxy: String?

    public init(_ environment: [String: String]) {
        func value(_ name: String) -> (String, String)? {
            guard let value = environment[name], !value.isEmpty else { return nil }
            return (name, value)
        }
        self.proxy = value("https_proxy") ?? value("HTTPS_PROXY") ?? value("all_proxy") ?? value("ALL_PROXY")
        self.noProxy = value("no_proxy")?.1 ?? value("NO_PROXY")?.1
    }

    /// The proxy URL text for a connection to `host`, or nil when there is none or `no_proxy` names the host.
    public func proxy(forHost host: String) -> (variable: String, value: String)? {
        guard let proxy = self.proxy else { return nil }
        if let noProxy = self.noProxy, Self.bypasses(host: host, noProxy: noProxy) { return nil }
        return proxy
    }

    /// Whether `noProxy` (comma- or space-separated) names `host`, as curl reads it: `*` alone names every host; a
    /// name names itself and every name under it (`example.com` and `.example.com` both name `api.example.com`); an
    /// IP address names itself, and `a.b.c.d/n` an IPv4 network. Letter case is ignored; ports are not looked at.
    public static func bypasses(host: String, noProxy: String) -> Bool {
        let host = Self.bare(host.lowercased())
        let entries = noProxy.lowercased().split(whereSeparator: { $0 == "," || $0 == " " || $0 == "\t" })
        for entry in entries {
            var pattern = String(entry)
            if pattern == "*" { return true }
            if let slash = pattern.firstIndex(of: "/") {
                if Self.inNetwork(host, String(pattern[..<slash]), bits: Int(pattern[pattern.index(after: slash)...])) {
                    return true
                }
                continue
            }
            pattern = Self.bare(pattern)
            // A port in the entry (`host:443`) is dropped, as the port is not compared.
            if let colon = pattern.lastIndex(of: ":"), !pattern.contains("::"), pattern.filter({ $0 == ":" }).count == 1
            {
                pattern = String(pattern[..<colon])
            }
            while pattern.hasPrefix(".") { pattern.removeFirst() }
            while pattern.hasSuffix(".") { pattern.removeLast() }
            guard !pattern.isEmpty else { continue }
            var name = host
            while name.hasSuffix(".") { name.removeLast() }
            if name == pattern { return true }
            if ProxyConfiguration.addressBytes(name) == nil, name.hasSuffix("." + pattern) { return true }
        }
        return false
    }

    private static func bare(_ host: String) -> String {
        if host.hasPrefix("["), host.hasSuffix("]") { return String(host.dropFirst().dropLast()) }
        return host
    }

    private static func inNetwork(_ host: String, _ network: String, bits: Int?) -> Bool {
        guard let bits, let address = ProxyConfiguration.addressBytes(host),
            let base = ProxyConfiguration.addressBytes(Self.bare(network)), address.count == base.count,
            (0...(address.count * 8)).contains(bits)
        else { return false }
        for index in 0..<address.count {
            let covered = min(8, max(0, bits - index * 8))
            let mask: UInt8 = covered == 0 ? 0 : UInt8(truncatingIfNeeded: 0xFF << (8 - covered))
            if address[index] & mask != base[index] & mask { return false }
        }
        return true
    }
}
