import APNSWire

/// The quality-of-service model: store-and-forward for offline virtual devices.
///
/// A device is offline when the plan lists it (or its token falls in the plan's offline fraction)
/// until `onlineAt` (nil: for the whole run). While offline, APNs keeps only the newest
/// notification per device (coalescing); one with expiry 0 is not stored at all; a command-0 notification
/// carries no expiry and is stored like any other ("delivered regardless… can become stale"), and so is an
/// HTTP/2 request without `apns-expiration` (APNs' storage policy; the ledger records `UInt32.max`); a stored one
/// whose expiry has passed when the device comes back, or that waited longer than `storageLimit` seconds (the
/// guide's "limited period"), is dropped. The device comes online at `onlineAt`
/// and then displays what was stored (if still valid), and everything sent later as it arrives.
/// Devices that are never offline display each accepted notification at once, so their final
/// display is the ledger's last payload digest and the model keeps nothing for them.
/// Not thread-safe: `DeliveryLedger` confines it to its lock.
final class DeviceModel {
    /// What a device finally shows.
    struct Outcome {
        /// The digest of the payload displayed last, if any.
        var displayed: UInt64?
        /// A notification still waiting for the device.
        var stored: UInt64?
    }

    private let offline: TokenSet
    private let offlineFraction: Double
    private let seed: UInt64
    let onlineAt: UInt32?
    /// Seconds a stored notification waits for its device at most; nil: no limit.
    let storageLimit: UInt32?
    private var stored: [DeviceToken: (digest: UInt64, expiry: UInt32, storedAt: UInt32)] = [:]
    private var displayed: [DeviceToken: UInt64] = [:]

    /// Notifications kept for an offline device.
    private(set) var storedCount = 0
    /// Stored notifications replaced by a newer one.
    private(set) var coalescedCount = 0
    /// Notifications with expiry 0 sent to an offline device: delivered once or never, never stored.
    private(set) var notStoredCount = 0
    /// Stored notifications whose expiry passed before the device came back.
    private(set) var expiredCount = 0
    /// Stored notifications discarded because the device stayed away longer than `storageLimit`.
    private(set) var discardedCount = 0
    /// Stored notifications delivered when the device came back.
    private(set) var deliveredLaterCount = 0

    init(offline: TokenSet, offlineFraction: Double, seed: UInt64, onlineAt: UInt32?, storageLimit: UInt32? = nil) {
        self.offline = offline
        self.offlineFraction = offlineFraction
        self.seed = seed
        self.onlineAt = onlineAt
        self.storageLimit = storageLimit
    }

    /// Forgets what every device stored and displayed, and the counts.
    func reset() {
        self.stored = [:]
        self.displayed = [:]
        self.storedCount = 0
        self.coalescedCount = 0
        self.notStoredCount = 0
        self.expiredCount = 0
        self.discardedCount = 0
        self.deliveredLaterCount = 0
    }

    /// True when the model has any offline devices at all (otherwise the ledger skips it).
    var isActive: Bool { self.offline.count > 0 || self.offlineFraction > 0 }

    /// True when the device with the 32-byte `token` is one of the plan's offline devices.
    @inline(__always)
    func isOfflineDevice(_ token: UnsafeRawPointer) -> Bool {
        self.offline.contains(token)
            || TokenHash.isInFraction(token, fraction: self.offlineFraction, seed: self.seed ^ 0x0FF1_13E0)
    }

    /// Takes one accepted notification (a `LedgerRecordLayout` entry) at time `now`.
    func accept(_ entry: UnsafeRawPointer, now: UInt32) {
        guard self.isOfflineDevice(entry) else { return }
        let key = DeviceToken(unsafeBytes: UnsafeRawBufferPointer(start: entry, count: DeviceToken.byteCount))
        let digest = entry.loadUnaligned(fromByteOffset: LedgerRecordLayout.digest, as: UInt64.self)
        let command = entry.load(fromByteOffset: LedgerRecordLayout.command, as: UInt8.self)
        // Command 0 has no expiry field: it is kept until it is delivered (or the storage limit passes).
        let expiry =
            command == 0 ? UInt32.max : entry.loadUnaligned(fromByteOffset: LedgerRecordLayout.expiry, as: UInt32.self)
        if let onlineAt = self.onlineAt, now >= onlineAt {
            self.deliverStored(key)
            self.displayed[key] = digest
            return
        }
        guard expiry != 0 else {
            self.notStoredCount += 1
            return
        }
        if self.stored.updateValue((digest, expiry, now), forKey: key) != nil {
            self.coalescedCount += 1
        } else {
            self.storedCount += 1
        }
    }

    /// Brings every device that is due online at `now` (delivers or expires what it had stored).
    func advance(to now: UInt32) {
        guard let onlineAt = self.onlineAt, now >= onlineAt else { return }
        for key in Array(self.stored.keys) { self.deliverStored(key) }
    }

    /// What the offline device `token` shows now; nil for a device the plan never took offline.
    func outcome(_ token: UnsafeRawPointer) -> Outcome? {
        guard self.isOfflineDevice(token) else { return nil }
        let key = DeviceToken(unsafeBytes: UnsafeRawBufferPointer(start: token, count: DeviceToken.byteCount))
        return Outcome(displayed: self.displayed[key], stored: self.stored[key]?.digest)
    }

    private func deliverStored(_ key: DeviceToken) {
        guard let onlineAt = self.onlineAt, let entry = self.stored.removeValue(forKey: key) else { return }
        // The expiry is the last second the notification is valid: it "passes" after that second.
        if let limit = self.storageLimit, onlineAt &- entry.storedAt > limit {
            self.discardedCount += 1
        } else if entry.expiry >= onlineAt {
            self.displayed[key] = entry.digest
            self.deliveredLaterCount += 1
        } else {
            self.expiredCount += 1
        }
    }
}
