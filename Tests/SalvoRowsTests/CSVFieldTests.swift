import SalvoRows
import SalvoTestTraits
import Testing

/// Every CSV that Salvo writes quotes a field per RFC 4180 when it holds a comma, a quote or a line break, a CRLF
/// among them (a CRLF is one `Character`, equal to neither "\r" nor "\n": it was written unquoted, splitting the row).
@Suite(.tags(.pure), .runs(.pure)) struct CSVFieldTests {
    @Test(arguments: [
        ("plain", "plain"), ("a,b", "\"a,b\""), ("say \"hi\"", "\"say \"\"hi\"\"\""), ("two\nlines", "\"two\nlines\""),
        ("two\r\nlines", "\"two\r\nlines\""), ("bare\rreturn", "\"bare\rreturn\""), ("", ""),
    ])
    func aFieldIsQuotedWhenItMustBe(text: String, written: String) {
        #expect(csvField(text) == written)
    }
}
