import Foundation
import SalvoTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `GET path` from 127.0.0.1:`port` over a plain socket, HTTP/1.0: the whole answer (head and body), or nil when
/// nothing listens. Bounded: a 5 s receive timeout.
func httpGet(port: Int, path: String) -> String? {
    plainExchange(port: port, request: "GET \(path) HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", recordingFailures: false)
}

/// Sends `request` to 127.0.0.1:`port` over a plain socket and reads until the peer closes (bounded by a 5 s receive
/// timeout): the whole answer, or nil when it cannot connect or send. With `recordingFailures`, a failed connect,
/// send or receive is also recorded as an issue of the running test.
func plainExchange(port: Int, request: String, recordingFailures: Bool) -> String? {
    guard let descriptor = LoopbackSocket.connect(port: port) else {
        if recordingFailures { Issue.record("connect to 127.0.0.1:\(port): errno \(errno)") }
        return nil
    }
    defer { close(descriptor) }
    var timeout = timeval(tv_sec: 5, tv_usec: 0)
    setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    let bytes = Array(request.utf8)
    guard bytes.withUnsafeBytes({ send(descriptor, $0.baseAddress, $0.count, 0) }) == bytes.count else {
        if recordingFailures { Issue.record("send to 127.0.0.1:\(port): errno \(errno)") }
        return nil
    }
    var answer: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
        if count < 0 && errno == EINTR { continue }
        if count < 0 && recordingFailures {
            Issue.record("recv from 127.0.0.1:\(port): errno \(errno) after \(answer.count) bytes")
        }
        guard count > 0 else { break }
        answer += buffer[0..<count]
    }
    return String(decoding: answer, as: UTF8.self)
}

/// The value of the sample `name{labels}` in Prometheus text, nil when absent.
func sample(_ text: String, _ name: String, _ labels: String) -> Double? {
    let key = "\(name){\(labels)} "
    for line in text.split(separator: "\n") where line.hasPrefix(key) {
        return Double(line.dropFirst(key.count))
    }
    return nil
}
