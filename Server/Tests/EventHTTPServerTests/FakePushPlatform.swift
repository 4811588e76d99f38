import Crypto
import Foundation
import Hummingbird
import HummingbirdHTTP2
import Logging
import NIOCore
import NIOSSL
import Synchronization
import _CryptoExtras

/// A local stand-in for APNs and FCM: HTTP/2 over TLS on 127.0.0.1 and a port the system picks, checking
/// each request as the real platform would (the JWT's signature and claims, the headers, the body and its
/// size) and answering with the platform's own status codes and error bodies, scripted per device token.
///
/// Routes: APNs `POST /3/device/<token>`; Google's token endpoint `POST /token`; FCM
/// `POST /v1/projects/<project>/messages:send`. What a check finds wrong is answered `400` with
/// `{"reason":"FakeCheckFailed"}` and kept in ``problems``.
final class FakePushPlatform: Sendable {
  /// One request as it arrived.
  struct Received: Sendable {
    var path: String
    var headers: [String: String]
    var body: Data
    /// Whether it came on an HTTP/2 stream.
    var isHTTP2: Bool
  }

  /// One scripted answer.
  struct Answer: Sendable {
    var status: Int
    var headers: [String: String] = [:]
    var body: String
  }

  struct Expectations: Sendable {
    /// The APNs signing key's public half, raw (Crypto's key type is not `Sendable`).
    var apnsKeyBytes: Data
    var apnsTeamID: String
    var apnsKeyID: String
    var apnsTopic: String
    var fcmKey: _RSA.Signing.PublicKey
    var fcmClientEmail: String
    var fcmProject: String
  }

  private struct State {
    var received: [Received] = []
    var problems: [String] = []
    var answers: [String: [Answer]] = [:]
    var accessTokens: [String] = []
    var revokedAccessTokens: Set<String> = []
  }

  private let state = Mutex(State())
  let expectations: Expectations
  private let task: Mutex<Task<Void, any Error>?> = Mutex(nil)
  /// The port it listens on, once started.
  let port: Mutex<Int> = Mutex(0)

  init(expectations: Expectations) {
    self.expectations = expectations
  }

  var baseURL: String { "https://127.0.0.1:\(port.withLock { $0 })" }
  var received: [Received] { state.withLock { $0.received } }
  var problems: [String] { state.withLock { $0.problems } }
  /// The access tokens the token endpoint issued, oldest first.
  var accessTokens: [String] { state.withLock { $0.accessTokens } }

  /// Answers the next requests for `deviceToken` with `answers`, in order; then `200`.
  func script(_ deviceToken: String, _ answers: [Answer]) {
    state.withLock { $0.answers[deviceToken, default: []] += answers }
  }

  /// Makes FCM refuse `accessToken` from now on (as when it expired early).
  func revoke(accessToken: String) {
    state.withLock { _ = $0.revokedAccessTokens.insert(accessToken) }
  }

  /// Starts listening; returns once the port is bound.
  func start() async throws {
    let certificate = try NIOSSLCertificate(bytes: Array(LoopbackCertificate.certificatePEM.utf8), format: .pem)
    let key = try NIOSSLPrivateKey(bytes: Array(LoopbackCertificate.privateKeyPEM.utf8), format: .pem)
    let tls = TLSConfiguration.makeServerConfiguration(
      certificateChain: [.certificate(certificate)],
      privateKey: .privateKey(key)
    )
    let router = Router(context: FakePlatformContext.self)
    router.post("3/device/:token") { request, context in try await self.apns(request, context: context) }
    router.post("token") { request, context in try await self.issueToken(request, context: context) }
    router.post("v1/projects/:project/messages:send") { request, context in
      try await self.fcm(request, context: context)
    }
    var logger = Logger(label: "fake-push-platform")
    logger.logLevel = .critical  // stopping it by cancellation logs an error per connection
    let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
    let app = Application(
      router: router,
      server: try .http2Upgrade(tlsConfiguration: tls),
      configuration: .init(address: .hostname("127.0.0.1", port: 0)),
      onServerRunning: { channel in continuation.yield(channel.localAddress?.port ?? 0) },
      logger: logger
    )
    task.withLock { $0 = Task { try await app.run() } }
    var iterator = ports.makeAsyncIterator()
    port.withLock { $0 = 0 }
    if let bound = await iterator.next() { port.withLock { $0 = bound } }
    continuation.finish()
  }

  /// Stops listening.
  func stop() async {
    let running = task.withLock { $0 }
    running?.cancel()
    _ = try? await running?.value
  }

  // MARK: - Routes

