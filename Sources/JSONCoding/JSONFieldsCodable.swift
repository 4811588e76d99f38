/// A `Codable` value, written as a JSON object, that also reads and writes its members itself: an opt-in
/// for types the package's coder reads and writes in bulk, such as event payloads.
///
/// A type keeps its `Codable` conformance (Foundation's coders, and every other coder, still use it). The
/// package's own coder (what `WireFormat`, the client's records and the server's log use) calls these two
/// methods instead, which skips the keyed containers, their boxes and the run-time generic lookups of
/// `Codable`'s path, which cost a fifth of a poll's answer through JSON (Bench W3;
/// docs/decisions/0003-a-json-coder-of-our-own.md).
///
/// The two methods must say what `encode(to:)` and `init(from:)` say: the same members, in the same order,
/// with the same values, and the same errors. Test that with ``JSONFieldsParity``, which compares both paths
/// and Foundation's on values you give it:
///
/// ```swift
/// struct Viewed: Codable, Equatable, JSONFieldsCodable {
///   var videoID: String
///   var seconds: Int?
///
///   private enum CodingKeys: String, CodingKey {
///     case videoID = "video_id"
///     case seconds
///   }
///
///   func encodeFields(to fields: inout JSONFieldsWriter) throws {
///     try fields.encode(videoID, forKey: "video_id")
///     try fields.encodeIfPresent(seconds, forKey: "seconds")
///   }
///
///   init(fields: JSONFieldsReader) throws {
///     videoID = try fields.decode(String.self, forKey: "video_id")
///     seconds = try fields.decodeIfPresent(Int.self, forKey: "seconds")
///   }
/// }
/// ```
public protocol JSONFieldsCodable: Codable {
  /// Writes this value's members, in the order `encode(to:)` writes them.
  func encodeFields(to fields: inout JSONFieldsWriter) throws

  /// Reads the value from its members, as `init(from:)` does.
  init(fields: JSONFieldsReader) throws
}

/// The members of one JSON object being written by a ``JSONFieldsCodable`` value.
///
/// Each method writes what the same call on a `KeyedEncodingContainer` would: `encode` always, and
/// `encodeIfPresent` nothing for `nil`.
public struct JSONFieldsWriter {
  private var container: JSONObjectEncoder<JSONIndexKey>

  init(output: JSONOutput, depth: Int) {
    container = JSONObjectEncoder(output: output, depth: depth, serial: output.beginObject(at: depth))
  }

  /// Writes `value` as the member `key`.
  public mutating func encode(_ value: String, forKey key: String) throws {
    try container.encode(value, forKey: JSONIndexKey(stringValue: key))
  }

  /// Writes `value` as the member `key`.
  public mutating func encode(_ value: Int, forKey key: String) throws {
    try container.encode(value, forKey: JSONIndexKey(stringValue: key))
  }

  /// Writes `value` as the member `key`.
  public mutating func encode(_ value: Bool, forKey key: String) throws {
    try container.encode(value, forKey: JSONIndexKey(stringValue: key))
  }

  /// Writes `value` as the member `key`.
  public mutating func encode(_ value: Double, forKey key: String) throws {
    try container.encode(value, forKey: JSONIndexKey(stringValue: key))
  }

  /// Writes any `Encodable` value under `key` (through its own `encode(to:)`, or its fields when it is
  /// ``JSONFieldsCodable`` too).
  public mutating func encode<Value: Encodable>(_ value: Value, forKey key: String) throws {
    try container.output.beginMember(key, at: container.depth, serial: container.serial)
    try container.output.encodeValue(value, key: JSONIndexKey(stringValue: key), fields: true)
  }

  /// Writes `value` as the member `key`, or nothing when it is `nil`.
  public mutating func encodeIfPresent(_ value: String?, forKey key: String) throws {
    if let value { try encode(value, forKey: key) }
  }

  /// Writes `value` as the member `key`, or nothing when it is `nil`.
  public mutating func encodeIfPresent(_ value: Int?, forKey key: String) throws {
    if let value { try encode(value, forKey: key) }
  }

  /// Writes `value` as the member `key`, or nothing when it is `nil`.
  public mutating func encodeIfPresent(_ value: Bool?, forKey key: String) throws {
    if let value { try encode(value, forKey: key) }
  }

