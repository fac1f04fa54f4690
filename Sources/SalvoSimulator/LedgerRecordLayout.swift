import APNSWire

/// The fixed 64-byte layout shared by `TokenTable` slots and `LedgerBatch` entries.
///
/// One cache line per record, no object per notification:
/// `token (32) | count (4) | last identifier (4) | last connection (4) | expiry (4) |
/// digest (8) | priority (1) | command (1) | reserved (2) | first connection (4)`.
/// Native byte order: records never leave the process.
enum LedgerRecordLayout {
    static let size = 64
    static let token = 0
    static let count = 32
    static let lastIdentifier = 36
    static let lastConnection = 40
    static let expiry = 44
    static let digest = 48
    static let priority = 56
    static let command = 57
    static let firstConnection = 60
}

/// What the ledger knows about one device token: how often it was accepted and the last of them.
public struct LedgerRecord: Sendable, Hashable, Codable {
    /// The token, 64 lowercase hex digits.
    public var token: String
    /// How many notifications to this token were accepted.
    public var count: UInt32
    /// The identifier of the last accepted one (0 for command 0).
    public var lastIdentifier: UInt32
    /// The serial number of the connection that carried the first accepted one.
    public var firstConnection: UInt32
    /// The serial number of the connection that carried the last accepted one.
    public var lastConnection: UInt32
    /// The last accepted one's expiry (UNIX seconds, 0 = don't store).
    public var expiry: UInt32
    /// The last accepted one's priority (10 for commands 0 and 1).
    public var priority: UInt8
    /// The last accepted one's command (0, 1 or 2; 3 for HTTP/2).
    public var command: UInt8
    /// The last accepted one's payload digest (`TokenHash.digest`).
    public var payloadDigest: UInt64

    init(record: UnsafeRawPointer) {
        self.token =
            DeviceToken(unsafeBytes: UnsafeRawBufferPointer(start: record, count: DeviceToken.byteCount)).hexString
        self.count = record.loadUnaligned(fromByteOffset: LedgerRecordLayout.count, as: UInt32.self)
        self.lastIdentifier = record.loadUnaligned(fromByteOffset: LedgerRecordLayout.lastIdentifier, as: UInt32.self)
        self.firstConnection = record.loadUnaligned(
            fromByteOffset: LedgerRecordLayout.firstConnection,
            as: UInt32.self
        )
        self.lastConnection = record.loadUnaligned(fromByteOffset: LedgerRecordLayout.lastConnection, as: UInt32.self)
        self.expiry = record.loadUnaligned(fromByteOffset: LedgerRecordLayout.expiry, as: UInt32.self)
        self.priority = record.load(fromByteOffset: LedgerRecordLayout.priority, as: UInt8.self)
        self.command = record.load(fromByteOffset: LedgerRecordLayout.command, as: UInt8.self)
        self.payloadDigest = record.loadUnaligned(fromByteOffset: LedgerRecordLayout.digest, as: UInt64.self)
    }
}
