import APNSWire

/// The simulator's judgement of a run: the ledger compared with the tokens the sender was asked
/// to deliver to. Codable (for `--verdict` files and tests) with a readable `summary`.
///
/// Categories, each a count plus the first `listLimit` tokens:
/// - *never delivered*: expected, valid, and not in the ledger — lost;
/// - *delivered more than once*: in the ledger with a count above 1 — duplicated;
/// - *invalid, correctly never delivered*: expected, but the plan makes the gateway refuse it, and not in
///   the ledger: status 8 (or HTTP/2 BadDeviceToken) for its invalid tokens, HTTP/2 DeviceTokenNotForTopic for
///   its tokens of another app (`FaultPlan.foreignTokens`; the binary gateway accepts those, so one it accepted
///   counts as an ordinary delivery);
/// - *uninstalled, correctly never delivered*: expected, its app uninstalled (`FaultPlan.uninstalled`, not
///   registered again), and not in the ledger — left out by a suppression list, or answered 410; one the binary
///   gateway accepted counts as an ordinary delivery;
/// - *wrongly dropped* (part of *never delivered*): a token whose device registered it again after the feedback
///   timestamp, never delivered — a suppression list applied without registration times;
/// - *unexpected*: in the ledger but not expected.
/// `displays` says what each of the first `listLimit` expected devices finally shows (the QoS model).
public struct Verdict: Codable, Sendable, Equatable {
    /// A token and how often it was accepted.
    public struct TokenCount: Codable, Sendable, Equatable {
        public var token: String
        public var count: Int
    }

    /// What one device finally shows.
    public struct Display: Codable, Sendable, Equatable {
        public enum State: String, Codable, Sendable {
            /// The device shows the notification with `payloadDigest`.
            case displayed
            /// Offline; the newest notification waits in store-and-forward (`payloadDigest`).
            case stored
            /// Nothing reached the device (never sent, not stored, or expired).
            case nothing
        }

        public var token: String
        public var state: State
        /// The payload digest (16 hex digits) of the notification displayed or stored.
        public var payloadDigest: String?
    }

    public var expected: Int
    public var deliveredOnce: Int
    public var neverDelivered: Int
    public var deliveredMoreThanOnce: Int
    public var invalidNeverDelivered: Int
    /// Expected tokens the plan refuses that were accepted anyway (a simulator fault; should be 0).
    public var invalidButDelivered: Int
    /// Expected tokens of uninstalled apps (not registered again) that were never delivered: correctly.
    public var uninstalledNeverDelivered: Int
    /// Of `neverDelivered`: tokens registered again after their feedback timestamp, dropped wrongly.
    public var wronglyDropped: Int
    public var unexpected: Int
    public var listLimit: Int
    public var neverDeliveredTokens: [String] = []
    public var deliveredMoreThanOnceTokens: [TokenCount] = []
    public var invalidNeverDeliveredTokens: [String] = []
    public var wronglyDroppedTokens: [String] = []
    public var unexpectedTokens: [String] = []
    public var displays: [Display] = []
    public var ledger: LedgerSnapshot

    /// True when every valid expected token was delivered exactly once and nothing else was.
    public var passed: Bool {
        self.neverDelivered == 0 && self.deliveredMoreThanOnce == 0 && self.unexpected == 0
            && self.invalidButDelivered == 0
    }

    /// A few readable lines.
    public var summary: String {
        var lines = [
            "verdict: \(self.passed ? "PASS" : "FAIL") — \(self.expected) expected tokens",
            "  delivered once:                      \(self.deliveredOnce)",
            "  never delivered:                     \(self.neverDelivered)",
            "  delivered more than once:            \(self.deliveredMoreThanOnce)",
            "  invalid, correctly never delivered:  \(self.invalidNeverDelivered)",
            "  uninstalled, correctly not delivered: \(self.uninstalledNeverDelivered)",
            "  unexpected:                          \(self.unexpected)",
            "  accepted \(self.ledger.accepted), discarded after error \(self.ledger.discardedAfterError), "
                + "errors \(self.ledger.errorResponses.sorted { $0.key < $1.key }.map { "\($0.key):\($0.value)" }), "
                + "resets \(self.ledger.resets), connections \(self.ledger.connectionsAccepted) "
                + "(refused \(self.ledger.connectionsRefused.values.reduce(0, +)))",
        ]
        if self.wronglyDropped > 0 {
            lines.append(
                "  of the never delivered, re-registered after the feedback time (wrongly dropped): "
                    + "\(self.wronglyDropped), first \(self.wronglyDroppedTokens.first ?? "")"
            )
        }
        if self.invalidButDelivered > 0 {
            lines.append("  invalid but delivered:               \(self.invalidButDelivered)")
        }
        for (name, tokens) in [("never delivered", self.neverDeliveredTokens), ("unexpected", self.unexpectedTokens)]
        where !tokens.isEmpty {
            lines.append("  first \(name): \(tokens.prefix(3).joined(separator: ", "))")
        }
        if let first = self.deliveredMoreThanOnceTokens.first {
            lines.append("  first delivered more than once: \(first.token) ×\(first.count)")
        }
        return lines.joined(separator: "\n")
    }

