import Foundation

/// The compact form of a signed JSON Web Token (RFC 7519): `base64url(header).base64url(claims).base64url
/// (signature)`, where the signature covers the first two parts. APNs provider tokens are ES256, Google's
/// service-account assertions RS256; each caller brings its signer.
enum JSONWebToken {
  /// The signed token for a header and claims already in JSON.
  static func sign(header: String, claims: String, signer: (Data) throws -> Data) rethrows -> String {
    let signingInput = base64URL(Data(header.utf8)) + "." + base64URL(Data(claims.utf8))
    return signingInput + "." + base64URL(try signer(Data(signingInput.utf8)))
  }

  /// Base64url without padding (RFC 7515).
  static func base64URL(_ data: Data) -> String {
    data.base64EncodedString()
      .replacingOccurrences(of: "+", with: "-")
      .replacingOccurrences(of: "/", with: "_")
      .replacingOccurrences(of: "=", with: "")
  }

  /// A JSON string literal for `text` (quotes and escapes), for claims written by hand.
  static func quoted(_ text: String) -> String {
    let data = try? JSONEncoder().encode(text)
    return data.map { String(decoding: $0, as: UTF8.self) } ?? "\"\""
  }
}
