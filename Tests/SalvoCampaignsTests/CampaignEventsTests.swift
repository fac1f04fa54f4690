import APNSWire
import SalvoService
import SalvoTestTraits
import Testing

@testable import SalvoCampaigns

/// A campaign's webhook events as values: its rejects file read into gone tokens and refusals, each with an id made
/// from its row, and its changes of state.
@Suite(.tags(.pure), .runs(.pure)) struct CampaignEventsTests {
    @Test func theRejectsFileGivesGoneTokensAndRefusalsByRow() {
        let csv = """
            file,line,token,status,reason
            "/audience, 1.csv",5,not-a-token,,not 64 hexadecimal digits
            /a.csv,7,\(String(repeating: "ab", count: 32)),410,Unregistered
            /a.csv,9,\(String(repeating: "cd", count: 32)),400,DeviceTokenNotForTopic
            /a.csv,12,\(String(repeating: "ef", count: 32)),410,ExpiredToken

            """
        let events = CampaignEvents.rejects(campaign: "k", csv: csv, at: 99)
        #expect(events.map(\.id) == ["c:k:7:gone", "c:k:9:refused", "c:k:12:gone"])
        #expect(events.map(\.kind) == [.gone, .refused, .gone])
        #expect(events[0].data["token"] == .string(String(repeating: "ab", count: 32)))
        #expect(events[1].data["reason"] == .string("DeviceTokenNotForTopic") && events[1].data["line"] == .int(9))
        #expect(events.allSatisfy { $0.createdAt == 99 })
        #expect(CampaignEvents.rejects(campaign: "k", csv: csv, at: 5).map(\.id) == events.map(\.id), "the same ids")
    }

    @Test func aCSVLinesQuotedFieldsAreRead() {
        #expect(CampaignEvents.fields(#"a,"b, c","d ""e""",,f"#) == ["a", "b, c", #"d "e""#, "", "f"])
        #expect(CampaignEvents.fields("x\r") == ["x"])
        #expect(CampaignEvents.fields(#""""#) == [""])
    }

    @Test func aStateChangeIsAnEvent() {
        let event = CampaignEvents.state(campaign: "k", state: .failed, message: "no gateway", at: 5)
        #expect(event.id == "c:k:state:failed:5" && event.kind == .campaign)
        #expect(event.data["message"] == .string("no gateway") && event.data["state"] == .string("failed"))
    }
}
