import Dispatch
import SalvoIO

#if canImport(Glibc)
import Glibc
#endif

/// A TCP listener on 127.0.0.1 that answers every connection with fixed plain text and closes it: a service that
/// does not speak TLS where a gateway was expected (an HTTP server on the port, say).
///
/// `@unchecked Sendable`: the listening socket and its source are confined to `queue`.
public final class PlainTextListener: @unchecked Sendable {
    public let port: Int
    private let queue = DispatchQueue(label: "salvo.test.plain-text-listener")
    private let source: DispatchSourceRead

    public init(answer: String) throws {
        let (fd, bound) = try Socket.listen(host: "127.0.0.1", port: 0)
        self.port = bound
        let bytes = Array(answer.utf8)
        self.source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: self.queue)
        let queue = self.queue
        self.source.setEventHandler {
            for _ in 0..<16 {
                guard case .success(let accepted) = Socket.accept(fd) else { return }
                let client = Int32(accepted)
                _ = bytes.withUnsafeBytes { Glibc.write(client, $0.baseAddress, $0.count) }
                // The answer and an orderly end first; closing at once with the client's bytes unread would
                // reset the connection before the client reads the answer.
                _ = Glibc.shutdown(client, Int32(SHUT_WR))
                queue.asyncAfter(deadline: .now() + .seconds(2)) { _ = Glibc.close(client) }
            }
        }
        self.source.setCancelHandler { _ = Glibc.close(fd) }
        self.source.resume()
    }

    /// Stops listening.
    public func stop() {
        self.source.cancel()
    }
}