  /// Writes `value` as the member `key`, or nothing when it is `nil`.
  public mutating func encodeIfPresent<Value: Encodable>(_ value: Value?, forKey key: String) throws {
    if let value { try encode(value, forKey: key) }
  }
}

/// The members of one JSON object being read by a ``JSONFieldsCodable`` value.
///
/// Each method reads, and throws, what the same call on a `KeyedDecodingContainer` would: `decode` a
/// `keyNotFound` for a missing member and a `valueNotFound`/`typeMismatch` for `null` or the wrong kind;
/// `decodeIfPresent` `nil` for a missing member or `null`. A member repeated in the object reads its first
/// value.
public struct JSONFieldsReader {
  private let container: JSONObjectDecoder<JSONIndexKey>

  /// - Throws: The type mismatch `container(keyedBy:)` throws when the value is not an object.
  init(decoder: JSONTapeDecoder) throws {
    guard decoder.tape[decoder.index].kind == .object else {
      throw decoder.tape.mismatch([String: Int].self, at: decoder.index, path: decoder.codingPath)
    }
    container = JSONObjectDecoder(decoder: decoder)
  }

  /// The coding path of the object, for errors a type throws itself.
  public var codingPath: [any CodingKey] { container.codingPath }

  /// Whether the object has a member called `key` (`null` included).
  public func contains(_ key: String) -> Bool { container.contains(JSONIndexKey(stringValue: key)) }

  /// Reads the member `key` as a `String`.
  public func decode(_ type: String.Type, forKey key: String) throws -> String {
    try container.decode(type, forKey: JSONIndexKey(stringValue: key))
  }

  /// Reads the member `key` as a `Int`.
  public func decode(_ type: Int.Type, forKey key: String) throws -> Int {
    try container.decode(type, forKey: JSONIndexKey(stringValue: key))
  }

  /// Reads the member `key` as a `Bool`.
  public func decode(_ type: Bool.Type, forKey key: String) throws -> Bool {
    try container.decode(type, forKey: JSONIndexKey(stringValue: key))
  }

  /// Reads the member `key` as a `Double`.
  public func decode(_ type: Double.Type, forKey key: String) throws -> Double {
    try container.decode(type, forKey: JSONIndexKey(stringValue: key))
  }

  /// Reads any `Decodable` value under `key` (through its own `init(from:)`, or its fields when it is
  /// ``JSONFieldsCodable`` too).
  public func decode<Value: Decodable>(_ type: Value.Type, forKey key: String) throws -> Value {
    let codingKey = JSONIndexKey(stringValue: key)
    return try container.decoder.tape.decodeValue(
      type,
      at: try container.value(codingKey),
      key: codingKey,
      decoder: container.decoder,
      fields: true
    )
  }

  /// Reads the member `key` as a `String`, or `nil` when it is absent or `null`.
  public func decodeIfPresent(_ type: String.Type, forKey key: String) throws -> String? {
    try container.decodeIfPresent(type, forKey: JSONIndexKey(stringValue: key))
  }

  /// Reads the member `key` as a `Int`, or `nil` when it is absent or `null`.
  public func decodeIfPresent(_ type: Int.Type, forKey key: String) throws -> Int? {
    try container.decodeIfPresent(type, forKey: JSONIndexKey(stringValue: key))
  }

  /// Reads the member `key` as a `Bool`, or `nil` when it is absent or `null`.
  public func decodeIfPresent(_ type: Bool.Type, forKey key: String) throws -> Bool? {
    try container.decodeIfPresent(type, forKey: JSONIndexKey(stringValue: key))
  }

  /// Reads the member `key` as a `Value`, or `nil` when it is absent or `null`.
  public func decodeIfPresent<Value: Decodable>(_ type: Value.Type, forKey key: String) throws -> Value? {
    let codingKey = JSONIndexKey(stringValue: key)
    guard let index = container.find(codingKey), container.decoder.tape[index].kind != .null else { return nil }
    return try container.decoder.tape.decodeValue(
      type,
      at: index,
      key: codingKey,
      decoder: container.decoder,
      fields: true
    )
  }
}

