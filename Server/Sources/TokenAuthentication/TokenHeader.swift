import Foundation

/// The two fields of a token's header the server reads before it verifies anything: which key signed it
/// (`kid`) and with which algorithm (`alg`).
///
/// Read only to choose the key and to refuse an algorithm the policy does not accept (`none` above all);
/// nothing in it is trusted until the signature has verified.
public struct TokenHeader: Equatable, Sendable {
  /// `alg`.
  public var algorithm: String
  /// `kid`, when the token names its key.
  public var keyID: String?

  /// A header from its fields.
  public init(algorithm: String, keyID: String?) {
    self.algorithm = algorithm
    self.keyID = keyID
  }

  /// The header of `token` (`header.payload.signature`, each part base64url), or `nil` when it is not three
  /// parts whose first is a JSON object with a string `alg`.
  public init?(token: Substring) {
    let parts = token.split(separator: ".", omittingEmptySubsequences: false)
    guard parts.count == 3, !parts[1].isEmpty, !parts[2].isEmpty,
      let json = Self.base64URLDecoded(parts[0]),
      let object = try? JSONSerialization.jsonObject(with: json) as? [String: Any],
      let algorithm = object["alg"] as? String
    else { return nil }
    if let keyID = object["kid"], !(keyID is String) { return nil }
    self.init(algorithm: algorithm, keyID: object["kid"] as? String)
  }

  /// base64url without padding (RFC 7515 §2) decoded, or `nil`.
  static func base64URLDecoded(_ text: Substring) -> Data? {
    guard text.utf8.count <= 8192 else { return nil }
    var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    base64 += String(repeating: "=", count: (4 - base64.utf8.count % 4) % 4)
    return Data(base64Encoded: base64)
  }
}
