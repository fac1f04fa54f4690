import Testing

@testable import SalvoSimulator

@Suite struct DeviceModelTests {
    private func send(_ model: DeviceModel, _ token: [UInt8], digest: UInt64, expiry: UInt32, now: UInt32) {
        let batch = LedgerBatch(capacity: 1)
        token.withUnsafeBytes {
            batch.append(
                token: $0,
                identifier: 1,
                connection: 1,
                expiry: expiry,
                priority: 10,
                command: 2,
                digest: digest
            )
        }
        batch.drainAll { entry, _ in model.accept(entry, now: now) }
    }

    @Test func offlineDeviceKeepsOnlyTheNewestAndShowsItWhenBack() throws {
        let device = TestTokens.token(1)
        var offline = TokenSet()
        device.withUnsafeBytes { _ = offline.insert($0) }
        let model = DeviceModel(offline: offline, offlineFraction: 0, seed: 1, onlineAt: 1_000)
        self.send(model, device, digest: 1, expiry: 5_000, now: 100)
        self.send(model, device, digest: 2, expiry: 5_000, now: 200)
        self.send(model, device, digest: 3, expiry: 0, now: 300)  // expiry 0: never stored
        #expect(model.storedCount == 1 && model.coalescedCount == 1 && model.notStoredCount == 1)
        let before = try #require(device.withUnsafeBytes { model.outcome($0.baseAddress!) })
        #expect(before.displayed == nil && before.stored == 2)
        model.advance(to: 1_000)
        let after = try #require(device.withUnsafeBytes { model.outcome($0.baseAddress!) })
        #expect(after.displayed == 2 && after.stored == nil)
        #expect(model.deliveredLaterCount == 1)
        // Online now: a new one is displayed at once.
        self.send(model, device, digest: 4, expiry: 0, now: 1_001)
        #expect(device.withUnsafeBytes { model.outcome($0.baseAddress!) }?.displayed == 4)
    }

    @Test func storedNotificationExpiresBeforeTheDeviceComesBack() throws {
        let device = TestTokens.token(2)
        var offline = TokenSet()
        device.withUnsafeBytes { _ = offline.insert($0) }
        let model = DeviceModel(offline: offline, offlineFraction: 0, seed: 1, onlineAt: 1_000)
        self.send(model, device, digest: 9, expiry: 999, now: 10)
        model.advance(to: 2_000)
        let outcome = try #require(device.withUnsafeBytes { model.outcome($0.baseAddress!) })
        #expect(outcome.displayed == nil && outcome.stored == nil)
        #expect(model.expiredCount == 1)
        // A device the plan never took offline is not the model's business.
        #expect(TestTokens.token(3).withUnsafeBytes { model.outcome($0.baseAddress!) } == nil)
    }
}
