import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// Where the verifying keys come from: a JWKS document (RFC 7517) read from a file, fetched from a URL, or
/// given inline, read again whenever ``KeySetSchedule`` says so (so a rotation needs no restart).
///
/// ```swift
/// let keys = KeySetSource.url(URL(string: "https://id.example.com/.well-known/jwks.json")!)
/// let keys = KeySetSource.file("/etc/event-server/jwks.json")
/// ```
public struct KeySetSource: Sendable {
  /// What the source is, for logs: the path or the URL (a JWKS holds public keys only).
  public let description: String
  private let load: @Sendable () async throws -> Data

  /// The largest JWKS document read.
  public static let maximumBytes = 1 << 20

  /// A source reading its document with `load` (a test's keys, a secret store).
  /// - Parameters:
  ///   - description: What it is, for logs.
  ///   - load: Reads the JWKS document; throws when it cannot.
  public init(description: String, load: @escaping @Sendable () async throws -> Data) {
    self.description = description
    self.load = load
  }

  /// The JWKS in the file at `path`, read again at each fetch.
  public static func file(_ path: String) -> KeySetSource {
    KeySetSource(description: path) {
      let data = try Data(contentsOf: URL(fileURLWithPath: path))
      guard data.count <= maximumBytes else { throw KeySetError("\(path) is over \(maximumBytes) bytes") }
      return data
    }
  }

  /// The JWKS at `url`, fetched with `client` within `timeout`; only a `200` answer is taken.
  public static func url(
    _ url: URL,
    client: HTTPClient = .shared,
    timeout: Duration = .seconds(5)
  ) -> KeySetSource {
    KeySetSource(description: url.absoluteString) {
      let response = try await client.execute(
        HTTPClientRequest(url: url.absoluteString),
        timeout: .nanoseconds(Int64(timeout / .nanoseconds(1)))
      )
      guard response.status == .ok else { throw KeySetError("\(url.absoluteString) answered \(response.status.code)") }
      let body = try await response.body.collect(upTo: maximumBytes)
      return Data(body.readableBytesView)
    }
  }

  /// The JWKS given as text.
  public static func inline(_ json: String) -> KeySetSource {
    KeySetSource(description: "inline key set") { Data(json.utf8) }
  }

  /// Reads the document once.
  func read() async throws -> Data { try await load() }
}

/// A key set that could not be read or holds no key the server can use.
public struct KeySetError: Error, Equatable, CustomStringConvertible {
  /// What went wrong, in one line.
  public let message: String

  init(_ message: String) {
    self.message = message
  }

  public var description: String { message }
}
