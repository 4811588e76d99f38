import EventProtocol
import Foundation
import _CryptoExtras

/// A Google service account's credentials for FCM HTTP v1: the project, the account's e-mail and RSA key,
/// and where tokens are issued. FCM takes an OAuth2 access token, which the server gets by sending the
/// token endpoint an RS256-signed assertion (Google: "Using OAuth 2.0 for Server to Server Applications").
public struct FCMCredentials: Sendable {
  /// What cannot be read in a service-account file.
  public struct Invalid: Error, Sendable, CustomStringConvertible {
    /// What is wrong, in one line.
    public var description: String
  }

  /// The OAuth2 scope FCM needs.
  public static let scope = "https://www.googleapis.com/auth/firebase.messaging"

  /// The Firebase project id (in the send URL).
  public var projectID: String
  /// The service account's e-mail (the assertion's `iss`).
  public var clientEmail: String
  /// The key's id (the assertion header's `kid`), when the file has one.
  public var privateKeyID: String?
  /// Where access tokens are issued (`https://oauth2.googleapis.com/token`; a fake in tests).
  public var tokenURI: String
  private let privateKey: _RSA.Signing.PrivateKey

  /// Credentials from their parts; `privateKeyPEM` is the account's RSA key (PKCS #8 or PKCS #1 PEM).
  public init(
    projectID: String,
    clientEmail: String,
    privateKeyPEM: String,
    privateKeyID: String? = nil,
    tokenURI: String = "https://oauth2.googleapis.com/token"
  ) throws(Invalid) {
    do {
      privateKey = try _RSA.Signing.PrivateKey(pemRepresentation: privateKeyPEM)
    } catch {
      throw Invalid(description: "the private key is not an RSA key of 2048 bits or more in PEM")
    }
    self.projectID = projectID
    self.clientEmail = clientEmail
    self.privateKeyID = privateKeyID
    self.tokenURI = tokenURI
  }

  /// Credentials from the JSON file Google's console downloads for a service account (`type`
  /// `service_account`, with `project_id`, `client_email`, `private_key`, `private_key_id`, `token_uri`).
  public init(serviceAccountJSON data: Data) throws(Invalid) {
    struct File: Decodable {
      var type: String?
      var projectID: String
      var clientEmail: String
      var privateKey: String
      var privateKeyID: String?
      var tokenURI: String?
      enum CodingKeys: String, CodingKey {
        case type
        case projectID = "project_id"
        case clientEmail = "client_email"
        case privateKey = "private_key"
        case privateKeyID = "private_key_id"
        case tokenURI = "token_uri"
      }
    }
    let file: File
    do {
      file = try JSONDecoder().decode(File.self, from: data)
    } catch {
      throw Invalid(
        description: "not a service-account file: it needs project_id, client_email and private_key"
      )
    }
    guard file.type == nil || file.type == "service_account" else {
      throw Invalid(description: "the file is of type \(file.type ?? ""), not service_account")
    }
    try self.init(
      projectID: file.projectID,
      clientEmail: file.clientEmail,
      privateKeyPEM: file.privateKey,
      privateKeyID: file.privateKeyID,
      tokenURI: file.tokenURI ?? "https://oauth2.googleapis.com/token"
    )
  }

  /// The signed assertion exchanged for an access token: an RS256 JWT with `iss` the account, `scope`
  /// FCM's, `aud` the token endpoint, valid an hour from `now`.
  public func assertion(at now: Timestamp) throws -> String {
    let issuedAt = now.sinceEpoch.components.seconds
    var header = #"{"alg":"RS256","typ":"JWT""#
    if let privateKeyID { header += #","kid":\#(JSONWebToken.quoted(privateKeyID))"# }
    header += "}"
    let claims =
      #"{"iss":\#(JSONWebToken.quoted(clientEmail)),"scope":\#(JSONWebToken.quoted(Self.scope)),"#
      + #""aud":\#(JSONWebToken.quoted(tokenURI)),"iat":\#(issuedAt),"exp":\#(issuedAt + 3600)}"#
    return try JSONWebToken.sign(header: header, claims: claims) { input in
      try privateKey.signature(for: input, padding: .insecurePKCS1v1_5).rawRepresentation
    }
  }
}

/// The OAuth2 access token FCM requests carry, reused until five minutes before it expires. Pure: time
/// comes in.
public struct FCMAccessTokenCache: Sendable {
  /// How long before its expiry a token is replaced.
  public static let margin = Duration.seconds(300)

  private var current: (token: String, expiresAt: Timestamp)?

  /// An empty cache.
  public init() {}

  /// The cached token when it is still good at `now`.
  public func token(at now: Timestamp) -> String? {
    guard let current, now < current.expiresAt.advanced(by: .zero - Self.margin) else { return nil }
    return current.token
  }

  /// Keeps a token the endpoint issued at `now`, valid `expiresIn`.
  public mutating func store(_ token: String, expiresIn: Duration, at now: Timestamp) {
    current = (token, now.advanced(by: expiresIn))
  }

  /// Forgets the token (FCM answered 401): the next request gets a new one.
  public mutating func invalidate() { current = nil }
}