  private func apns(_ request: Request, context: FakePlatformContext) async throws -> Response {
    let (headers, body) = try await record(request, context: context)
    let token = context.parameters.get("token") ?? ""
    var problems: [String] = []
    if let jwt = headers["authorization"].flatMap({ $0.hasPrefix("bearer ") ? String($0.dropFirst(7)) : nil }) {
      problems += checkAPNsJWT(jwt)
    } else {
      problems.append("APNs: no bearer authorization")
    }
    if headers["apns-topic"] != expectations.apnsTopic {
      problems.append("APNs: apns-topic \(headers["apns-topic"] ?? "none")")
    }
    if headers["apns-push-type"] != "background" { problems.append("APNs: apns-push-type is not background") }
    if headers["apns-priority"] != "5" { problems.append("APNs: a background push must have apns-priority 5") }
    if headers["apns-expiration"].flatMap(Int.init) == nil { problems.append("APNs: no apns-expiration") }
    if body.count > 4096 { problems.append("APNs: a body of \(body.count) bytes") }
    let object = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any]
    let aps = object?["aps"] as? [String: Any]
    if aps?["content-available"] as? Int != 1 { problems.append("APNs: no aps.content-available 1") }
    if object?["sync"] as? [String: Any] == nil { problems.append("APNs: no sync payload") }
    if !context.isHTTP2 { problems.append("APNs: not HTTP/2") }
    if !problems.isEmpty { return fail(problems) }
    return answer(for: token, otherwise: Answer(status: 200, headers: ["apns-id": UUID().uuidString], body: ""))
  }

  private func issueToken(_ request: Request, context: FakePlatformContext) async throws -> Response {
    let (headers, body) = try await record(request, context: context)
    var problems: [String] = []
    if headers["content-type"] != "application/x-www-form-urlencoded" { problems.append("token: not a form") }
    let form = Dictionary(
      String(decoding: body, as: UTF8.self).split(separator: "&").map { pair -> (String, String) in
        let parts = pair.split(separator: "=", maxSplits: 1).map { String($0).removingPercentEncoding ?? "" }
        return (parts.first ?? "", parts.count > 1 ? parts[1] : "")
      },
      uniquingKeysWith: { first, _ in first }
    )
    if form["grant_type"] != "urn:ietf:params:oauth:grant-type:jwt-bearer" { problems.append("token: grant_type") }
    problems += checkGoogleAssertion(form["assertion"] ?? "")
    if !problems.isEmpty {
      state.withLock { $0.problems += problems }
      return Self.response(400, body: #"{"error":"invalid_grant","error_description":"Invalid JWT Signature."}"#)
    }
    let token = state.withLock { state -> String in
      let token = "ya29.fake-\(state.accessTokens.count + 1)"
      state.accessTokens.append(token)
      return token
    }
    return Self.response(200, body: #"{"access_token":"\#(token)","expires_in":3599,"token_type":"Bearer"}"#)
  }

  private func fcm(_ request: Request, context: FakePlatformContext) async throws -> Response {
    let (headers, body) = try await record(request, context: context)
    let access = headers["authorization"].flatMap { $0.hasPrefix("Bearer ") ? String($0.dropFirst(7)) : nil } ?? ""
    let (issued, revoked) = state.withLock {
      ($0.accessTokens.contains(access), $0.revokedAccessTokens.contains(access))
    }
    if !issued || revoked {
      return Self.response(
        401,
        body:
          #"{"error":{"code":401,"message":"Request had invalid authentication credentials.","status":"UNAUTHENTICATED"}}"#
      )
    }
    var problems: [String] = []
    if context.parameters.get("project") != expectations.fcmProject { problems.append("FCM: wrong project") }
    let message = ((try? JSONSerialization.jsonObject(with: body)) as? [String: Any])?["message"] as? [String: Any]
    let data = message?["data"] as? [String: String]
    let token = message?["token"] as? String ?? ""
    if token.isEmpty { problems.append("FCM: no message.token") }
    if let sync = data?["sync"] {
      if (try? JSONSerialization.jsonObject(with: Data(sync.utf8))) == nil { problems.append("FCM: sync is not JSON") }
      if data!.reduce(0, { $0 + $1.key.utf8.count + $1.value.utf8.count }) > 4096 {
        problems.append("FCM: data over 4096 bytes")
      }
    } else {
      problems.append("FCM: no data.sync string")
    }
    if !["HIGH", "NORMAL"].contains((message?["android"] as? [String: Any])?["priority"] as? String ?? "") {
      problems.append("FCM: android.priority")
    }
    if !context.isHTTP2 { problems.append("FCM: not HTTP/2") }
    if !problems.isEmpty { return fail(problems) }
    return answer(
      for: token,
      otherwise: Answer(status: 200, body: #"{"name":"projects/\#(expectations.fcmProject)/messages/1"}"#)
    )
  }

  // MARK: - Checks

  private func checkAPNsJWT(_ jwt: String) -> [String] {
    guard let (header, claims, input, signature) = Self.split(jwt) else {
      return ["APNs: the JWT is not three base64url parts"]
    }
    var problems: [String] = []
    if header["alg"] as? String != "ES256" || header["kid"] as? String != expectations.apnsKeyID {
      problems.append("APNs: JWT header \(header)")
    }
    if claims["iss"] as? String != expectations.apnsTeamID || claims["iat"] as? Int == nil {
      problems.append("APNs: JWT claims \(claims)")
    }
    let key = try? P256.Signing.PublicKey(rawRepresentation: expectations.apnsKeyBytes)
    let valid = (try? P256.Signing.ECDSASignature(rawRepresentation: signature)).flatMap {
      key?.isValidSignature($0, for: Data(input.utf8))
    }
    if valid != true { problems.append("APNs: the JWT's ES256 signature does not verify") }
    return problems
  }

  private func checkGoogleAssertion(_ jwt: String) -> [String] {
    guard let (header, claims, input, signature) = Self.split(jwt) else { return ["token: the assertion is not a JWT"] }
    var problems: [String] = []
    if header["alg"] as? String != "RS256" { problems.append("token: assertion header \(header)") }
    if claims["iss"] as? String != expectations.fcmClientEmail
      || claims["scope"] as? String != "https://www.googleapis.com/auth/firebase.messaging"
      || claims["aud"] as? String != "\(baseURL)/token"
    {
      problems.append("token: assertion claims \(claims)")
    }
    if let iat = claims["iat"] as? Int, let exp = claims["exp"] as? Int, exp > iat, exp - iat <= 3600 {
    } else {
      problems.append("token: iat and exp")
    }
    let valid = expectations.fcmKey.isValidSignature(
      _RSA.Signing.RSASignature(rawRepresentation: signature),
      for: Data(input.utf8),
      padding: .insecurePKCS1v1_5
    )
    if !valid { problems.append("token: the assertion's RS256 signature does not verify") }
    return problems
  }

  private static func split(
    _ jwt: String
  ) -> (header: [String: Any], claims: [String: Any], input: String, signature: Data)? {
    let parts = jwt.split(separator: ".", omittingEmptySubsequences: false)
    guard parts.count == 3, let header = decodeBase64URL(parts[0]), let claims = decodeBase64URL(parts[1]),
      let signature = decodeBase64URL(parts[2]),
      let headerObject = (try? JSONSerialization.jsonObject(with: header)) as? [String: Any],
      let claimsObject = (try? JSONSerialization.jsonObject(with: claims)) as? [String: Any]
    else { return nil }
    return (headerObject, claimsObject, "\(parts[0]).\(parts[1])", signature)
  }

  static func decodeBase64URL(_ text: Substring) -> Data? {
    var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    while base64.count % 4 != 0 { base64 += "=" }
    return Data(base64Encoded: base64)
  }

  // MARK: - Plumbing

  private func record(_ request: Request, context: FakePlatformContext) async throws -> ([String: String], Data) {
    var headers: [String: String] = [:]
    for field in request.headers { headers[field.name.canonicalName] = field.value }
    var request = request
    let body = Data(try await request.collectBody(upTo: 1 << 20).readableBytesView)
    state.withLock {
      $0.received.append(Received(path: request.uri.path, headers: headers, body: body, isHTTP2: context.isHTTP2))
    }
    return (headers, body)
  }

  private func fail(_ problems: [String]) -> Response {
    state.withLock { $0.problems += problems }
    return Self.response(400, body: #"{"reason":"FakeCheckFailed"}"#)
  }

  private func answer(for token: String, otherwise: Answer) -> Response {
    let scripted = state.withLock { state -> Answer? in
      guard var answers = state.answers[token], !answers.isEmpty else { return nil }
      let first = answers.removeFirst()
      state.answers[token] = answers
      return first
    }
    let answer = scripted ?? otherwise
    return Self.response(answer.status, headers: answer.headers, body: answer.body)
  }

  private static func response(_ status: Int, headers: [String: String] = [:], body: String) -> Response {
    var fields = HTTPFields()
    fields[.contentType] = "application/json"
    for (name, value) in headers { fields[.init(name)!] = value }
    return Response(
      status: .init(code: status),
      headers: fields,
      body: .init(byteBuffer: ByteBuffer(string: body))
    )
  }
}

/// The fake's request context: whether the request came on an HTTP/2 stream (a child of the connection's
/// channel; an HTTP/1 request's channel has no parent).
struct FakePlatformContext: RequestContext {
  var coreContext: CoreRequestContextStorage
  let isHTTP2: Bool

  init(source: ApplicationRequestContextSource) {
    coreContext = .init(source: source)
    isHTTP2 = source.channel.parent != nil
  }
}
