import EventProtocol
import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// Plain HTTP requests to a live server, as an attacker would send them: any method, path, query, body and
/// credentials, and the raw status and body back.
struct RawHTTP {
  let base: URL

  struct Answer {
    var status: Int
    var body: Data
    /// The headers, by lower-case name.
    var headers: [String: String] = [:]
    var text: String { String(decoding: body, as: UTF8.self) }
    /// The API error's code, when the body is one.
    var code: String? {
      (try? JSONSerialization.jsonObject(with: body) as? [String: Any])?["code"] as? String
    }
  }

  func send(
    _ method: String,
    _ path: String,
    query: [String: String] = [:],
    as user: UserID? = nil,
    key: String? = nil,
    bearer: String? = nil,
    body: Data? = nil,
    contentType: String? = nil,
    rawQuery: String? = nil
  ) async throws -> Answer {
    var components = URLComponents()
    if !query.isEmpty {
      components.queryItems = query.sorted { $0.key < $1.key }.map { URLQueryItem(name: $0.key, value: $0.value) }
    }
    // A key holds slashes, and `+` would read as a space: encode what URLComponents leaves. `rawQuery` is sent
    // as it is, for tests of how queries are read.
    let encodedQuery = rawQuery ?? components.percentEncodedQuery?.replacingOccurrences(of: "+", with: "%2B")
    var head = "\(method) /\(path)\(encodedQuery.map { "?" + $0 } ?? "") HTTP/1.1\r\n"
    head += "Host: 127.0.0.1\r\nConnection: close\r\nContent-Length: \(body?.count ?? 0)\r\n"
    if let user {
      let secret = key ?? testKeyByUser[user] ?? "no-such-key"
      head += "Authorization: Basic \(Data("\(user.rawValue):\(secret)".utf8).base64EncodedString())\r\n"
    }
    if let bearer { head += "Authorization: Bearer \(bearer)\r\n" }
    if let contentType { head += "Content-Type: \(contentType)\r\n" }
    return try await exchange(Data((head + "\r\n").utf8) + (body ?? Data()))
  }

  /// Sends `request`, a whole HTTP/1.1 request as bytes, and reads the answer.
  func exchange(_ request: Data) async throws -> Answer {
    let port = base.port!
    // A plain socket, not URLSession: Foundation's on Linux hangs on a 401 with WWW-Authenticate, which
    // these tests ask for on purpose. Blocking I/O runs off the cooperative pool.
    let response = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Data, any Error>) in
      DispatchQueue.global().async {
        continuation.resume(with: Result { try Self.exchange(request, port: port) })
      }
    }
    return try Self.parse(response)
  }

  private struct Failure: Error, CustomStringConvertible {
    var description: String
  }

  /// Sends `request` to 127.0.0.1:`port` and reads until the server closes, within ``exchangeDeadline``.
  ///
  /// Every write and read has a deadline of its own (a blocked socket call returns after at most 5 s), and
  /// the whole exchange one: a server that stops reading a body it has refused (and waits for the client to
  /// close) leaves the client to stop sending and read the answer already written, as an HTTP client that
  /// reads while it writes would.
  private static func exchange(_ request: Data, port: Int) throws -> Data {
    guard let socket = loopbackSocket(from: "127.0.0.1", to: port, receiveTimeoutSeconds: 5) else {
      throw Failure(description: "cannot connect to port \(port)")
    }
    defer { close(socket) }
    var sendTimeout = timeval(tv_sec: 5, tv_usec: 0)
    setsockopt(socket, SOL_SOCKET, SO_SNDTIMEO, &sendTimeout, socklen_t(MemoryLayout<timeval>.size))
    let clock = ContinuousClock()
    let deadline = clock.now + exchangeDeadline
    var sent = 0
    while sent < request.count, clock.now < deadline {
      // The server may answer (413) and close, or stop reading, before the whole body is sent: stop
      // sending then (the send fails, or times out) and read what it answered.
      let count = request.withUnsafeBytes {
        Glibc.send(socket, $0.baseAddress! + sent, request.count - sent, Int32(MSG_NOSIGNAL))
      }
      if count <= 0 { break }
      sent += count
    }
    var response = Data()
    var buffer = [UInt8](repeating: 0, count: 65_536)
    while clock.now < deadline {
      let count = recv(socket, &buffer, buffer.count, 0)
      if count > 0 {
        response.append(contentsOf: buffer[..<count])
      } else if count == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        break  // Closed by the server, or reset.
      } else if hasWholeAnswer(response) {
        break  // The answer is complete and the server keeps the connection open: done.
      }
    }
    return response
  }

  /// How long one exchange may take in all: the tests' servers answer in milliseconds, so reaching it means
  /// the server is stuck, and the test fails on a missing answer rather than hanging.
  private static let exchangeDeadline = Duration.seconds(30)

  /// Whether `response` holds a whole answer: its head and a body of the `Content-Length` it names.
  private static func hasWholeAnswer(_ response: Data) -> Bool {
    guard let end = response.range(of: Data("\r\n\r\n".utf8)) else { return false }
    let head = String(decoding: response[..<end.lowerBound], as: UTF8.self).lowercased()
    guard let line = head.split(separator: "\r\n").first(where: { $0.hasPrefix("content-length:") }),
      let length = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces))
    else { return false }
    return response.count - end.upperBound >= length
  }

  private static func parse(_ response: Data) throws -> Answer {
    guard let end = response.range(of: Data("\r\n\r\n".utf8)) else {
      throw Failure(description: "no answer (\(response.count) bytes)")
    }
    let head = String(decoding: response[..<end.lowerBound], as: UTF8.self)
    let statusLine = head.split(separator: "\r\n").first ?? ""
    let parts = statusLine.split(separator: " ")
    guard parts.count >= 2, let status = Int(parts[1]) else { throw Failure(description: "bad status: \(statusLine)") }
    var body = Data(response[end.upperBound...])
    if head.lowercased().contains("transfer-encoding: chunked") { body = dechunk(body) }
    var headers: [String: String] = [:]
    for line in head.split(separator: "\r\n").dropFirst() {
      guard let colon = line.firstIndex(of: ":") else { continue }
      headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
    }
    return Answer(status: status, body: body, headers: headers)
  }

  private static func dechunk(_ data: Data) -> Data {
    var result = Data()
    var rest = data[...]
    while let lineEnd = rest.range(of: Data("\r\n".utf8)),
      let size = Int(String(decoding: rest[..<lineEnd.lowerBound], as: UTF8.self), radix: 16), size > 0
    {
      let start = lineEnd.upperBound
      result.append(rest[start..<start + size])
      rest = rest[(start + size + 2)...]
    }
    return result
  }

  /// Posts a mutation of `command` (JSON) from `user`.
  func mutation(_ command: VideoCommandJSON, as user: UserID, id: UInt64, client: String = "c1") async throws -> Answer
  {
    let body = #"{"client_id":"\#(client)","mutation_id":\#(id),"mutation":\#(command.json)}"#
    return try await send("POST", "api/v1/mutations", as: user, body: Data(body.utf8), contentType: "application/json")
  }

  /// Uploads and completes `bytes` under `key` as `user`.
  func upload(_ bytes: Data, key: String, as user: UserID) async throws -> [Answer] {
    [
      try await send("PUT", "api/v1/uploads", query: ["key": key, "offset": "0"], as: user, body: bytes),
      try await send("POST", "api/v1/uploads/complete", query: ["key": key], as: user),
    ]
  }

  /// Reads the whole blob under `key` as `user`.
  func download(_ key: String, as user: UserID) async throws -> Answer {
    try await send("GET", "api/v1/blobs", query: ["key": key], as: user)
  }
}

