import Foundation
import SalvoTestTraits
import Testing

@testable import SalvoSimulator

@Suite(.tags(.pure), .runs(.pure)) struct DeviceModelTests {
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

@Suite(.tags(.pure), .runs(.pure)) struct DeviceModelStorageTests {
    private func send(_ model: DeviceModel, _ token: [UInt8], digest: UInt64, command: UInt8, now: UInt32) {
        let batch = LedgerBatch(capacity: 1)
        token.withUnsafeBytes {
            batch.append(
                token: $0,
                identifier: 0,
                connection: 1,
                expiry: 0,
                priority: 10,
                command: command,
                digest: digest
            )
        }
        batch.drainAll { entry, _ in model.accept(entry, now: now) }
    }

    @Test func aCommandZeroNotificationIsStoredLikeAnyOther() throws {
        let device = TestTokens.token(4)
        var offline = TokenSet()
        device.withUnsafeBytes { _ = offline.insert($0) }
        let model = DeviceModel(offline: offline, offlineFraction: 0, seed: 1, onlineAt: 1_000)
        self.send(model, device, digest: 7, command: 0, now: 10)
        // Command 2 with expiry 0 is still "deliver once or never".
        self.send(model, TestTokens.token(4), digest: 8, command: 2, now: 20)
        #expect(model.storedCount == 1 && model.notStoredCount == 1)
        model.advance(to: 5_000)
        #expect(device.withUnsafeBytes { model.outcome($0.baseAddress!) }?.displayed == 7)
    }

    @Test func aNotificationStoredLongerThanTheLimitIsDiscarded() throws {
        let (early, late) = (TestTokens.token(5), TestTokens.token(6))
        var offline = TokenSet()
        for device in [early, late] { device.withUnsafeBytes { _ = offline.insert($0) } }
        let model = DeviceModel(offline: offline, offlineFraction: 0, seed: 1, onlineAt: 1_000, storageLimit: 500)
        self.send(model, early, digest: 1, command: 0, now: 100)  // waits 900 s: over the limit
        self.send(model, late, digest: 2, command: 0, now: 600)  // waits 400 s
        model.advance(to: 1_000)
        #expect(early.withUnsafeBytes { model.outcome($0.baseAddress!) }?.displayed == nil)
        #expect(late.withUnsafeBytes { model.outcome($0.baseAddress!) }?.displayed == 2)
        #expect(model.discardedCount == 1 && model.deliveredLaterCount == 1)
    }

    @Test func thePlanCarriesTheStorageLimit() throws {
        let plan = try JSONDecoder().decode(
            FaultPlan.self,
            from: Data(#"{"devices":{"offlineFraction":0.1,"storageLimitSeconds":2419200}}"#.utf8)
        )
        #expect(plan.devices.storageLimitSeconds == 2_419_200)
    }
}
