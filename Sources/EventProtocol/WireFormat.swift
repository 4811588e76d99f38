import Foundation
import JSONCoding

/// Encodes and decodes the JSON bodies of the events API.
///
/// A body is either a success (`"result": "success"`, decoded as the expected reply type) or an error
/// (`"result": "error"`, decoded as an ``EventAPIError`` and thrown). Anything else, including JSON that
/// does not parse, a missing field, a body over ``maximumBodySize``, or an event id sequence that is not
/// strictly increasing, throws ``EventAPIError/Code/malformedResponse``. When a JSON object repeats a key,
/// the first value is the one decoded (Foundation's behaviour on Linux and Apple platforms alike); a server
/// never sends duplicate keys.
///
/// ```swift
/// let reply = try WireFormat.decode(EventsReply<MyEvent>.self, from: body)
/// let data = try WireFormat.encode(reply)
/// ```
public enum WireFormat {
  /// The largest body `decode(_:from:)` accepts: 16 MiB.
  public static let maximumBodySize = 16 << 20

  /// A body read in one pass: its `result` field picks which type decodes the rest.
  private enum Body<Reply: Decodable>: Decodable {
    case success(Reply)
    case failure(EventAPIError)

    private enum CodingKeys: String, CodingKey {
      case result
    }

    init(from decoder: any Decoder) throws {
      let result = try decoder.container(keyedBy: CodingKeys.self).decode(String.self, forKey: .result)
      switch result {
      case "success": self = .success(try Reply(from: decoder))
      case "error": self = .failure(try EventAPIError(from: decoder))
      default: throw EventAPIError.malformedResponse("unknown result \"\(result)\"")
      }
    }
  }

  /// Decodes a response body, parsing it once.
  /// - Parameters:
  ///   - type: The success reply expected, such as `Registration<Snapshot>` or `EventsReply<Payload>`.
  ///   - data: The JSON body.
  /// - Returns: The decoded success reply.
  /// - Throws: The server's ``EventAPIError`` for an error body; ``EventAPIError/Code/malformedResponse`` when
  ///   the body cannot be understood.
  public static func decode<Reply: Decodable>(_ type: Reply.Type, from data: Data) throws(EventAPIError) -> Reply {
    guard data.count <= maximumBodySize else {
      throw .malformedResponse("body of \(data.count) bytes is over the \(maximumBodySize)-byte limit")
    }
    return try decode(type, from: [UInt8](data))
  }

  /// ``decode(_:from:)-(_,Data)`` for a body already in bytes.
  public static func decode<Reply: Decodable>(_ type: Reply.Type, from bytes: [UInt8]) throws(EventAPIError) -> Reply {
    try decode(type, from: bytes, streamingEvents: true)
  }

  /// ``decode(_:from:)-(_,[UInt8])``, an ``EventsReply``'s events decoded as the body is parsed or not (the
  /// tests compare the two).
  static func decode<Reply: Decodable>(
    _ type: Reply.Type,
    from bytes: [UInt8],
    streamingEvents: Bool
  ) throws(EventAPIError) -> Reply {
    guard bytes.count <= maximumBodySize else {
      throw .malformedResponse("body of \(bytes.count) bytes is over the \(maximumBodySize)-byte limit")
    }
    let body: Body<Reply>
    do {
      if streamingEvents, let streams = Reply.self as? any StreamsEvents.Type {
        body = try WireJSON.decode(Body<Reply>.self, from: bytes, streaming: streams.eventsStreamer())
      } else {
        body = try WireJSON.decode(Body<Reply>.self, from: bytes)
      }
    } catch let error as EventAPIError {
      throw error
    } catch {
      throw .malformedResponse(String(describing: error))
    }
    switch body {
    case .success(let reply): return reply
    case .failure(let apiError): throw apiError
    }
  }

  private struct VersionField: Decodable {
    var version: Int
  }

  /// The `version` field of a versioned JSON document (a queue dump, a persisted record), read before the
  /// rest so that a newer format is refused clearly instead of failing on a field it renamed.
  /// - Returns: The version, or `nil` when the data is not JSON with an integer `version`.
  public static func formatVersion(of data: Data) -> Int? {
    try? WireJSON.decode(VersionField.self, from: data).version
  }

  /// Encodes a reply or an ``EventAPIError`` as a JSON body, with sorted keys so bodies compare byte for byte.
  ///
  /// The bytes are those `JSONEncoder` writes with `.sortedKeys`, written in one pass by the package's own
  /// coder (`WireJSONTests` compares the two on random values; docs/decisions/0003-a-json-coder-of-our-own.md has the figures).
  public static func encode(_ value: some Encodable) throws -> Data {
    try WireJSON.encodeData(value)
  }

  /// ``encode(_:)`` as bytes.
  public static func encodeBytes(_ value: some Encodable) throws -> [UInt8] {
    try WireJSON.encode(value)
  }

  /// A success body: the reply's fields beside `"result": "success"` and an empty `msg`, as a server sends
  /// it (`decode(_:from:)` reads it back). The protocol's own replies (``Registration``, ``EventsReply``,
  /// ``FetchAnswer``) already carry both and are encoded as they are: each key once.
  public static func encodeSuccess(_ reply: some Encodable) throws -> Data {
    if reply is any CarriesResult { return try encode(reply) }
    return try encode(Success(reply: reply))
  }

  private struct Success<Reply: Encodable>: Encodable {
    var reply: Reply

    private enum CodingKeys: String, CodingKey {
      case result
      case message = "msg"
    }

    func encode(to encoder: any Encoder) throws {
      try reply.encode(to: encoder)
      var container = encoder.container(keyedBy: CodingKeys.self)
      try container.encode("success", forKey: .result)
      try container.encode("", forKey: .message)
    }
  }
}

/// A reply whose `encode(to:)` writes `"result": "success"` and `"msg"` itself, so that
/// ``WireFormat/encodeSuccess(_:)`` must not add them a second time.
protocol CarriesResult {}

extension EventsReply: CarriesResult {}
extension Registration: CarriesResult {}
extension FetchAnswer: CarriesResult {}
