internal import SalvoIO
import SalvoRows

/// The client side of the binary gateway's mutual TLS, as files: the job loads them once, when it starts, into a
/// context every connection shares.
public struct GatewayCredentials: Hashable, Sendable {
    /// The client certificate and its key.
    public enum Identity: Hashable, Sendable {
        /// A PEM certificate chain and a PEM private key (encrypted when `passphrase` is given).
        case pem(certificateChainFile: String, privateKeyFile: String, passphrase: String? = nil)
        /// One PKCS#12 file holding both.
        case pkcs12(file: String, passphrase: String?)
    }

    /// Nil: no client certificate (a gateway that asks for one refuses the handshake).
    public var identity: Identity?
    /// CA certificates (PEM) to trust for the gateway; nil: the system's.
    public var trustedCAFile: String?

    public init(identity: Identity?, trustedCAFile: String? = nil) {
        self.identity = identity
        self.trustedCAFile = trustedCAFile
    }

    /// Loads every file now, so that a mistake (a wrong passphrase, a key that does not match, an expired
    /// certificate) stops the job before it connects, with a message that says what to fix.
    func makeContext() throws(JobError) -> TLSContext {
        let credentials: TLSCredentials? =
            switch self.identity {
            case .pem(let chain, let key, let passphrase)?:
                .pem(certificateChainFile: chain, privateKeyFile: key, passphrase: passphrase)
            case .pkcs12(let file, let passphrase)?:
                .pkcs12(file: file, passphrase: passphrase)
            case nil:
                nil
            }
        do {
            return try TLSContext(configuration: .client(credentials: credentials, trustedCAFile: self.trustedCAFile))
        } catch let error as SalvoIOError {
            throw JobError(.credentials, error.message)
        } catch {
            throw JobError(.credentials, "\(error)")
        }
    }
}

/// How a binary job's connections reach the kernel.
public enum BinaryTransport: String, Hashable, Sendable, CaseIterable {
    /// io_uring: one submission per batch, completions through an eventfd.
    case uring
    /// Non-blocking sockets with Dispatch sources: the fallback where io_uring is not allowed.
    case socket

    var kind: TransportKind { self == .uring ? .uring : .socket }
}
