import Foundation
import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A loopback HTTP server for transport tests: on 127.0.0.1 and a port the system picks, it answers every
/// request with one canned response and records the requests' heads. It runs on its own thread until
/// ``stop()`` closes its socket.
final class CannedHTTPServer: Sendable {
  /// The raw response written to a connection, given the request's head.
  let respond: @Sendable (String) -> String
  /// The port it listens on.
  let port: UInt16
  private let listener: Int32
  private let heads = Mutex<[String]>([])

  var url: URL { URL(string: "http://127.0.0.1:\(port)")! }
  /// The request heads received (request line and headers), oldest first.
  var requests: [String] { heads.withLock { $0 } }

  /// Starts a server answering `status` with `headers` and `body`.
  convenience init(status: String, headers: [String] = [], body: String) throws {
    let head = (["HTTP/1.1 \(status)", "Content-Length: \(body.utf8.count)", "Connection: close"] + headers)
      .joined(separator: "\r\n")
    try self.init(rawResponse: head + "\r\n\r\n" + body)
  }

  convenience init(rawResponse: String) throws {
    try self.init { _ in rawResponse }
  }

  /// Starts a server answering each request with what `respond` makes of its head (request line and
  /// headers).
  init(respond: @escaping @Sendable (String) -> String) throws {
    self.respond = respond
    let (socket, port) = try LoopbackSocket.listen()
    listener = socket
    self.port = port
    let thread = Thread { [self] in self.serve() }
    thread.start()
  }

  /// Stops accepting; the serving thread ends, and closes the socket then. Closed here, its descriptor
  /// could be given to another test's new socket while the thread is between two connections, and the
  /// thread's next `accept` would answer that test's requests with this server's canned answer.
  func stop() {
    shutdown(listener, Int32(SHUT_RDWR))
  }

  private func serve() {
    while true {
      let connection = accept(listener, nil, nil)
      guard connection >= 0 else {
        close(listener)
        return
      }
      var received: [UInt8] = []
      var body: [UInt8] = []
      var buffer = [UInt8](repeating: 0, count: 4096)
      while !received.ends(with: Array("\r\n\r\n".utf8)) {
        let count = read(connection, &buffer, buffer.count)
        guard count > 0 else { break }
        received += buffer[0..<count]
        if let end = received.firstRange(of: Array("\r\n\r\n".utf8)) {
          body = Array(received[end.upperBound...])
          received = Array(received[..<end.upperBound])
          break
        }
      }
      let head = String(decoding: received, as: UTF8.self)
      heads.withLock { $0.append(head) }
      Self.readBody(of: head, from: connection, after: body)
      let bytes = Array(respond(head).utf8)
      _ = bytes.withUnsafeBytes { write(connection, $0.baseAddress, $0.count) }
      close(connection)
    }
  }

  /// Reads the request's body to its end (`already` is what came with the head) before the answer: a socket
  /// closed with unread bytes sends a reset, which can reach the client before the answer does. A streamed
  /// body comes in parts after the head (`Transfer-Encoding: chunked`), so on a busy machine it often arrived
  /// after the head was read ("Connection reset by peer" in `TransportBatchTests`). Reads wait at most 10 s.
  private static func readBody(of head: String, from connection: Int32, after already: [UInt8]) {
    let fields = head.lowercased()
    let chunked = fields.contains("\r\ntransfer-encoding: chunked")
    let length = fields.components(separatedBy: "\r\n")
      .first { $0.hasPrefix("content-length:") }
      .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) }
    guard chunked || (length ?? 0) > 0 else { return }
    var timeout = timeval(tv_sec: 10, tv_usec: 0)
    setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var body = already
    var buffer = [UInt8](repeating: 0, count: 4096)
    while chunked ? !body.ends(with: Array("0\r\n\r\n".utf8)) : body.count < length! {
      let count = read(connection, &buffer, buffer.count)
      guard count > 0 else { return }
      body += buffer[0..<count]
    }
  }

  /// A loopback socket that listens and never accepts: connections complete in its backlog, and requests
  /// sent on them are never answered. Close it with `close(_:)`.
  static func blackHole() throws -> (socket: Int32, port: UInt16) {
    try LoopbackSocket.listen()
  }

  /// A loopback port with nothing listening on it (bound, then closed).
  static func closedPort() throws -> UInt16 {
    let (socket, port) = try LoopbackSocket.listen()
    close(socket)
    return port
  }
}

extension Array where Element == UInt8 {
  fileprivate func ends(with suffix: [UInt8]) -> Bool {
    count >= suffix.count && Array(self[(count - suffix.count)...]) == suffix
  }
}

/// A listening TCP socket on 127.0.0.1, on a port the system picks.
enum LoopbackSocket {
  static func listen() throws -> (Int32, UInt16) {
    #if canImport(Glibc)
      let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    #else
      let socket = Darwin.socket(AF_INET, SOCK_STREAM, 0)
    #endif
    guard socket >= 0 else { throw POSIXError(.EIO) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, length) }
    }
    guard bound == 0, listenOn(socket) == 0 else { throw POSIXError(.EADDRINUSE) }
    _ = withUnsafeMutablePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socket, $0, &length) }
    }
    return (socket, UInt16(bigEndian: address.sin_port))
  }
}

private func listenOn(_ socket: Int32) -> Int32 {
  listen(socket, 128)
}
