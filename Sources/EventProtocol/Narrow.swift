/// A named list of items a client can fetch in pages and keep live: a conversation, a channel, a search.
///
/// On the wire it is Zulip's narrow, an array of operator/operand terms
/// (`[{"operator": "dm", "operand": "bob"}]`), so a server application reads it the way Zulip does. The
/// empty narrow means every item the user can see.
///
/// ```swift
/// let withBob = Narrow([NarrowTerm("dm", "bob")])
/// ```
public struct Narrow: Hashable, Codable, Sendable, CustomStringConvertible {
  /// The terms, all of which an item must match.
  public var terms: [NarrowTerm]

  /// Creates a Narrow from its terms.
  public init(_ terms: [NarrowTerm]) {
    self.terms = terms
  }

  /// The operand of the first term with `operator`, if any.
  public func operand(_ name: String) -> String? {
    terms.first { $0.operator == name }?.operand
  }

  public init(from decoder: any Decoder) throws {
    self.terms = try [NarrowTerm](from: decoder)
  }

  public func encode(to encoder: any Encoder) throws {
    try terms.encode(to: encoder)
  }

  public var description: String {
    terms.isEmpty ? "all" : terms.map { "\($0.operator):\($0.operand)" }.joined(separator: " ")
  }
}

/// One condition of a ``Narrow``: an operator and its operand, as Zulip spells them.
public struct NarrowTerm: Hashable, Codable, Sendable {
  /// What the term tests (`"dm"`, `"channel"`, `"topic"`, or an application's own).
  public var `operator`: String
  /// What it tests against.
  public var operand: String

  /// Creates a NarrowTerm from its parts.
  public init(_ operator: String, _ operand: String) {
    self.operator = `operator`
    self.operand = operand
  }
}
