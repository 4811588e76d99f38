import Foundation
import Synchronization

#if canImport(Glibc)
  import Glibc
  import SwiftOverlayShims  // where `timeval` is declared on Linux
#elseif canImport(Darwin)
  import Darwin
#endif

/// A loopback HTTP server that drops a reused keep-alive connection the way a real server's idle timeout
/// does when it races the client: the first request on a connection is answered (keep-alive); the second
/// request on the same connection is read and the connection closed without an answer. A client that then
/// retries on a fresh connection must send the body again.
///
/// It records, for every request, the `Content-Length` its head announced and the body bytes that came;
/// a request whose body does not come within ``bodyWait`` is recorded short and answered `408`.
final class ReusedConnectionServer: Sendable {
  /// One request as the server saw it.
  struct Received: Sendable, Equatable {
    /// The body length the head announced (with chunks: the bytes before the last chunk, plus one when the
    /// last chunk never came).
    var announced: Int
    /// The body bytes that came.
    var arrived: Int
    /// Whether it was the second request on its connection (the one dropped).
    var onReusedConnection: Bool
  }

  /// How long a body may take to follow its head.
  let bodyWait: Duration
  let port: UInt16
  private let listener: Int32
  private let log = Mutex<[Received]>([])

  var url: URL { URL(string: "http://127.0.0.1:\(port)")! }
  /// Every request, oldest first.
  var received: [Received] { log.withLock { $0 } }

  init(bodyWait: Duration = .seconds(10), answer: String) throws {
    self.bodyWait = bodyWait
    let (socket, port) = try LoopbackSocket.listen()
    listener = socket
    self.port = port
    let response =
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \(answer.utf8.count)\r\n\r\n" + answer
    let thread = Thread { [self] in self.serve(response: response) }
    thread.start()
  }

  /// Stops accepting; the accepting thread closes the socket as it ends (closed here, its descriptor could
  /// be reused by another test's socket before that thread's next `accept`: see `CannedHTTPServer.stop()`).
  func stop() {
    shutdown(listener, Int32(SHUT_RDWR))
  }

  private func serve(response: String) {
    while true {
      let connection = accept(listener, nil, nil)
      guard connection >= 0 else {
        close(listener)
        return
      }
      // One thread per connection, so a client holding one open cannot keep the next from being read.
      let thread = Thread { [self] in self.handle(connection, response: response) }
      thread.start()
    }
  }

  private func handle(_ connection: Int32, response: String) {
    defer { close(connection) }
    var timeout = timeval()
    timeout.tv_sec = Int(bodyWait.components.seconds)
    setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var pending: [UInt8] = []
    for index in 0..<2 {
      guard var received = readRequest(connection, pending: &pending) else { return }
      received.onReusedConnection = index == 1
      log.withLock { $0.append(received) }
      if received.arrived < received.announced {
        write(connection, "HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        return
      }
      if index == 1 { return }  // the reused connection: read, then dropped without an answer
      write(connection, response)
    }
  }

  private func readRequest(_ connection: Int32, pending: inout [UInt8]) -> Received? {
    guard let head = readUntil("\r\n\r\n", connection, pending: &pending) else { return nil }
    let fields = String(decoding: head, as: UTF8.self).lowercased().split(separator: "\r\n")
    func field(_ name: String) -> String? {
      fields.first { $0.hasPrefix(name + ":") }.map {
        $0.dropFirst(name.count + 1).trimmingCharacters(in: .whitespaces)
      }
    }
    if field("transfer-encoding") == "chunked" {
      // Chunks until the last (size 0); a body that stops early is short.
      var body = 0
      while let sizeLine = readUntil("\r\n", connection, pending: &pending),
        let size = Int(String(decoding: sizeLine.dropLast(2), as: UTF8.self), radix: 16)
      {
        guard read(size + 2, connection, pending: &pending) else { break }
        if size == 0 { return Received(announced: body, arrived: body, onReusedConnection: false) }
        body += size
      }
      return Received(announced: body + 1, arrived: body, onReusedConnection: false)
    }
    let announced = field("content-length").flatMap { Int($0) } ?? 0
    let arrived = read(announced, connection, pending: &pending) ? announced : pending.count
    pending.removeAll()
    return Received(announced: announced, arrived: arrived, onReusedConnection: false)
  }

  /// Reads up to and including `separator`; nil when the connection ends or times out first.
  private func readUntil(_ separator: String, _ connection: Int32, pending: inout [UInt8]) -> [UInt8]? {
    let separator = Array(separator.utf8)
    while pending.firstRange(of: separator) == nil {
      guard fill(connection, &pending) else { return nil }
    }
    let end = pending.firstRange(of: separator)!.upperBound
    defer { pending.removeFirst(end) }
    return Array(pending[..<end])
  }

  /// Reads `count` bytes, consuming them; false when the connection ends or times out first.
  private func read(_ count: Int, _ connection: Int32, pending: inout [UInt8]) -> Bool {
    while pending.count < count {
      guard fill(connection, &pending) else { return false }
    }
    pending.removeFirst(count)
    return true
  }

  private func fill(_ connection: Int32, _ pending: inout [UInt8]) -> Bool {
    var buffer = [UInt8](repeating: 0, count: 4096)
    let count = recv(connection, &buffer, buffer.count, 0)
    guard count > 0 else { return false }
    pending += buffer[0..<count]
    return true
  }

  private func write(_ connection: Int32, _ text: String) {
    let bytes = Array(text.utf8)
    #if canImport(Glibc)
      _ = bytes.withUnsafeBytes { Glibc.write(connection, $0.baseAddress, $0.count) }
    #else
      _ = bytes.withUnsafeBytes { Darwin.write(connection, $0.baseAddress, $0.count) }
    #endif
  }
}
