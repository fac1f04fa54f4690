import APNSWire
import SalvoTestTraits
import Testing

/// The header values every request of a job would be refused for, judged once (`send` and `check` share them).
@Suite(.tags(.pure), .runs(.pure)) struct HeaderValueRuleTests {
    @Test func topicsAreNonEmptyAndHoldNoControlCharacter() {
        #expect(APNSHeaderValueRules.topicProblem("com.example.app") == nil)
        #expect(APNSHeaderValueRules.topicProblem("") == "--topic is empty: give the app's bundle id")
        #expect(APNSHeaderValueRules.topicProblem("com.example.app\r\nx: 1")?.contains("line break") == true)
        #expect(APNSHeaderValueRules.topicProblem("a\u{7F}b") != nil)
    }

    @Test func collapseIDsHoldNoControlCharacterAndAtMost64Bytes() {
        #expect(APNSHeaderValueRules.collapseIDProblem(String(repeating: "c", count: 64)) == nil)
        #expect(
            APNSHeaderValueRules.collapseIDProblem(String(repeating: "é", count: 33))
                == "--collapse-id is 66 bytes; APNs takes at most 64"
        )
        #expect(APNSHeaderValueRules.collapseIDProblem("a\tb")?.contains("control character") == true)
    }

    @Test(arguments: [
        ("ABC123DEFG", true), ("abc123defg", true), ("ABC123", false), ("ABC123DEF-", false), ("ÄBC123DEFG", false),
    ])
    func identifiersAreTenLettersAndDigits(value: String, accepted: Bool) {
        let problem = APNSHeaderValueRules.identifierProblem(value, option: "--key-id")
        #expect((problem == nil) == accepted, "\(problem ?? "accepted")")
        if !accepted { #expect(problem?.hasPrefix("--key-id is 10 letters and digits") == true) }
    }
}
