import JSONCoding

/// One case of a ``TaggedEventPayload``, for the short form: its wire type and how to make it from its
/// fields. With ``TaggedEventPayload/cases`` listing one per case, the protocol writes `knownEventTypes`,
/// `eventType`, `fields` and the decoding.
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
/// The short form tells cases apart by their fields' type: each case needs a fields type of its own. When
/// two cases share one, write `eventType`, `fields` and `init(type:from:)` yourself.
public struct EventCase<Payload: Sendable>: Sendable {
  /// The case's wire `type`.
  public let type: String
  /// The fields of a payload of this case (its associated value when of this case's fields type).
  let fields: @Sendable (Payload) -> (any Encodable & Sendable)?
  /// Decodes the fields and makes the case.
  let decode: @Sendable (any Decoder) throws -> Payload

  /// A case whose wire type is `type`, made by `make` (the case itself: `Self.added`) from its fields.
  public init<Fields: Codable & Sendable>(_ type: String, _ make: @escaping @Sendable (Fields) -> Payload) {
    self.type = type
    self.fields = { payload in Mirror(reflecting: payload).children.first?.value as? Fields }
    self.decode = { decoder in
      // The package's own coder reads fields that are `JSONFieldsCodable` without `Codable`'s containers.
      if let tapeDecoder = decoder as? JSONTapeDecoder { return make(try tapeDecoder.decode(Fields.self)) }
      return make(try Fields(from: decoder))
    }
  }
}
