import Foundation

/// The package's own JSON coder: one pass over the bytes each way, for every `Codable` type, on the
/// toolchain alone.
///
/// Encoding writes into one byte buffer as the values' `encode(to:)` run, with no tree in between; with
/// sorted keys (the default) its output is byte for byte `JSONEncoder`'s with `.sortedKeys` (keys compare as
/// UTF-8; a key encoded twice keeps its last value; `/` is escaped; numbers are written as `JSONEncoder`
/// writes them; `Data` as Base64, `URL` as its string, `Decimal` as a number). Decoding parses the document
/// once into a flat ``JSONTape`` and reads each field from the bytes when its `init(from:)` asks; it accepts
/// what `JSONDecoder` accepts except a trailing comma, and decodes the same values. `WireJSONTests` holds both
/// promises on random values; docs/json-coder.md lists where the two differ.
package enum WireJSON {
  /// Encodes `value` as JSON.
  /// - Parameters:
  ///   - value: Any `Encodable` value.
  ///   - sortedKeys: Whether each object's keys are sorted (what makes equal values encode to equal bytes).
  /// - Returns: The UTF-8 bytes.
  /// - Throws: `EncodingError.invalidValue` for a non-finite floating-point number or a value that encodes
  ///   nothing at all, or what the value's own `encode(to:)` throws.
  package static func encode<Value: Encodable>(_ value: Value, sortedKeys: Bool = true) throws -> [UInt8] {
    let output = JSONOutput(sortsKeys: sortedKeys)
    try output.encodeValue(value, key: nil, fields: true)
    guard !output.bytes.isEmpty, output.bytes != [UInt8(ascii: "{"), UInt8(ascii: "}")] || output.askedForContainer
    else {
      // As `JSONEncoder`: a value whose `encode(to:)` asked for no container at all has no JSON.
      throw EncodingError.invalidValue(
        value,
        .init(codingPath: [], debugDescription: "Top-level \(Value.self) did not encode any values.")
      )
    }
    return output.bytes
  }

  /// Encodes `value` as JSON ``Data``; see ``encode(_:sortedKeys:)``.
  package static func encodeData<Value: Encodable>(_ value: Value, sortedKeys: Bool = true) throws -> Data {
    Data(try encode(value, sortedKeys: sortedKeys))
  }

  /// Decodes a value of `type` from JSON bytes.
  /// - Throws: `DecodingError`, as `JSONDecoder` would (`dataCorrupted` with the offset for JSON that does
  ///   not parse).
  package static func decode<Value: Decodable>(_ type: Value.Type, from bytes: [UInt8]) throws -> Value {
    try WireJSONDocument(bytes).decode(type)
  }

  /// Decodes a value of `type` from JSON bytes, the elements of one array member of the root object decoded
  /// by `streamer` as they are parsed (``JSONArrayStreamer``).
  package static func decode<Value: Decodable>(
    _ type: Value.Type,
    from bytes: [UInt8],
    streaming streamer: any JSONArrayStreamer
  ) throws -> Value {
    try JSONTape(bytes, streaming: streamer).decodeRoot(type)
  }

  /// Decodes a value of `type` from JSON ``Data``; see ``decode(_:from:)-([UInt8])``.
  package static func decode<Value: Decodable>(_ type: Value.Type, from data: Data) throws -> Value {
    try decode(type, from: [UInt8](data))
  }
}

extension JSONTape {
  /// Decodes the document's top-level value.
  func decodeRoot<Value: Decodable>(_ type: Value.Type) throws -> Value {
    let root = JSONTapeDecoder(tape: self, index: 0, depth: 0)
    if Value.self == String.self || Value.self == Int.self || Value.self == Bool.self || Value.self == Double.self
      || Value.self == Data.self || Value.self == URL.self || Value.self == Decimal.self
    {
      return try decodeValue(type, at: 0, key: JSONIndexKey(stringValue: ""), decoder: root)
    }
    return try root.decode(type)
  }
}

/// A JSON document parsed once, from which several types can be decoded (a record read part by part).
package struct WireJSONDocument {
  private let tape: JSONTape

  /// Parses `bytes`.
  /// - Throws: `DecodingError.dataCorrupted` with the offset of the first byte that is not valid JSON.
  package init(_ bytes: [UInt8]) throws {
    tape = try JSONTape(bytes)
  }

  /// Parses `data`.
  package init(_ data: Data) throws {
    try self.init([UInt8](data))
  }

  /// Decodes the document as a value of `type`.
  /// - Parameter userInfo: What the decoder's `userInfo` holds while `type` decodes.
  package func decode<Value: Decodable>(
    _ type: Value.Type,
    userInfo: [CodingUserInfoKey: Any] = [:]
  ) throws -> Value {
    tape.path.removeAll(keepingCapacity: true)
    tape.userInfo = userInfo
    return try tape.decodeRoot(type)
  }
}
