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

    /// What the probe chooses: io_uring where this process may set up a ring, else sockets.
    public static var probed: TransportKind { uringRefusal == nil ? .uring : .socket }

    /// The transport a user names (`uring` or `io_uring`, `socket`); nil for any other name.
    public init?(named name: String) {
        switch name.lowercased() {
        case "uring", "io_uring": self = .uring
        case "socket": self = .socket
        default: return nil
        }
    }

    /// The decision for a transport a user asked for by name (the command line reads it from an option or
    /// the environment; this module reads neither): nil, empty or `auto` take the probe's answer
    /// (`uringRefusal`), `socket` forces the fallback, `uring` requires io_uring. Throws when io_uring is
    /// required but refused, or the name is unknown.
    public static func select(requested: String?, uringRefusal: String?) throws -> TransportKind {
        guard let requested, !requested.isEmpty, requested.lowercased() != "auto" else {
            return uringRefusal == nil ? .uring : .socket
        }
        guard let kind = TransportKind(named: requested) else {
            throw SalvoIOError(
                .invalidConfiguration,
                "transport \(requested) is not understood; use socket, uring or auto"
            )
        }
        if kind == .uring, let refusal = uringRefusal {
            throw SalvoIOError(
                .ioUringUnavailable,
                "transport uring requires io_uring, which is refused here: \(refusal); use socket or auto"
            )
        }
        return kind
    }
}
