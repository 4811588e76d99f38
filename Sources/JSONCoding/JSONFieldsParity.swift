import Foundation

/// Checks that a ``JSONFieldsCodable`` type's own fields say what its `Codable` conformance says: for a
/// property test of every adopting type.
///
/// For one value it compares three writers and three readers:
/// - the bytes the fields write, with sorted keys, equal `Codable`'s through the package's coder and
///   `JSONEncoder`'s with `.sortedKeys`; unsorted (members in the order written), they equal `Codable`'s;
/// - the value read back through the fields, through `Codable` and through `JSONDecoder` equals `value`;
/// - for every member, the document without it, with `null` in its place, and with a value of another kind
///   (a number for a string, a string for anything else) reads the same through the fields as through
///   `Codable`: the same value, or the same error (its kind and coding path).
///
/// ```swift
/// for value in samples {
///   #expect(JSONFieldsParity.differences(value) == [])
/// }
/// ```
public enum JSONFieldsParity {
  /// Where the fields and `Codable` disagree on `value`, one line each; empty when they agree.
  /// - Parameters:
  ///   - value: The value whose two paths are compared.
  ///   - beside: Members that another value writes into the same object and `value` reads: an event payload
  ///     that reads its envelope's `type` passes `["type": value.eventType]`. They are added to the document
  ///     before it is read (and edited like the value's own).
  public static func differences<Value: JSONFieldsCodable & Equatable>(
    _ value: Value,
    beside: [String: String] = [:]
  ) -> [String] {
    var found: [String] = []
    do {
      let fields = try encode(value, sortedKeys: true, writesFields: true)
      let codable = try encode(value, sortedKeys: true, writesFields: false)
      let encoder = JSONEncoder()
      encoder.outputFormatting = [.sortedKeys]
      let foundation = [UInt8](try encoder.encode(value))
      if fields != codable { found.append("sorted bytes: fields \(text(fields)), Codable \(text(codable))") }
      if fields != foundation { found.append("sorted bytes: fields \(text(fields)), Foundation \(text(foundation))") }
      let unsortedFields = try encode(value, sortedKeys: false, writesFields: true)
      let unsortedCodable = try encode(value, sortedKeys: false, writesFields: false)
      if unsortedFields != unsortedCodable {
        found.append("member order: fields \(text(unsortedFields)), Codable \(text(unsortedCodable))")
      }
      for (name, written) in [("fields", fields), ("Codable", codable)] {
        let bytes = adding(beside, to: written)
        if try decode(Value.self, from: bytes, readsFields: true) != value {
          found.append("read through the fields from the \(name) bytes: not the value")
        }
        if try decode(Value.self, from: bytes, readsFields: false) != value {
          found.append("read through Codable from the \(name) bytes: not the value")
        }
      }
      if try JSONDecoder().decode(Value.self, from: Data(adding(beside, to: fields))) != value {
        found.append("read by JSONDecoder: not the value")
      }
      for (edit, document) in edits(of: adding(beside, to: fields)) {
        let throughFields = outcome { try decode(Value.self, from: document, readsFields: true) }
        let throughCodable = outcome { try decode(Value.self, from: document, readsFields: false) }
        if throughFields != throughCodable {
          found.append("\(edit): fields \(throughFields), Codable \(throughCodable)")
        }
      }
    } catch {
      found.append("\(error)")
    }
    return found
  }

  private static func encode(_ value: some Encodable, sortedKeys: Bool, writesFields: Bool) throws -> [UInt8] {
    let output = JSONOutput(sortsKeys: sortedKeys)
    output.writesFields = writesFields
    try output.encodeValue(value, key: nil, fields: true)
    return output.bytes
  }

  private static func decode<Value: Decodable>(
    _ type: Value.Type,
    from bytes: [UInt8],
    readsFields: Bool
  ) throws
    -> Value
  {
    let tape = try JSONTape(bytes)
    tape.readsFields = readsFields
    return try tape.decodeRoot(type)
  }

  /// `bytes` (an object) with `members` added, keys sorted; `bytes` itself when there are none.
  private static func adding(_ members: [String: String], to bytes: [UInt8]) -> [UInt8] {
    guard !members.isEmpty, var object = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any]
    else { return bytes }
    object.merge(members, uniquingKeysWith: { _, added in added })
    guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else { return bytes }
    return [UInt8](data)
  }

  /// The document with each top-level member removed, set to `null`, and set to a value of another kind.
  private static func edits(of bytes: [UInt8]) -> [(String, [UInt8])] {
    guard let object = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any] else { return [] }
    var edited: [(String, [UInt8])] = []
    for key in object.keys.sorted() {
      var without = object
      without[key] = nil
      var null = object
      null[key] = NSNull()
      var otherKind = object
      otherKind[key] = object[key] is String ? 7 as Any : "seven" as Any
      for (edit, document) in [
        ("without \(key)", without), ("\(key) null", null), ("\(key) of another kind", otherKind),
      ] {
        if let data = try? JSONSerialization.data(withJSONObject: document, options: [.sortedKeys]) {
          edited.append((edit, [UInt8](data)))
        }
      }
    }
    return edited
  }

  /// What reading a value came to, in terms every coder shares: the value's description, or the error's
  /// kind and coding path (and for any other error, its description). Two readers agree when their outcomes
  /// are equal.
  public static func outcome(_ read: () throws -> some Any) -> String {
    do {
      return "value \(try read())"
    } catch let error as DecodingError {
      let (kind, context): (String, DecodingError.Context?) =
        switch error {
        case .keyNotFound(let key, let context): ("key not found \(key.stringValue)", context)
        case .typeMismatch(_, let context): ("type mismatch", context)
        case .valueNotFound(_, let context): ("value not found", context)
        case .dataCorrupted(let context): ("data corrupted", context)
        @unknown default: ("unknown", nil)
        }
      let path = (context?.codingPath ?? []).map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }
      return "\(kind) at \(path.joined(separator: "."))"
    } catch {
      return "\(error)"
    }
  }

  private static func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }
}