extension JSONValueEncoder {
  /// Writes `value` as this value: through its fields when it is ``JSONFieldsCodable``, else through its
  /// `encode(to:)`.
  package func encode<Value: Encodable>(_ value: Value) throws {
    if output.writesFields, let fields = value as? any JSONFieldsCodable {
      var writer = JSONFieldsWriter(output: output, depth: depth)
      try fields.encodeFields(to: &writer)
    } else {
      try value.encode(to: self)
    }
  }
}

extension JSONValueEncoder {
  /// How values of `type` are written by this encoder's output, asked once for many values (a batch's
  /// payloads): through their fields when `type` is ``JSONFieldsCodable``, else through their
  /// `encode(to:)`. The writer returned makes neither the conformance look-up nor the existential box that
  /// ``encode(_:)`` makes per value.
  package func writer<Value: Encodable>(of type: Value.Type) -> (JSONValueEncoder, Value) throws -> Void {
    guard output.writesFields, let fields = type as? any JSONFieldsCodable.Type else {
      return { encoder, value in try value.encode(to: encoder) }
    }
    return Self.fieldsWriter(of: fields)
  }

  private static func fieldsWriter<Fields: JSONFieldsCodable, Value>(
    of fields: Fields.Type
  ) -> (JSONValueEncoder, Value) throws -> Void {
    precondition(Fields.self == Value.self, "a fields writer of another type")
    return { encoder, value in
      var writer = JSONFieldsWriter(output: encoder.output, depth: encoder.depth)
      // `Fields` is `Value` (checked above), so the cast only renames the type.
      try unsafeBitCast(value, to: Fields.self).encodeFields(to: &writer)
    }
  }
}

extension JSONTapeDecoder {
  /// Reads a value of `type` from this decoder's value: through its fields when it is
  /// ``JSONFieldsCodable``, else through its `init(from:)`.
  package func decode<Value: Decodable>(_ type: Value.Type) throws -> Value {
    if tape.readsFields, let fields = type as? any JSONFieldsCodable.Type {
      return try readFields(fields)
    }
    return try Value(from: self)
  }

  /// Reads a `Value` through its fields, `fields` being `Value.self` opened.
  private func readFields<Fields: JSONFieldsCodable, Value>(_ fields: Fields.Type) throws -> Value {
    precondition(Fields.self == Value.self, "fields of another type")
    // `Fields` is `Value` (checked above), so the cast only renames the type: `unsafeBitCast` takes the place
    // of `as!`'s run-time cast.
    return unsafeBitCast(try Fields(fields: JSONFieldsReader(decoder: self)), to: Value.self)
  }
}

extension JSONTape {
  /// How values of `type` are read from this tape, asked once for many values (a poll's payloads): through
  /// their fields when `type` is ``JSONFieldsCodable``, else through its `init(from:)`. Asking whether a type
  /// adopts the opt-in is a run-time conformance lookup, and the fields' value then needs a cast back to
  /// `Value`; the reader returned does neither per value.
  package func reader<Value: Decodable>(of type: Value.Type) -> (JSONTapeDecoder) throws -> Value {
    guard readsFields, let fields = type as? any JSONFieldsCodable.Type else { return { try Value(from: $0) } }
    return fieldsReader(of: fields)
  }

  private func fieldsReader<Fields: JSONFieldsCodable, Value>(
    of fields: Fields.Type
  ) -> (JSONTapeDecoder) throws -> Value {
    precondition(Fields.self == Value.self, "a fields reader of another type")
    // `Fields` is `Value` (checked above: the caller's `fields` is `Value.self` opened), so the cast only
    // renames the type and `unsafeBitCast` takes the place of `as!`'s run-time cast.
    return { decoder in unsafeBitCast(try Fields(fields: JSONFieldsReader(decoder: decoder)), to: Value.self) }
  }
}

extension Decoder {
  /// Decodes a value of `type` from this decoder's value: through its own fields when `type` is
  /// ``JSONFieldsCodable`` and this is the package's coder, else through its `init(from:)`.
  ///
  /// What a payload that decodes its cases itself (`TaggedEventPayload`'s `init(type:from:)`) calls for each
  /// case's fields, so that fields which opted in are read without containers:
  /// `self = .status(try decoder.decodeFields(VideoStatusChanged.self))`.
  public func decodeFields<Value: Decodable>(_ type: Value.Type) throws -> Value {
    if let tapeDecoder = self as? JSONTapeDecoder { return try tapeDecoder.decode(type) }
    return try Value(from: self)
  }
}
