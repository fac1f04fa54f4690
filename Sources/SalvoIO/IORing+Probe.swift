internal import CLiburing

#if canImport(Glibc)
import Glibc
#endif

extension IORing {
    /// Whether io_uring can be used in this process, and if not, why.
    struct ProbeResult: Sendable {
        /// nil when io_uring works with the operations SalvoIO needs.
        var refusal: String?
    }

    /// Probed once per process: sets up a tiny ring, checks that SEND, RECV and ASYNC_CANCEL are
    /// supported, and tears it down. A seccomp filter (Docker's default profile) or
    /// `kernel.io_uring_disabled` makes `io_uring_queue_init` fail; that is reported, not thrown.
    static let probe: ProbeResult = {
        var ring = io_uring()
        let rc = io_uring_queue_init(4, &ring, 0)
        if rc < 0 {
            return ProbeResult(refusal: "io_uring_queue_init: \(String(cString: strerror(-rc))) (errno \(-rc))")
        }
        defer { io_uring_queue_exit(&ring) }
        guard let probe = io_uring_get_probe_ring(&ring) else {
            return ProbeResult(refusal: "io_uring_get_probe_ring failed (kernel older than 5.6)")
        }
        defer { io_uring_free_probe(probe) }
        for (opcode, name) in [
            (IORING_OP_SEND, "SEND"), (IORING_OP_RECV, "RECV"), (IORING_OP_ASYNC_CANCEL, "ASYNC_CANCEL"),
        ] where io_uring_opcode_supported(probe, Int32(opcode.rawValue)) == 0 {
            return ProbeResult(refusal: "the kernel's io_uring lacks IORING_OP_\(name)")
        }
        return ProbeResult(refusal: nil)
    }()
}