    /// A payload digest (`TokenHash.digest`) as `Display.payloadDigest` writes it: 16 hex digits.
    public static func digestHex(_ digest: UInt64) -> String {
        let hex = String(digest, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// Judges `ledger` against `expected` under `plan`.
    static func judge(
        ledger: DeliveryLedger,
        expected: ExpectedTokens,
        plan: CompiledFaultPlan,
        listLimit: Int
    ) -> Verdict {
        let snapshot = ledger.snapshot()
        var verdict = Verdict(
            expected: expected.count,
            deliveredOnce: 0,
            neverDelivered: 0,
            deliveredMoreThanOnce: 0,
            invalidNeverDelivered: 0,
            invalidButDelivered: 0,
            uninstalledNeverDelivered: 0,
            wronglyDropped: 0,
            unexpected: 0,
            listLimit: listLimit,
            ledger: snapshot
        )
        ledger.withTable { table, devices in
            table.forEachRecord { record in
                let count = Int(record.load(fromByteOffset: LedgerRecordLayout.count, as: UInt32.self))
                if count > 1 {
                    verdict.deliveredMoreThanOnce += 1
                    if verdict.deliveredMoreThanOnceTokens.count < listLimit {
                        verdict.deliveredMoreThanOnceTokens.append(TokenCount(token: Self.hex(record), count: count))
                    }
                }
                if !expected.tokens.contains(record) {
                    verdict.unexpected += 1
                    if verdict.unexpectedTokens.count < listLimit { verdict.unexpectedTokens.append(Self.hex(record)) }
                }
            }
            expected.tokens.forEachMember { token in
                let base = token.baseAddress!
                let record = table.lookup(base)
                let count = record.map { Int($0.load(fromByteOffset: LedgerRecordLayout.count, as: UInt32.self)) } ?? 0
                // Refused by the plan: invalid everywhere; of another app on HTTP/2 only (command 3 in the
                // ledger), so a token the binary gateway accepted is judged as any other.
                let lastCommand = record.map { $0.load(fromByteOffset: LedgerRecordLayout.command, as: UInt8.self) }
                let foreign = plan.isForeignToTopic(base) && (lastCommand == nil || lastCommand == 3)
                let invalid = plan.isInvalid(base) || foreign
                switch (count, invalid) {
                case (0, true):
                    verdict.invalidNeverDelivered += 1
                    if verdict.invalidNeverDeliveredTokens.count < listLimit {
                        verdict.invalidNeverDeliveredTokens.append(Self.hex(base))
                    }
                // A token gone: its app uninstalled, or (HTTP/2) expired.
                case (0, false)
                where plan.goneTokens.contains(base)
                    || (plan.expiredTokens.contains(base) && (lastCommand == nil || lastCommand == 3)):
                    verdict.uninstalledNeverDelivered += 1
                case (0, false):
                    verdict.neverDelivered += 1
                    if verdict.neverDeliveredTokens.count < listLimit {
                        verdict.neverDeliveredTokens.append(Self.hex(base))
                    }
                    if plan.reregisteredTokens.contains(base) {
                        verdict.wronglyDropped += 1
                        if verdict.wronglyDroppedTokens.count < listLimit {
                            verdict.wronglyDroppedTokens.append(Self.hex(base))
                        }
                    }
                case (_, true):
                    verdict.invalidButDelivered += 1
                case (1, false):
                    verdict.deliveredOnce += 1
                default:
                    break
                }
                if verdict.displays.count < listLimit {
                    verdict.displays.append(Self.display(base, record: record, devices: devices))
                }
            }
        }
        return verdict
    }

    private static func display(_ token: UnsafeRawPointer, record: UnsafeRawPointer?, devices: DeviceModel) -> Display {
        let hex = Self.hex(token)
        if let outcome = devices.outcome(token) {
            if let displayed = outcome.displayed {
                return Display(token: hex, state: .displayed, payloadDigest: Self.digestHex(displayed))
            }
            if let stored = outcome.stored {
                return Display(token: hex, state: .stored, payloadDigest: Self.digestHex(stored))
            }
            return Display(token: hex, state: .nothing, payloadDigest: nil)
        }
        guard let record else { return Display(token: hex, state: .nothing, payloadDigest: nil) }
        let digest = record.loadUnaligned(fromByteOffset: LedgerRecordLayout.digest, as: UInt64.self)
        return Display(token: hex, state: .displayed, payloadDigest: Self.digestHex(digest))
    }

    private static func hex(_ token: UnsafeRawPointer) -> String {
        DeviceToken(unsafeBytes: UnsafeRawBufferPointer(start: token, count: DeviceToken.byteCount)).hexString
    }
}
