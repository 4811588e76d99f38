import Foundation
import JWTKit

/// The claims of a token, read after its signature verified: the registered ones the policy checks, and
/// every claim whose value is a string (where the user's and the tenant's names are read from).
///
/// Its `verify(using:)` checks nothing: ``TokenPolicy/check(_:now:)`` checks the claims on the server's
/// own clock, as a pure function a test can feed any time.
public struct TokenClaims: JWTPayload, Equatable {
  /// `iss`.
  public var issuer: String?
  /// `aud`: one string or a list on the wire, a list here (empty when absent).
  public var audiences: [String]
  /// `exp`, in seconds since 1970.
  public var expiresAt: Double?
  /// `nbf`, in seconds since 1970.
  public var notBefore: Double?
  /// Every claim whose value is a JSON string, by name (`sub` among them).
  public var strings: [String: String]

  /// Claims from their parts (what a test signs).
  public init(
    issuer: String? = nil,
    audiences: [String] = [],
    expiresAt: Double? = nil,
    notBefore: Double? = nil,
    strings: [String: String] = [:]
  ) {
    self.issuer = issuer
    self.audiences = audiences
    self.expiresAt = expiresAt
    self.notBefore = notBefore
    self.strings = strings
  }

  private struct Key: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
  }

  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: Key.self)
    var strings: [String: String] = [:]
    for key in container.allKeys {
      if let value = try? container.decode(String.self, forKey: key) { strings[key.stringValue] = value }
    }
    self.strings = strings
    self.issuer = strings["iss"]
    let audience = Key(stringValue: "aud")
    if let one = try? container.decode(String.self, forKey: audience) {
      self.audiences = [one]
    } else {
      self.audiences = (try? container.decode([String].self, forKey: audience)) ?? []
    }
    // A time claim that is not a number is as good as absent (the policy refuses a token without `exp`).
    self.expiresAt = try? container.decodeIfPresent(Double.self, forKey: Key(stringValue: "exp"))
    self.notBefore = try? container.decodeIfPresent(Double.self, forKey: Key(stringValue: "nbf"))
  }

  public func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: Key.self)
    for (name, value) in strings where name != "iss" && name != "aud" {
      try container.encode(value, forKey: Key(stringValue: name))
    }
    try container.encodeIfPresent(issuer, forKey: Key(stringValue: "iss"))
    if audiences.count == 1 {
      try container.encode(audiences[0], forKey: Key(stringValue: "aud"))
    } else if !audiences.isEmpty {
      try container.encode(audiences, forKey: Key(stringValue: "aud"))
    }
    try container.encodeIfPresent(expiresAt, forKey: Key(stringValue: "exp"))
    try container.encodeIfPresent(notBefore, forKey: Key(stringValue: "nbf"))
  }

  /// Checks nothing: the claims are checked by ``TokenPolicy/check(_:now:)`` on the server's clock.
  public func verify(using algorithm: some JWTAlgorithm) async throws {}
}
