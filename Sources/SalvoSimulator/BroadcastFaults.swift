import APNSWire

/// What the broadcast endpoint does wrong on purpose (a plan's `broadcast` object, or
/// `BroadcastConfiguration.faults`): refusals a publisher must retry, and a broken service that loses or repeats
/// what it accepted, so that a check (`salvo soak --protocol broadcast`, the broadcast verdict) can be shown to catch
/// it.
///
/// Every choice is a keyed hash of the plan's seed and the channel id (and, for refusals, how many requests the
/// channel has had so far), never the order in which requests from several connections arrive: the same plan over
/// the same channels refuses, loses and repeats the same broadcasts, run after run. The per-channel publishing budget
/// (`BroadcastConfiguration.Budget`) is apart from these: it answers 429 by count, not by chance.
public struct BroadcastFaults: Sendable, Hashable, Codable {
    /// A broadcast request answered 429 TooManyRequests (before the channel's budget is charged: not taken).
    public var tooManyRequestsRate: Double = 0
    /// A broadcast request answered 503 ServiceUnavailable (not taken).
    public var serviceUnavailableRate: Double = 0
    /// A seeded fraction of channels whose broadcasts are answered 200 and never recorded: lost by the service.
    /// Only for proving that a check catches a loss; no real service is modelled by it.
    public var lostFraction: Double = 0
    /// A seeded fraction of channels whose broadcasts are recorded twice, as a service whose fan-out repeats an
    /// update: the second is a duplicate in the verdict. For proving a check, as `lostFraction`.
    public var duplicatedFraction: Double = 0

    public init(
        tooManyRequestsRate: Double = 0,
        serviceUnavailableRate: Double = 0,
        lostFraction: Double = 0,
        duplicatedFraction: Double = 0
    ) {
        self.tooManyRequestsRate = tooManyRequestsRate
        self.serviceUnavailableRate = serviceUnavailableRate
        self.lostFraction = lostFraction
        self.duplicatedFraction = duplicatedFraction
    }

    // Plans are written by hand: every key is optional and takes its default.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            tooManyRequestsRate: try c.decodeIfPresent(Double.self, forKey: .tooManyRequestsRate) ?? 0,
            serviceUnavailableRate: try c.decodeIfPresent(Double.self, forKey: .serviceUnavailableRate) ?? 0,
            lostFraction: try c.decodeIfPresent(Double.self, forKey: .lostFraction) ?? 0,
            duplicatedFraction: try c.decodeIfPresent(Double.self, forKey: .duplicatedFraction) ?? 0
        )
    }

    /// The fractions by their keys, for validation.
    var fractions: [(String, Double)] {
        [
            ("broadcast.tooManyRequestsRate", self.tooManyRequestsRate),
            ("broadcast.serviceUnavailableRate", self.serviceUnavailableRate),
            ("broadcast.lostFraction", self.lostFraction),
            ("broadcast.duplicatedFraction", self.duplicatedFraction),
        ]
    }

    /// What happens to one broadcast request.
    enum Fate: Sendable, Equatable {
        /// Answered with this reason and not taken.
        case refuse(APNSReason)
        case accept(lost: Bool, duplicated: Bool)
    }

    /// The fate of the `attempt`-th request (0 first) to `channel` under `seed`.
    func fate(channel: String, attempt: Int, seed: UInt64) -> Fate {
        let key = Self.key(channel) ^ seed
        if self.tooManyRequestsRate > 0 || self.serviceUnavailableRate > 0 {
            var draw = SeededGenerator(seed: key ^ 0x4252_5446, stream: UInt64(attempt) &+ 1)
            if draw.chance(self.tooManyRequestsRate) { return .refuse(.tooManyRequests) }
            if draw.chance(self.serviceUnavailableRate) { return .refuse(.serviceUnavailable) }
        }
        var lost = SeededGenerator(seed: key ^ 0x4C4F_5354, stream: 0)
        var duplicated = SeededGenerator(seed: key ^ 0x4455_5045, stream: 0)
        return .accept(lost: lost.chance(self.lostFraction), duplicated: duplicated.chance(self.duplicatedFraction))
    }

    /// FNV-1a 64 of the channel id's bytes.
    static func key(_ channel: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in channel.utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01b3
        }
        return hash
    }
}
