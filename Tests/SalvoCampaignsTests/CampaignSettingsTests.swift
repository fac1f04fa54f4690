import APNSWire
import SalvoCampaigns
import SalvoService
import SalvoTestTraits
import Testing

/// A campaign's settings as the API takes them: each refusal names its field, a time needs its offset, and what the
/// store keeps reads back to the same settings (every run of a campaign is built from it).
@Suite(.tags(.pure), .runs(.pure))
struct CampaignSettingsTests {
    static func read(_ text: String, upload: Bool = false) throws(ServiceProblem) -> CampaignSettings {
        try CampaignSettings.read(Array(text.utf8), upload: upload)
    }

    static func field(_ text: String, upload: Bool = false) -> String? {
        do {
            _ = try Self.read(text, upload: upload)
            return nil
        } catch {
            return error.errors.first?.field ?? error.kind.slug
        }
    }

    @Test func everySettingReadsBackFromWhatTheStoreKeeps() throws {
        let settings = try Self.read(
            #"""
            {"name":"spring","audience":{"file":"lists/a.csv"},"column":"device","template":"welcome",
             "push_type":"background","topic":"com.example.app","priority":5,"expiration":1800000000,
             "collapse_id":"spring","send_at":"2026-12-01T10:00:00.250+01:00","rate":250}
            """#
        )
        #expect(settings.audience == .file("lists/a.csv") && settings.column == "device")
        #expect(settings.template == "welcome" && settings.payload == nil)
        #expect(settings.pushType == .background && settings.priority == NotificationPriority(rawValue: 5))
        #expect(settings.sendAt == 1_796_115_600_250)
        #expect(settings.rate == 250 && settings.expiration == 1_800_000_000)
        #expect(try CampaignSettings.read(settings.json, upload: false) == settings)

        let upload = try Self.read(#"{"payload":{"aps":{"alert":"hi"}}}"#, upload: true)
        #expect(upload.audience == .upload && upload.sendAt == nil && upload.column == "token")
        #expect(try CampaignSettings.read(upload.json, upload: true) == upload)
    }

    @Test func eachRefusalNamesItsField() {
        let file = #""audience":{"file":"a.csv"}"#
        #expect(Self.field(#"{"payload":{"aps":{}}}"#) == "audience")
        #expect(Self.field(#"{"audience":"a.csv","payload":{"aps":{}}}"#) == "audience")
        #expect(Self.field(#"{"audience":{"file":"a.csv"},"payload":{"aps":{}}}"#, upload: true) == "audience")
        #expect(Self.field(#"{\#(file)}"#) == "payload")
        #expect(Self.field(#"{\#(file),"payload":{"aps":{}},"template":"t"}"#) == "template")
        #expect(Self.field(#"{\#(file),"template":"no/slash"}"#) == "template")
        #expect(Self.field(#"{\#(file),"payload":{"alert":"no aps"}}"#) == "payload")
        for sendAt in [
            "\"tomorrow\"", "\"2026-12-01\"", "\"2026-12-01T09:00:00\"", "\"2026-13-01T09:00:00Z\"", "1796115600",
        ] {
            #expect(Self.field(#"{\#(file),"payload":{"aps":{}},"send_at":\#(sendAt)}"#) == "send_at", "\(sendAt)")
        }
        for rate in ["0", "-5", "1.5", "\"10\"", "1000001"] {
            #expect(Self.field(#"{\#(file),"payload":{"aps":{}},"rate":\#(rate)}"#) == "rate", "\(rate)")
        }
        #expect(Self.field(#"{\#(file),"payload":{"aps":{}},"priority":7}"#) == "priority")
        #expect(Self.field(#"{\#(file),"payload":{"aps":{}},"push_type":"shout"}"#) == "push_type")
        #expect(Self.field(#"{\#(file),"payload":{"aps":{}},"push_type":"voip","topic":"com.example.app"}"#) == "topic")
        #expect(Self.field(#"{\#(file),"payload":{"aps":{}},"name":""}"#) == "name")
        for collapseID in ["", " spring", "spring ", "printemps é"] {
            #expect(Self.field(#"{\#(file),"payload":{"aps":{}},"collapse_id":"\#(collapseID)"}"#) == "collapse_id")
        }
        for topic in ["", "com.example app", "com.exemple.é"] {
            #expect(Self.field(#"{\#(file),"payload":{"aps":{}},"topic":"\#(topic)"}"#) == "topic", "\(topic)")
        }
        #expect(Self.field("[1]") == "bad-request")
        #expect(Self.field("{") == "bad-json")
    }

    @Test func timesNeedTheirOffsetAndKeepTheirMilliseconds() {
        let paris = CampaignSettings.timeTextRoundTrip("2026-12-01T10:00:00+01:00")
        #expect(paris == "2026-12-01T09:00:00.000Z")
        #expect(CampaignSettings.timeTextRoundTrip("2026-12-01T09:00:00.5Z") == "2026-12-01T09:00:00.500Z")
        #expect(CampaignSettings.timeTextRoundTrip("2026-12-01T09:00:00") == nil)
        #expect(CampaignSettings.timeTextRoundTrip("2026-12-01") == nil)
    }

    @Test func localTimeSettingsAreCheckedAndReadBack() throws {
        let payload = #""payload":{"aps":{}}"#
        let local = try Self.read(
            #"{\#(payload),"deliver_at_local":"09:00","zone_column":"tz","local_fallback":"Asia/Tokyo"}"#,
            upload: true
        )
        #expect(local.deliverAtLocal == LocalTime(hour: 9, minute: 0) && local.zoneColumn == "tz")
        #expect(local.localFallback == .zone("Asia/Tokyo"))
        #expect(try CampaignSettings.read(local.json, upload: true) == local)
        // The defaults: the column `time_zone`, and UTC for rows without a known zone, kept as stated.
        let plain = try Self.read(#"{\#(payload),"deliver_at_local":"23:59"}"#, upload: true)
        #expect(plain.zoneColumn == "time_zone" && plain.localFallback == .zone("UTC"))
        #expect(String(decoding: plain.json, as: UTF8.self).contains(#""local_fallback":"UTC""#))
        let skip = try Self.read(#"{\#(payload),"deliver_at_local":"07:30","local_fallback":"skip"}"#, upload: true)
        #expect(skip.localFallback == .skip)
        #expect(try CampaignSettings.read(skip.json, upload: true) == skip)

        for bad in [#""25:00""#, #""9:00""#, #""09:60""#, "900", #""09:00:00""#] {
            #expect(Self.field(#"{\#(payload),"deliver_at_local":\#(bad)}"#, upload: true) == "deliver_at_local")
        }
        #expect(
            Self.field(#"{\#(payload),"deliver_at_local":"09:00","local_fallback":"Mars/Base"}"#, upload: true)
                == "local_fallback"
        )
        #expect(Self.field(#"{\#(payload),"local_fallback":"UTC"}"#, upload: true) == "local_fallback")
        #expect(Self.field(#"{\#(payload),"zone_column":"tz"}"#, upload: true) == "zone_column")
        #expect(
            Self.field(#"{\#(payload),"deliver_at_local":"09:00","zone_column":"token"}"#, upload: true)
                == "zone_column"
        )
        #expect(
            Self.field(#"{\#(payload),"deliver_at_local":"09:00","zone_column":""}"#, upload: true) == "zone_column"
        )
    }

    @Test func aQueryAudienceNamesOnlyItsQueryAndTokenColumn() throws {
        let payload = #""payload":{"aps":{"alert":"hi"}}"#
        let settings = try Self.read(
            #"{"audience":{"postgres":{"query":"SELECT t AS device FROM d;","column":"device"}},\#(payload)}"#
        )
        #expect(settings.audience == .postgres(query: "SELECT t AS device FROM d;") && settings.column == "device")
        #expect(!settings.audience.isFile)
        #expect(try CampaignSettings.read(settings.json, upload: false) == settings)
        let plain = try Self.read(#"{"audience":{"postgres":{"query":"SELECT token FROM d"}},\#(payload)}"#)
        #expect(plain.column == "token")
        let same = try Self.read(
            #"{"audience":{"postgres":{"query":"SELECT 1","column":"device"}},"column":"device",\#(payload)}"#
        )
        #expect(same.column == "device")

        let refusals: [(String, String)] = [
            (#"{"postgres":"SELECT 1"}"#, "audience.postgres"),
            (#"{"postgres":{}}"#, "audience.postgres.query"),
            (#"{"postgres":{"query":7}}"#, "audience.postgres.query"),
            (#"{"postgres":{"query":"  \n "}}"#, "audience.postgres.query"),
            (#"{"postgres":{"query":"SELECT \u0000"}}"#, "audience.postgres.query"),
            (#"{"postgres":{"query":"SELECT 1","column":""}}"#, "audience.postgres.column"),
            (#"{"postgres":{"query":"SELECT 1","url":"postgres://x@y/z"}}"#, "audience.postgres.url"),
            (#"{"postgres":{"query":"SELECT 1","password":"secret"}}"#, "audience.postgres.password"),
            (#"{"postgres":{"query":"SELECT 1"},"file":"a.csv"}"#, "audience"),
        ]
        for (audience, field) in refusals {
            #expect(Self.field(#"{"audience":\#(audience),\#(payload)}"#) == field, "\(audience)")
        }
        let long = String(repeating: "x", count: CampaignSettings.maximumQueryBytes + 1)
        #expect(Self.field(#"{"audience":{"postgres":{"query":"\#(long)"}},\#(payload)}"#) == "audience.postgres.query")
        #expect(
            Self.field(#"{"audience":{"postgres":{"query":"SELECT 1","column":"a"}},"column":"b",\#(payload)}"#)
                == "audience.postgres.column"
        )
    }
}

extension CampaignSettings {
    /// A time as `send_at` reads it, written back as the API writes times; nil when refused.
    static func timeTextRoundTrip(_ text: String) -> String? {
        guard
            let settings = try? CampaignSettings.read(
                Array(#"{"payload":{"aps":{}},"send_at":"\#(text)"}"#.utf8),
                upload: true
            ), let sendAt = settings.sendAt
        else { return nil }
        return CampaignSettings.timeText(sendAt)
    }
}
