import EventProtocol
import Foundation
import UpdateMachine

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// The service's blob storage over HTTP (`docs/protocol.md`, "Blobs"), as a device reaches it: uploads
/// resume from the length the server holds, downloads read byte ranges.
///
/// It offers what a ``VideoDevice`` uses of its remote store: the length of an upload under way, appends,
/// completion, a blob's size and ranged reads. Deleting and listing blobs are the server's own business
/// (its janitor), so they are refused here as unavailable.
///
/// ```swift
/// let endpoint = HTTPEndpoint(baseURL: server, credentials: .init(user: "alice", apiKey: key))
/// let device = VideoDevice(user: "alice", transport: transport, store: store,
///                          remoteBlobs: HTTPBlobStore(endpoint: endpoint), localBlobs: files,
///                          clock: ContinuousClock(), seed: 1)
/// ```
public struct HTTPBlobStore: BlobStore {
  /// The server.
  public let endpoint: HTTPEndpoint
  /// The timeout of each request.
  public var timeout: Duration = .seconds(60)

  /// A store at `endpoint`.
  public init(endpoint: HTTPEndpoint) {
    self.endpoint = endpoint
  }

  public func partialLength(_ key: BlobKey) async throws(BlobStoreError) -> Int {
    try decode(Length.self, try await send("GET", "api/v1/uploads", key), key).length
  }

  public func append(_ bytes: Data, to key: BlobKey, at offset: Int) async throws(BlobStoreError) {
    let query = [URLQueryItem(name: "offset", value: String(offset))]
    let answer = try await send("PUT", "api/v1/uploads", key, query: query, body: bytes)
    _ = try decode(Length.self, answer, key, offset: offset)
  }

  public func complete(_ key: BlobKey, at time: Timestamp) async throws(BlobStoreError) {
    _ = try decode(Empty.self, try await send("POST", "api/v1/uploads/complete", key), key)
  }

  public func size(of key: BlobKey) async throws(BlobStoreError) -> Int {
    try decode(Size.self, try await send("GET", "api/v1/blobs/info", key), key).size
  }

  public func read(_ key: BlobKey, offset: Int, length: Int) async throws(BlobStoreError) -> Data {
    guard length > 0 else { return Data() }
    let range = "bytes=\(offset)-\(offset + length - 1)"
    let answer = try await send("GET", "api/v1/blobs", key, headers: ["Range": range])
    guard answer.status == 206 || answer.status == 200 else {
      _ = try decode(Empty.self, answer, key)
      throw .unavailable("HTTP \(answer.status) reading \(key)")
    }
    // A server that ignores ranges answers 200 with the whole blob: take the part asked for.
    if answer.status == 200 {
      let end = min(answer.body.count, offset + length)
      return offset < end ? answer.body.subdata(in: offset..<end) : Data()
    }
    return answer.body.prefix(length)
  }

  public func delete(_ key: BlobKey) async throws(BlobStoreError) {
    throw .unavailable("blobs are deleted by the server's janitor, not over HTTP")
  }

  public func list() async throws(BlobStoreError) -> [BlobInfo] {
    throw .unavailable("blobs are listed by the server's janitor, not over HTTP")
  }

  private func send(
    _ method: String,
    _ path: String,
    _ key: BlobKey,
    query: [URLQueryItem] = [],
    headers: [String: String] = [:],
    body: Data? = nil
  ) async throws(BlobStoreError) -> HTTPEndpoint.Answer {
    let query = [URLQueryItem(name: "key", value: key.rawValue)] + query
    do {
      return try await endpoint.send(method, path: path, query: query, headers: headers, body: body, timeout: timeout)
    } catch {
      throw .unavailable("\(method) \(path): \(error)")
    }
  }

  /// A success body, or the blob error the answer stands for.
  private func decode<Reply: Decodable>(
    _ type: Reply.Type,
    _ answer: HTTPEndpoint.Answer,
    _ key: BlobKey,
    offset: Int = 0
  ) throws(BlobStoreError) -> Reply {
    do throws(EventAPIError) {
      if (200...299).contains(answer.status) { return try WireFormat.decode(Reply.self, from: answer.body) }
      _ = try WireFormat.decode(Empty.self, from: answer.body)
      throw EventAPIError.malformedResponse("HTTP \(answer.status) with a success body")
    } catch {
      switch error.code.wireValue {
      case "BLOB_GONE": throw .gone(key)
      case "OFFSET_MISMATCH": throw .offsetMismatch(expected: -1, got: offset)
      default: throw .unavailable("HTTP \(answer.status): \(error)")
      }
    }
  }

  private struct Length: Decodable {
    var length: Int
  }

  private struct Size: Decodable {
    var size: Int
  }

  private struct Empty: Decodable {}
}
