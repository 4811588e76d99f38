import JSONCoding

/// An event type with several cases whose fields sit beside the envelope's `id` and `type` on the wire.
///
/// A synthesized `Codable` enum nests each case (`{"added": {"_0": {…}}}`); Zulip-shaped events are flat
/// (`{"id": 4, "type": "todo_added", "title": "Milk"}`). Give each case a `Codable` struct of its fields,
/// say which wire type each case has, and decode a case from its type: this protocol writes the rest.
///
/// ```swift
/// struct TodoAdded: Codable, Sendable, Equatable { var todoID: String; var title: String }
/// struct TodoDone: Codable, Sendable, Equatable { var todoID: String }
///
/// enum TodoEvent: TaggedEventPayload {
///   case added(TodoAdded)
///   case done(TodoDone)
///
///   static let knownEventTypes: Set<String> = ["todo_added", "todo_done"]
///
///   var eventType: String {
///     switch self {
///     case .added: "todo_added"
///     case .done: "todo_done"
///     }
///   }
///
///   var fields: any Encodable & Sendable {
///     switch self {
///     case .added(let fields): fields
///     case .done(let fields): fields
///     }
///   }
///
///   init(type: String, from decoder: any Decoder) throws {
///     switch type {
///     case "todo_added": self = .added(try TodoAdded(from: decoder))
///     default: self = .done(try TodoDone(from: decoder))
///     }
///   }
/// }
/// ```
///
/// **The short form**: when each case has a fields type of its own, list the cases with ``EventCase`` and
/// the protocol writes the three switches and `knownEventTypes`:
///
/// ```swift
/// enum TodoEvent: TaggedEventPayload {
///   case added(TodoAdded)
///   case done(TodoDone)
///
///   static let cases = [EventCase("todo_added", Self.added), EventCase("todo_done", Self.done)]
/// }
/// ```
///
/// The keys `id`, `type` and `origin` belong to the envelope; a case's fields must not use them.
///
/// A case's fields type may also adopt `JSONFieldsCodable` (from `JSONCoding`) to be read and written without
/// `Codable`'s containers on the package's coder; a hand-written `init(type:from:)` then reads each case with
/// `decoder.decodeFields(TodoAdded.self)` (docs/json-coder.md).
public protocol TaggedEventPayload: EventPayload {
  /// The fields of this case, encoded beside `id` and `type`.
  var fields: any Encodable & Sendable { get }

  /// Decodes the case whose wire type is `type` (one of ``EventPayload/knownEventTypes``).
  init(type: String, from decoder: any Decoder) throws

  /// The cases, for the short form (empty by default: then write the members above yourself).
  static var cases: [EventCase<Self>] { get }
}

extension TaggedEventPayload {
  public static var cases: [EventCase<Self>] { [] }

  public static var knownEventTypes: Set<String> { Set(cases.map(\.type)) }

  /// The case's associated value, found by reflection: what the short form encodes.
  public var fields: any Encodable & Sendable {
    for eventCase in Self.cases {
      if let fields = eventCase.fields(self) { return fields }
    }
    preconditionFailure("\(Self.self): no EventCase matches \(self); list it in `cases` or write `fields`")
  }

  /// The wire type of the case whose fields type matches this value's, in the short form.
  public var eventType: String {
    guard let match = Self.cases.first(where: { $0.fields(self) != nil }) else {
      preconditionFailure("\(Self.self): no EventCase matches \(self); list it in `cases` or write `eventType`")
    }
    return match.type
  }

  public init(type: String, from decoder: any Decoder) throws {
    guard let match = Self.cases.first(where: { $0.type == type }) else {
      throw DecodingError.dataCorrupted(
        .init(codingPath: decoder.codingPath, debugDescription: "\(Self.self) has no event type \(type)")
      )
    }
    self = try match.decode(decoder)
  }

  public init(from decoder: any Decoder) throws {
    let type = try decoder.container(keyedBy: TypeKey.self).decode(String.self, forKey: .type)
    try self.init(type: type, from: decoder)
  }

  public func encode(to encoder: any Encoder) throws {
    // The package's own coder writes fields that are `JSONFieldsCodable` without `Codable`'s containers.
    if let valueEncoder = encoder as? JSONValueEncoder {
      let fields: any Encodable = fields
      return try valueEncoder.encode(fields)
    }
    try fields.encode(to: encoder)
  }
}

/// The envelope's `type` key, read by ``TaggedEventPayload`` to pick a case.
private enum TypeKey: String, CodingKey {
  case type
}
