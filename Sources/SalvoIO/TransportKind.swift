#if canImport(Glibc)
import Glibc
#endif

/// Which byte transport a connection uses: io_uring (`IORING_OP_SEND`/`IORING_OP_RECV`) or non-blocking
/// sockets driven by `DispatchSource` read/write sources. Both behave the same; io_uring needs fewer
/// system calls.
public struct TransportKind: Hashable, Sendable, CustomStringConvertible {
    private let name: String

    private init(_ name: String) {
        self.name = name
    }

    public var description: String { name }

    /// io_uring with completions delivered through an eventfd.
    public static let uring = TransportKind("uring")
    /// Non-blocking sockets with `DispatchSource` read/write sources (the fallback).
    public static let socket = TransportKind("socket")

    /// Why io_uring cannot be used in this process, or nil when it can (probed once per process).
    public static var uringRefusal: String? { IORing.probe.refusal }

    /// The transport chosen by `SALVO_TRANSPORT` (`socket` forces the fallback, `uring` requires io_uring)
    /// and, when unset, by the probe.
    public static func fromEnvironment() throws -> TransportKind {
        try select(requested: getenv("SALVO_TRANSPORT").map { String(cString: $0) }, uringRefusal: uringRefusal)
    }

    /// The pure decision behind `fromEnvironment`: `requested` is the variable's value, `uringRefusal`
    /// the probe's answer. Throws when io_uring is required but refused, or the value is unknown.
    public static func select(requested: String?, uringRefusal: String?) throws -> TransportKind {
        switch requested?.lowercased() {
        case nil, "", "auto":
            return uringRefusal == nil ? .uring : .socket
        case "socket":
            return .socket
        case "uring", "io_uring":
            if let refusal = uringRefusal {
                throw SalvoIOError(
                    .ioUringUnavailable,
                    "SALVO_TRANSPORT=uring requires io_uring, which is refused here: \(refusal); "
                        + "unset it or use SALVO_TRANSPORT=socket"
                )
            }
            return .uring
        case let other?:
            throw SalvoIOError(
                .invalidConfiguration,
                "SALVO_TRANSPORT=\(other) is not understood; use socket, uring or auto"
            )
        }
    }
}
