import Foundation
import JWTKit

/// One loaded key set: jwt-kit's collection that verifies signatures, and what each key id declares (its
/// key type and its algorithm, when the JWK names one), to refuse a token before verifying it.
struct VerifyingKeys: Sendable {
  /// What one JWK of the set declares.
  struct Declared: Sendable, Equatable {
    var keyType: String
    var algorithm: String?
  }

  let collection: JWTKeyCollection
  let declared: [String: Declared]

  /// The keys of a JWKS document: every key with a `kid` jwt-kit can use for verifying; others (a key of an
  /// unknown type, an encryption key) are skipped.
  /// - Throws: ``KeySetError`` when the document is not a JWKS or none of its keys can be used.
  init(jwks data: Data) async throws(KeySetError) {
    let jwks: JWKS
    do {
      jwks = try JSONDecoder().decode(JWKS.self, from: data)
    } catch {
      throw KeySetError("the document is not a JWKS (\(type(of: error)))")
    }
    let collection = JWTKeyCollection()
    var declared: [String: Declared] = [:]
    var usable: [JWK] = []
    for jwk in jwks.keys {
      guard let kid = jwk.keyIdentifier?.string, !kid.isEmpty, declared[kid] == nil else { continue }
      do {
        try await collection.add(jwk: jwk, isDefault: false)
      } catch {
        continue
      }
      declared[kid] = Declared(keyType: jwk.keyType.rawValue, algorithm: jwk.algorithm?.rawValue)
      usable.append(jwk)
    }
    guard !declared.isEmpty else { throw KeySetError("the key set holds no key with a kid that can verify") }
    // A token that names no key is verified with the only key of a set of one (keyID(for:)): jwt-kit takes
    // its default key then, so that key, and only then, is made the default.
    if usable.count == 1 { _ = try? await collection.add(jwk: usable[0], isDefault: true) }
    self.collection = collection
    self.declared = declared
  }

  /// The key id a token with `header` is verified with: the one it names, or the only key of a set of one
  /// when it names none. `nil` when the set has no such key.
  func keyID(for header: TokenHeader) -> String? {
    if let kid = header.keyID { return declared[kid] == nil ? nil : kid }
    return declared.count == 1 ? declared.keys.first : nil
  }

  /// Whether `algorithm` fits the key `kid`: the JWK's own `alg` when it has one, else the key's type.
  func accepts(algorithm: String, for kid: String) -> Bool {
    guard let key = declared[kid] else { return false }
    if let declared = key.algorithm { return declared == algorithm }
    switch key.keyType {
    case "RSA": return algorithm.hasPrefix("RS") || algorithm.hasPrefix("PS")
    case "EC": return algorithm.hasPrefix("ES")
    default: return false
    }
  }
}
