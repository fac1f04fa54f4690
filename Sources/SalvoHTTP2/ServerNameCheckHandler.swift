import NIOCore
import NIOSSL
import NIOTLS

#if canImport(Glibc)
import Glibc
#endif

/// Closes the connection when the server's certificate does not name the server name it was verified for.
///
/// NIOSSL's own check also accepts a certificate whose IP address entry matches the connected address, whatever
/// the name: connecting to `127.0.0.1` with `--server-name evil.example` would reach a server whose certificate
/// names only `localhost` and `127.0.0.1`. This handler holds the certificate to the name alone: a DNS entry that
/// matches it (one leading `*.` label at most), or for a name that is an IP address, an IP entry equal to it.
///
/// Confined to its channel's event loop.
final class ServerNameCheckHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = Any

    private let serverName: String
    private let onFailure: (String) -> Void

    init(serverName: String, onFailure: @escaping (String) -> Void) {
        self.serverName = serverName
        self.onFailure = onFailure
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted = event {
            let certificate = try? context.pipeline.syncOperations.nioSSL_peerCertificate()
            if let certificate, !Self.names(certificate, self.serverName) {
                self.onFailure(
                    "the server's certificate does not name \(self.serverName) (--server-name): refused, "
                        + "although it may name the address connected to"
                )
                context.close(promise: nil)
                return
            }
            // Passed on before leaving the pipeline: a removed handler's context no longer reaches the next one,
            // and the ALPN check behind this one needs the event.
            context.fireUserInboundEventTriggered(event)
            context.pipeline.syncOperations.removeHandler(self, promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// Whether `certificate` names `serverName` in its subject alternative names (with none, NIOSSL's check of
    /// the common name against the name stands).
    static func names(_ certificate: NIOSSLCertificate, _ serverName: String) -> Bool {
        let wanted = Array(serverName.lowercased().utf8.reversed().drop(while: { $0 == UInt8(ascii: ".") }).reversed())
        let address = Self.addressBytes(serverName)
        var any = false
        for name in certificate._subjectAlternativeNames() {
            any = true
            let contents = name.contents.withUnsafeBufferPointer { Array($0) }
            if name.nameType == .ipAddress {
                if let address, address == contents { return true }
            } else if name.nameType == .dnsName, address == nil {
                if Self.matches(pattern: Array(String(decoding: contents, as: UTF8.self).lowercased().utf8), wanted) {
                    return true
                }
            }
        }
        return !any
    }

    private static func matches(pattern: [UInt8], _ name: [UInt8]) -> Bool {
        if pattern == name { return true }
        // "*.example.com" matches exactly one label in front of ".example.com".
        guard pattern.count > 2, pattern[0] == UInt8(ascii: "*"), pattern[1] == UInt8(ascii: ".") else { return false }
        let suffix = pattern.dropFirst()
        guard name.count > suffix.count, name.suffix(suffix.count).elementsEqual(suffix) else { return false }
        return !name.dropLast(suffix.count).contains(UInt8(ascii: "."))
    }

    /// The 4 or 16 bytes of an IP address literal, or nil for a name.
    private static func addressBytes(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
        return nil
    }
}
