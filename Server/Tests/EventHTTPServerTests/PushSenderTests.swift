import Crypto
import EventProtocol
import EventServer
import Foundation
import PushSenders
import Testing

/// The push senders' pure parts: APNs provider tokens, requests, and what each platform's answer means.
@Suite("Push senders: APNs tokens and requests, APNs and FCM answers")
struct PushSenderTests {
  let key = P256.Signing.PrivateKey()
  let t0 = Timestamp(secondsSinceEpoch: 1_700_000_000)

  func decodeBase64URL(_ text: Substring) -> Data? {
    var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    while base64.count % 4 != 0 { base64 += "=" }
    return Data(base64Encoded: base64)
  }

  @Test("the provider token is an ES256 JWT that the key's public half verifies; header and claims as Apple asks")
  func providerToken() throws {
    let credentials = APNsCredentials(teamID: "TEAM123456", keyID: "KEY1234567", privateKey: key)
    let token = try APNsTokenCache.makeToken(credentials: credentials, issuedAt: t0)
    let parts = token.split(separator: ".")
    #expect(parts.count == 3)
    let header = try #require(decodeBase64URL(parts[0]))
    let claims = try #require(decodeBase64URL(parts[1]))
    #expect(String(decoding: header, as: UTF8.self) == #"{"alg":"ES256","kid":"KEY1234567"}"#)
    #expect(String(decoding: claims, as: UTF8.self) == #"{"iss":"TEAM123456","iat":1700000000}"#)
    let signature = try P256.Signing.ECDSASignature(rawRepresentation: try #require(decodeBase64URL(parts[2])))
    #expect(key.publicKey.isValidSignature(signature, for: Data("\(parts[0]).\(parts[1])".utf8)))
    #expect(!P256.Signing.PrivateKey().publicKey.isValidSignature(signature, for: Data("\(parts[0]).\(parts[1])".utf8)))
    // A .p8 file's PEM loads the same key.
    let fromPEM = try APNsCredentials(teamID: "TEAM123456", keyID: "KEY1234567", p8: key.pemRepresentation)
    #expect(try fromPEM.signingKey().rawRepresentation == key.rawRepresentation)
  }

  @Test("a token is reused for 50 minutes, then made again; invalidate forces a new one")
  func tokenReuse() throws {
    let credentials = APNsCredentials(teamID: "T", keyID: "K", privateKey: key)
    var cache = APNsTokenCache()
    let first = try cache.token(at: t0, credentials: credentials)
    #expect(try cache.token(at: t0.advanced(by: .seconds(49 * 60)), credentials: credentials) == first)
    let renewed = try cache.token(at: t0.advanced(by: .seconds(50 * 60)), credentials: credentials)
    #expect(renewed != first)
    cache.invalidate()
    #expect(try cache.token(at: t0.advanced(by: .seconds(50 * 60)), credentials: credentials) != renewed)
  }

  @Test("the request: device path, background push headers, the payload under sync; events dropped past 4 KiB")
  func request() throws {
    let push = PushNotification(
      token: "abc123",
      installation: MutationSource(user: "alice", clientID: "phone"),
      payload: Array(#"{"queue_id":"q1","last_event_id":7}"#.utf8)
    )
    let request = APNsRequest(
      push: push,
      token: "jwt",
      topic: "com.example.videos",
      expiresAfter: .seconds(3600),
      now: t0
    )
    #expect(request.path == "/3/device/abc123")
    #expect(request.headers["authorization"] == "bearer jwt")
    #expect(request.headers["apns-push-type"] == "background" && request.headers["apns-priority"] == "5")
    #expect(request.headers["apns-topic"] == "com.example.videos")
    #expect(request.headers["apns-expiration"] == "1700003600")
    #expect(
      String(decoding: request.body, as: UTF8.self)
        == #"{"aps":{"content-available":1},"sync":{"queue_id":"q1","last_event_id":7}}"#
    )
    let events = String(
      repeating: #"{"id":1,"type":"note","text":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"},"#,
      count: 80
    )
    let big = #"{"queue_id":"q1","last_event_id":80,"events":["# + events.dropLast() + "]}"
    #expect(big.utf8.count > APNsRequest.maximumBodyBytes)
    let slim = APNsRequest(
      push: PushNotification(token: "abc123", installation: push.installation, payload: Array(big.utf8)),
      token: "jwt",
      topic: "t",
      expiresAfter: .seconds(60),
      now: t0
    )
    #expect(slim.body.count <= APNsRequest.maximumBodyBytes)
    let sync = try #require(
      (try JSONSerialization.jsonObject(with: slim.body) as? [String: Any])?["sync"] as? [String: Any]
    )
    #expect(sync["events"] == nil && sync["last_event_id"] as? Int == 80)
  }