/// A video command as JSON, built from its parts (so a test can send what no Swift client would).
struct VideoCommandJSON {
  var json: String

  static func uploaded(video: String, recipient: String, key: String, size: Int) -> VideoCommandJSON {
    VideoCommandJSON(
      json:
        #"{"uploaded":{"_0":{"video":"\#(video)","recipient":"\#(recipient)","blobKey":"\#(key)","size":\#(size)}}}"#
    )
  }

  static func deleted(_ video: String) -> VideoCommandJSON {
    VideoCommandJSON(json: #"{"deleted":{"_0":"\#(video)"}}"#)
  }
}

/// A TCP connection from a chosen loopback address that sends nothing: what a connection flood is made of.
/// Its calls block: make them off the cooperative pool (``offThePool(_:)``).
final class IdleConnection: Sendable {
  private let socket: Int32

  /// Connects from `source` (such as 127.0.0.2: every 127/8 address is loopback) to `port` on 127.0.0.1.
  init?(from source: String, to port: Int) {
    guard let socket = loopbackSocket(from: source, to: port, receiveTimeoutSeconds: 5) else { return nil }
    self.socket = socket
  }

  /// Whether the server closed the connection (a read ends at once, or within the 5 s receive timeout).
  var isClosedByServer: Bool {
    var byte: UInt8 = 0
    return recv(socket, &byte, 1, 0) == 0
  }

  deinit {
    close(socket)
  }
}

/// A TCP socket connected from `source` (any 127/8 address) to `port` on 127.0.0.1, reads timing out after
/// `receiveTimeoutSeconds`; `nil` when it cannot connect. Blocking: call it off the cooperative pool.
func loopbackSocket(from source: String, to port: Int, receiveTimeoutSeconds: Int) -> Int32? {
  let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
  guard socket >= 0 else { return nil }
  func address(_ text: String, port: Int) -> sockaddr_in {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    inet_pton(AF_INET, text, &address.sin_addr)
    return address
  }
  var local = address(source, port: 0)
  var remote = address("127.0.0.1", port: port)
  let length = socklen_t(MemoryLayout<sockaddr_in>.size)
  let bound = withUnsafePointer(to: &local) {
    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, length) }
  }
  let connected = withUnsafePointer(to: &remote) {
    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, length) }
  }
  guard bound == 0, connected == 0 else {
    close(socket)
    return nil
  }
  var timeout = timeval(tv_sec: receiveTimeoutSeconds, tv_usec: 0)
  setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
  return socket
}
