@testable import SalvoHTTP2

/// Questions tests ask of a machine's answer: whether it holds an action of a kind, and the action's value.
extension HTTP2ConnectionMachine.Actions {
    var resetStreams: [Int32] {
        for case .resetStreams(let ids) in self { return ids }
        return []
    }
    var note: String? {
        for case .note(let note) in self { return note }
        return nil
    }
    var stopJob: HTTP2JobStop? {
        for case .stopJob(let stop) in self { return stop }
        return nil
    }
    var renewToken: HTTP2ConnectionMachine.TokenRenewal? {
        for case .renewToken(let renewal) in self { return renewal }
        return nil
    }
    var impossible: HTTP2ConnectionMachine.ImpossibleEvent? {
        for case .impossible(let event) in self { return event }
        return nil
    }
    var sendPing: Bool { self.contains(.sendPing) }
    var giveBack: Bool { self.contains(.giveBack) }
    var ready: Bool { self.contains(.ready) }
    var retire: Bool { self.contains(.retire) }
    var close: Bool { self.contains(.close) }
    var writeRequests: Bool { self.contains(.writeRequests) }
}