  @Test("answers: tokens gone are dropped, throttling and failures retry, credentials renew, the rest refused")
  func answers() {
    func body(_ text: String) -> Data { Data(text.utf8) }
    #expect(PushAnswer.apns(status: 200, headers: [:], body: Data()) == .accepted)
    #expect(PushAnswer.apns(status: 410, headers: [:], body: body(#"{"reason":"Unregistered"}"#)) == .tokenInvalid)
    #expect(PushAnswer.apns(status: 400, headers: [:], body: body(#"{"reason":"BadDeviceToken"}"#)) == .tokenInvalid)
    #expect(
      PushAnswer.apns(status: 403, headers: [:], body: body(#"{"reason":"ExpiredProviderToken"}"#)) == .renewCredentials
    )
    #expect(
      PushAnswer.apns(status: 429, headers: ["retry-after": "30"], body: body(#"{"reason":"TooManyRequests"}"#))
        == .retry(after: .seconds(30))
    )
    #expect(PushAnswer.apns(status: 503, headers: [:], body: Data()) == .retry(after: nil))
    #expect(
      PushAnswer.apns(status: 413, headers: [:], body: body(#"{"reason":"PayloadTooLarge"}"#))
        == .refused("APNs 413 PayloadTooLarge")
    )
    let unregistered = #"{"error":{"code":404,"status":"NOT_FOUND","details":[{"errorCode":"UNREGISTERED"}]}}"#
    #expect(PushAnswer.fcm(status: 404, headers: [:], body: body(unregistered)) == .tokenInvalid)
    #expect(
      PushAnswer.fcm(
        status: 400,
        headers: [:],
        body: body(
          #"{"error":{"status":"INVALID_ARGUMENT","message":"The registration token is not a valid FCM registration token"}}"#
        )
      ) == .tokenInvalid
    )
    #expect(PushAnswer.fcm(status: 401, headers: [:], body: Data()) == .renewCredentials)
    #expect(PushAnswer.fcm(status: 429, headers: ["retry-after": "12"], body: Data()) == .retry(after: .seconds(12)))
    #expect(PushAnswer.fcm(status: 500, headers: [:], body: Data()) == .retry(after: nil))
    #expect(
      PushAnswer.fcm(
        status: 400,
        headers: [:],
        body: body(#"{"error":{"status":"INVALID_ARGUMENT","message":"bad ttl"}}"#)
      )
        == .refused("FCM 400 INVALID_ARGUMENT")
    )
  }

  @Test("retries: backoff doubles to its cap, Retry-After wins, credentials renew, and the last attempt gives up")
  func retryPolicy() {
    let policy = PushRetryPolicy(maximumAttempts: 5, firstBackoff: .seconds(1), maximumBackoff: .seconds(3))
    #expect(policy.step(after: .retry(after: nil), attempt: 1) == .wait(.seconds(1)))
    #expect(policy.step(after: .retry(after: nil), attempt: 2) == .wait(.seconds(2)))
    #expect(policy.step(after: .retry(after: nil), attempt: 3) == .wait(.seconds(3)))
    #expect(policy.step(after: .retry(after: .seconds(2)), attempt: 1) == .wait(.seconds(2)))
    #expect(policy.step(after: .retry(after: .seconds(600)), attempt: 1) == .wait(.seconds(3)))
    #expect(policy.step(after: .retry(after: nil), attempt: 5) == .finish(.failed("still failing after 5 attempts")))
    #expect(policy.step(after: .renewCredentials, attempt: 1) == .renewCredentials)
    #expect(policy.step(after: .renewCredentials, attempt: 5) == .finish(.failed("credentials refused 5 times")))
    #expect(policy.step(after: .accepted, attempt: 5) == .finish(.accepted))
    #expect(policy.step(after: .tokenInvalid, attempt: 1) == .finish(.tokenInvalid))
    #expect(policy.step(after: .refused("x"), attempt: 1) == .finish(.failed("x")))
  }
}
