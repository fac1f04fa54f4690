import APNSWire
import NIOHPACK
import SalvoTestTraits
import Testing

@testable import SalvoSimulator

/// What each request on an HTTP/2 connection gets from the checks and the plan, without a connection.
@Suite(.tags(.pure), .runs(.pure)) struct HTTP2AnswersTests {
    static let topic = "com.example.app"
    static let clock = ManualClock(now: 1_800_000_000)

    static func answers(_ configure: (inout FaultPlan) -> Void = { _ in }) throws -> HTTP2Answers {
        var plan = FaultPlan()
        configure(&plan)
        let token = try DeviceToken(bytes: TestTokens.token(9))
        return HTTP2Answers(
            plan: try CompiledFaultPlan(plan),
            uninstalled: [Self.topic: [token: 1_700_000_000]],
            verifier: ProviderTokenVerifier(keys: [], clock: Self.clock),
            clock: Self.clock
        )
    }

    static func headers(token: [UInt8], apnsID: String? = nil) -> HPACKHeaders {
        var fields = [(":method", "POST"), (":path", "/3/device/\(TestTokens.hex(token))"), (":scheme", "https")]
        if let apnsID { fields.append(("apns-id", apnsID)) }
        return HPACKHeaders(fields)
    }

    /// The answer to a request with a client certificate for `topic`, as far as the checks and the plan go.
    static func answer(_ answers: inout HTTP2Answers, token: [UInt8]) -> HTTP2Answer? {
        let headers = Self.headers(token: token)
        let request = HTTP2Answers.Request(headers)
        let credentials = answers.credentials(of: request, peer: .valid(Self.topic))
        switch answers.check(request, headers: headers, credentials: credentials, payloadBytes: 20) {
        case .refused(let answer, _): return answer
        case .passed(let passed): return answers.refusal(of: passed)
        }
    }

    @Test func aRequestReadsTheFieldsThatDecideItsAnswer() {
        let request = HTTP2Answers.Request(
            HPACKHeaders([
                (":method", "POST"), (":path", "/3/device/ab"), ("authorization", "bearer x"), ("apns-id", "i"),
            ])
        )
        #expect(request.method == "POST")
        #expect(request.path == "/3/device/ab")
        #expect(request.authorization == "bearer x")
        #expect(request.apnsID == "i")
    }

    @Test func theCredentialsAreTheTokensElseTheCertificates() throws {
        var answers = try Self.answers()
        let none = HTTP2Answers.Request(HPACKHeaders())
        guard case .none = answers.credentials(of: none, peer: nil) else {
            Issue.record("credentials without either")
            return
        }
        guard case .certificate(.valid(Self.topic)) = answers.credentials(of: none, peer: .valid(Self.topic)) else {
            Issue.record("the certificate's topic")
            return
        }
        let token = HTTP2Answers.Request(HPACKHeaders([("authorization", "basic x")]))
        guard case .token(.failure(.invalidProviderToken)) = answers.credentials(of: token, peer: .valid(Self.topic))
        else {
            Issue.record("a token that is not a bearer token")
            return
        }
    }

    @Test func theChecksRefuseAndAMalformedIDIsNotEchoed() throws {
        let answers = try Self.answers()
        let headers = Self.headers(token: TestTokens.token(1), apnsID: "not-a-uuid")
        let request = HTTP2Answers.Request(headers)
        guard
            case .refused(let answer, let echoesID) = answers.check(
                request,
                headers: headers,
                credentials: .certificate(.valid(Self.topic)),
                payloadBytes: 20
            )
        else {
            Issue.record("passed")
            return
        }
        #expect(answer == .refused(.badMessageId))
        #expect(!echoesID)
        guard
            case .refused(let missing, true) = answers.check(
                HTTP2Answers.Request(Self.headers(token: TestTokens.token(1))),
                headers: Self.headers(token: TestTokens.token(1)),
                credentials: .none,
                payloadBytes: 20
            )
        else {
            Issue.record("passed without credentials")
            return
        }
        #expect(missing.status == 403)
    }

    @Test func thePlanRefusesItsTokens() throws {
        var answers = try Self.answers {
            $0.invalidTokens = [TestTokens.hex(TestTokens.token(1))]
            $0.foreignTokens = [TestTokens.hex(TestTokens.token(2))]
            $0.expiredTokens = [TestTokens.hex(TestTokens.token(3))]
        }
        var refused: [HTTP2Answer?] = []
        for n: UInt32 in [1, 2, 3, 9, 4] { refused.append(Self.answer(&answers, token: TestTokens.token(n))) }
        #expect(
            refused == [
                .refused(.badDeviceToken), .refused(.deviceTokenNotForTopic),
                .refused(.expiredToken, timestamp: 1_800_000_000_000),
                .refused(.unregistered, timestamp: 1_700_000_000_000), nil,
            ]
        )
    }

    @Test func anIDIsEchoedOrMadeFromTheSeededSequence() throws {
        var answers = try Self.answers()
        var random = SeededGenerator(seed: 1)
        let echoed = answers.withAPNSID(echoing: "given", using: &random) { String(decoding: $0, as: UTF8.self) }
        #expect(echoed == "given")
        let made = answers.withAPNSID(echoing: nil, using: &random) { String(decoding: $0, as: UTF8.self) }
        #expect(made.count == 36)
        #expect(made.split(separator: "-").map(\.count) == [8, 4, 4, 4, 12])
        var again = SeededGenerator(seed: 1)
        var other = try Self.answers()
        let remade = other.withAPNSID(echoing: nil, using: &again) { String(decoding: $0, as: UTF8.self) }
        #expect(remade == made)
    }
}
