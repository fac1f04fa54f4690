import SalvoService

/// How much of the store's disk an uploaded audience may take, decided before its first byte is read (from its
/// `Content-Length`) and again after each write (from the bytes received and the room left): an upload over the
/// server's limit is refused 413, and one the disk has no room for is refused 507 before the disk is full, so a
/// campaign never starts that could not keep its journal and its results.
///
/// A campaign's files come to at most `factor` times its audience: the upload itself, then its journal's line index
/// and marks (a few bytes a row, against 65 or more bytes a CSV row) and its result files (rejects and unsettled
/// rows, each at most a copy of its row with a reason). `reserve` is left free beyond that, for the notifications'
/// store beside it.
public struct CampaignUploadRoom: Hashable, Sendable {
    /// The largest audience taken, in bytes (`serve --campaign-upload-limit`).
    public var limit: Int
    /// Bytes left free on the store's file system beyond what the campaign needs.
    public var reserve: Int

    /// The campaign's files as a multiple of its audience, at most.
    public static let factor = 2

    public static let standard = CampaignUploadRoom(limit: 4 << 30, reserve: 64 << 20)

    public enum Refusal: Hashable, Sendable {
        /// Over `limit` (413).
        case overLimit(bytes: Int, limit: Int)
        /// The disk has `free` bytes, and the campaign needs `needed` more (507).
        case noRoom(needed: Int, free: Int)
    }

    public init(limit: Int, reserve: Int) {
        self.limit = limit
        self.reserve = reserve
    }

    /// Before the body is read: its declared length against the limit and the room the disk has.
    public func check(declared: Int, free: Int) -> Refusal? {
        if declared > self.limit { return .overLimit(bytes: declared, limit: self.limit) }
        let needed = Self.need(declared, times: Self.factor, plus: self.reserve)
        return needed > free ? .noRoom(needed: needed, free: free) : nil
    }

    /// As the body arrives: `received` bytes are written (they take their room already), `free` is what is left. The
    /// campaign still needs room for its journal and results, as much again, and the reserve.
    public func check(received: Int, free: Int) -> Refusal? {
        if received > self.limit { return .overLimit(bytes: received, limit: self.limit) }
        let needed = Self.need(received, times: Self.factor - 1, plus: self.reserve)
        return needed > free ? .noRoom(needed: needed, free: free) : nil
    }

    /// The answer for a refusal: nothing of the upload is kept.
    public static func problem(_ refusal: Refusal) -> ServiceProblem {
        switch refusal {
        case .overLimit(let bytes, let limit):
            return ServiceProblem(
                .payloadTooLarge,
                detail: "the audience is \(bytes) bytes or more, over this server's limit of \(limit) "
                    + "(--campaign-upload-limit): nothing was kept",
                field: "audience"
            )
        case .noRoom(let needed, let free):
            return ServiceProblem(
                .insufficientStorage,
                detail: "the store's disk has \(free) bytes free and this campaign needs \(needed) (its audience, "
                    + "its journal and results, and the store's reserve): nothing was kept",
                field: "audience"
            )
        }
    }

    /// `value × factor + reserve`, `.max` where that overflows.
    private static func need(_ value: Int, times factor: Int, plus reserve: Int) -> Int {
        let (product, overflow) = value.multipliedReportingOverflow(by: factor)
        let (sum, past) = product.addingReportingOverflow(reserve)
        return overflow || past ? .max : sum
    }
}
