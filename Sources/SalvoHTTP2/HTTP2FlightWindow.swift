/// How many streams one connection may have in flight after the server answered 429 (TooManyRequests): a 429 halves
/// the flight it belonged to (at least 1 stream), and each accepted answer grows the window by `additiveIncrease`
/// per window's worth (additive increase, multiplicative decrease), until it reaches the stream ceiling and goes
/// away. A 429 for a stream written before the last cut was part of the flight that cut already answered for, and
/// does not cut again: one burst of 429s halves once, not once per answer.
///
/// Per connection and a value: the connection's machine owns it on its event loop, and a replacement connection
/// starts without one. It counts its cuts and the smallest window they left until the job takes them (`takeCuts`).
struct HTTP2FlightWindow: Hashable, Sendable {
    /// Streams the window grows by per window's worth of accepted answers.
    let additiveIncrease: Double
    /// The window (streams in flight at most), nil when there is none.
    private var window: Double?
    /// A 429 for a stream below this id was written before the last cut and does not cut again.
    private var cutBoundary = 0
    /// Cuts since they were last taken, and the smallest window they left.
    private var cuts = 0
    private var smallest: Int?

    init(additiveIncrease: Double) {
        self.additiveIncrease = additiveIncrease
    }

    /// The window in whole streams, nil when there is none.
    var streams: Int? { self.window.map { Int($0) } }

    /// The cap the window puts on streams in flight: at least 1; `Int.max` when there is none.
    var limit: Int { self.window.map { max(1, Int($0)) } ?? Int.max }

    /// A 429 for `streamID`, answered while `flight` streams (this one included) were in flight under the current
    /// limit; `nextStreamID` is the id the next request will have. Cuts the window to half of `flight` unless the
    /// stream was written before the last cut.
    mutating func tooManyRequests(streamID: Int, flight: Int, nextStreamID: Int) {
        guard streamID >= self.cutBoundary else { return }
        let cut = max(1, Double(flight) / 2)
        self.window = cut
        self.cutBoundary = nextStreamID
        self.cuts += 1
        self.smallest = min(self.smallest ?? Int(cut), Int(cut))
    }

    /// An accepted answer: the window grows by `additiveIncrease` per window's worth, and goes away once it reaches
    /// `ceiling` (the server's limit and our cap).
    mutating func accepted(ceiling: Int) {
        guard let window = self.window else { return }
        let grown = window + self.additiveIncrease / window
        self.window = grown >= Double(ceiling) ? nil : grown
    }

    /// The cuts since the last call and the smallest window they left; counting starts again.
    mutating func takeCuts() -> (cuts: Int, smallest: Int?) {
        defer {
            self.cuts = 0
            self.smallest = nil
        }
        return (self.cuts, self.smallest)
    }
}
