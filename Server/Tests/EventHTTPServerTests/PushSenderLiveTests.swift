import AsyncHTTPClient
import Crypto
import EventHTTPServer
import EventProtocol
import EventServer
import Foundation
import Logging
import NIOSSL
import PushSenders
import SampleApps
import Synchronization
import TestScheduling
import Testing
import UpdateMachine
import _CryptoExtras

/// The time the senders see in these tests: a fixed clock, and waits recorded instead of slept.
final class ScriptedPushTime: Sendable {
  let now = Mutex(Timestamp(secondsSinceEpoch: 1_800_000_000))
  let waits = Mutex<[Duration]>([])

  var environment: PushSenderEnvironment {
    PushSenderEnvironment(
      now: { self.now.withLock { $0 } },
      sleep: { duration in self.waits.withLock { $0.append(duration) } }
    )
  }
}

/// A gateway that records what each push came to.
final class DeliveryRecorder: PushGateway {
  private let inner: any PushGateway
  private let recorded = Mutex<[(token: PushToken, delivery: PushDelivery)]>([])

  init(_ inner: any PushGateway) { self.inner = inner }

  var deliveries: [(token: PushToken, delivery: PushDelivery)] { recorded.withLock { $0 } }

  func send(_ push: PushNotification) async -> PushDelivery {
    let delivery = await inner.send(push)
    recorded.withLock { $0.append((push.token, delivery)) }
    return delivery
  }
}

/// The senders and a local fake of both platforms, with fresh keys.
struct PushSenderFixture {
  let apnsKey: P256.Signing.PrivateKey
  let fcmKey: _RSA.Signing.PrivateKey
  let fake: FakePushPlatform
  let client: HTTPClient
  let time = ScriptedPushTime()
  let apns: APNsSender
  let fcm: FCMSender

  static func start() async throws -> PushSenderFixture {
    let fcmKey = try _RSA.Signing.PrivateKey(keySize: .bits2048)
    let apnsKey = P256.Signing.PrivateKey()
    let fake = FakePushPlatform(
      expectations: .init(
        apnsKeyBytes: apnsKey.publicKey.rawRepresentation,
        apnsTeamID: "TEAM123456",
        apnsKeyID: "KEY1234567",
        apnsTopic: "com.example.videos",
        fcmKey: fcmKey.publicKey,
        fcmClientEmail: "push@example-project.iam.gserviceaccount.com",
        fcmProject: "example-project"
      )
    )
    try await fake.start()
    var tls = TLSConfiguration.makeClientConfiguration()
    tls.trustRoots = .certificates([
      try NIOSSLCertificate(bytes: Array(LoopbackCertificate.certificatePEM.utf8), format: .pem)
    ])
    let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(tlsConfiguration: tls))
    return try PushSenderFixture(apnsKey: apnsKey, fcmKey: fcmKey, fake: fake, client: client)
  }

  private init(
    apnsKey: P256.Signing.PrivateKey,
    fcmKey: _RSA.Signing.PrivateKey,
    fake: FakePushPlatform,
    client: HTTPClient
  )
    throws
  {
    self.fcmKey = fcmKey
    self.fake = fake
    self.client = client
    apns = APNsSender(
      configuration: APNsConfiguration(
        credentials: try APNsCredentials(teamID: "TEAM123456", keyID: "KEY1234567", p8: apnsKey.pemRepresentation),
        topic: "com.example.videos",
        server: fake.baseURL
      ),
      httpClient: client,
      environment: time.environment
    )
    let serviceAccount = """
      {"type":"service_account","project_id":"example-project","private_key_id":"k1",
       "private_key":\(String(decoding: try JSONEncoder().encode(fcmKey.pkcs8PEMRepresentation), as: UTF8.self)),
       "client_email":"push@example-project.iam.gserviceaccount.com","token_uri":"\(fake.baseURL)/token"}
      """
    fcm = FCMSender(
      configuration: FCMConfiguration(
        credentials: try FCMCredentials(serviceAccountJSON: Data(serviceAccount.utf8)),
        server: fake.baseURL
      ),
      httpClient: client,
      environment: time.environment
    )
    self.apnsKey = apnsKey
  }

  func stop() async throws {
    try await client.shutdown()
    await fake.stop()
  }

  func push(
    _ token: PushToken,
    platform: PushPlatform? = nil,
    payload: String = #"{"queue_id":"q1","last_event_id":7}"#
  )
    -> PushNotification
  {
    PushNotification(
      token: token,
      platform: platform,
      installation: MutationSource(user: "alice", clientID: "phone"),
      payload: Array(payload.utf8)
    )
  }
}

/// The APNs and FCM senders against a local HTTP/2 fake of each platform that checks every request (JWT
/// signatures and claims, headers, payloads) and answers with the platforms' own error bodies.
@Suite("Push senders over HTTP/2: APNs and FCM against local fakes", .hangGuard)
struct PushSenderLiveTests {
  @Test("APNs: a push goes over HTTP/2 with a verified ES256 provider token, reused for the next push")
  func apnsAccepted() async throws {
    let fixture = try await PushSenderFixture.start()
    #expect(await fixture.apns.send(fixture.push("device-a")) == .accepted)
    #expect(await fixture.apns.send(fixture.push("device-b")) == .accepted)
    let received = fixture.fake.received
    #expect(fixture.fake.problems == [])
    #expect(received.map(\.path) == ["/3/device/device-a", "/3/device/device-b"])
    #expect(received.allSatisfy { $0.isHTTP2 })
    #expect(received[0].headers["authorization"] == received[1].headers["authorization"])
    let body = try JSONSerialization.jsonObject(with: received[0].body) as? [String: Any]
    #expect((body?["sync"] as? [String: Any])?["last_event_id"] as? Int == 7)
    try await fixture.stop()
  }

  @Test("APNs answers: gone tokens are dropped, throttling waits and retries, an expired provider token is made again")
  func apnsAnswers() async throws {
    let fixture = try await PushSenderFixture.start()
    let fake = fixture.fake
    fake.script("gone", [.init(status: 410, body: #"{"reason":"Unregistered","timestamp":1800000000000}"#)])
    fake.script("bad", [.init(status: 400, body: #"{"reason":"BadDeviceToken"}"#)])
    #expect(await fixture.apns.send(fixture.push("gone")) == .tokenInvalid)
    #expect(await fixture.apns.send(fixture.push("bad")) == .tokenInvalid)

    fake.script(
      "busy",
      [
        .init(status: 429, body: #"{"reason":"TooManyRequests"}"#),
        .init(status: 503, headers: ["retry-after": "30"], body: #"{"reason":"ServiceUnavailable"}"#),
      ]
    )
    #expect(await fixture.apns.send(fixture.push("busy")) == .accepted)
    #expect(fixture.time.waits.withLock { $0 } == [.seconds(1), .seconds(30)])

    fake.script("renew", [.init(status: 403, body: #"{"reason":"ExpiredProviderToken"}"#)])
    #expect(await fixture.apns.send(fixture.push("renew")) == .accepted)
    let renewals = fake.received.filter { $0.path == "/3/device/renew" }.map { $0.headers["authorization"] }
    #expect(renewals.count == 2 && renewals[0] != renewals[1])

    fake.script("big", [.init(status: 413, body: #"{"reason":"PayloadTooLarge"}"#)])
    #expect(await fixture.apns.send(fixture.push("big")) == .failed("APNs 413 PayloadTooLarge"))
    fake.script("down", Array(repeating: .init(status: 500, body: #"{"reason":"InternalServerError"}"#), count: 4))
    guard case .failed = await fixture.apns.send(fixture.push("down")) else {
      Issue.record("four failures should give up")
      return
    }
    #expect(fake.received.filter { $0.path == "/3/device/down" }.count == 4)
    #expect(fake.problems == [])
    try await fixture.stop()
  }

  @Test("FCM: an access token from the service account's RS256 assertion, reused; the payload as data.sync")
  func fcmAccepted() async throws {
    let fixture = try await PushSenderFixture.start()
    #expect(await fixture.fcm.send(fixture.push("reg-a")) == .accepted)
    #expect(await fixture.fcm.send(fixture.push("reg-b")) == .accepted)
    #expect(fixture.fake.problems == [])
    #expect(fixture.fake.accessTokens == ["ya29.fake-1"])
    let sends = fixture.fake.received.filter { $0.path.hasSuffix("messages:send") }
    #expect(sends.count == 2 && sends.allSatisfy { $0.isHTTP2 })
    #expect(sends.allSatisfy { $0.headers["authorization"] == "Bearer ya29.fake-1" })
    let message =
      (try JSONSerialization.jsonObject(with: sends[0].body) as? [String: Any])?["message"] as? [String: Any]
    #expect(message?["token"] as? String == "reg-a")
    #expect((message?["data"] as? [String: String])?["sync"] == #"{"queue_id":"q1","last_event_id":7}"#)
    try await fixture.stop()
  }

  @Test("FCM: pushes sent together wait for one access token instead of each fetching its own")
  func fcmOneTokenFetch() async throws {
    let fixture = try await PushSenderFixture.start()
    let sender = fixture.fcm
    let pushes = (1...3).map { fixture.push(PushToken(rawValue: "reg-\($0)")) }
    let deliveries = await withTaskGroup(of: PushDelivery.self) { group in
      for push in pushes { group.addTask { await sender.send(push) } }
      return await group.reduce(into: []) { $0.append($1) }
    }
    #expect(deliveries == [.accepted, .accepted, .accepted])
    #expect(fixture.fake.accessTokens == ["ya29.fake-1"])
    #expect(fixture.fake.problems == [])
    try await fixture.stop()
  }

  @Test("FCM answers: UNREGISTERED drops the token, 429 waits its Retry-After, 401 fetches a new access token")
  func fcmAnswers() async throws {
    let fixture = try await PushSenderFixture.start()
    let fake = fixture.fake
    let unregistered = #"""
      {"error":{"code":404,"message":"Requested entity was not found.","status":"NOT_FOUND",
      "details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"UNREGISTERED"}]}}
      """#
    fake.script("gone", [.init(status: 404, body: unregistered)])
    #expect(await fixture.fcm.send(fixture.push("gone")) == .tokenInvalid)
    let invalid = #"""
      {"error":{"code":400,"message":"The registration token is not a valid FCM registration token",
      "status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError",
      "errorCode":"INVALID_ARGUMENT"}]}}
      """#
    fake.script("garbled", [.init(status: 400, body: invalid)])
    #expect(await fixture.fcm.send(fixture.push("garbled")) == .tokenInvalid)

    let quota = #"""
      {"error":{"code":429,"message":"Quota exceeded.","status":"RESOURCE_EXHAUSTED",
      "details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"QUOTA_EXCEEDED"}]}}
      """#
    fake.script("busy", [.init(status: 429, headers: ["retry-after": "7"], body: quota)])
    #expect(await fixture.fcm.send(fixture.push("busy")) == .accepted)
    #expect(fixture.time.waits.withLock { $0 } == [.seconds(7)])

    fake.revoke(accessToken: "ya29.fake-1")
    #expect(await fixture.fcm.send(fixture.push("after-revoke")) == .accepted)
    #expect(fake.accessTokens == ["ya29.fake-1", "ya29.fake-2"])
    #expect(fake.problems == [])
    try await fixture.stop()
  }

  @Test("payloads too big for a platform lose their events, never the wake-up")
  func payloadLimits() async throws {
    let fixture = try await PushSenderFixture.start()
    let events = String(
      repeating: #"{"id":1,"type":"note","text":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"},"#,
      count: 100
    )
    let big = #"{"queue_id":"q1","last_event_id":99,"events":["# + events.dropLast() + "]}"
    #expect(big.utf8.count > 4096)
    #expect(await fixture.apns.send(fixture.push("a", payload: big)) == .accepted)
    #expect(await fixture.fcm.send(fixture.push("f", payload: big)) == .accepted)
    #expect(fixture.fake.problems == [])
    let apnsBody = try JSONSerialization.jsonObject(with: fixture.fake.received[0].body) as? [String: Any]
    let apnsSync = apnsBody?["sync"] as? [String: Any]
    #expect(apnsSync?["events"] == nil && apnsSync?["last_event_id"] as? Int == 99)
    let send = try #require(fixture.fake.received.last)
    let message = (try JSONSerialization.jsonObject(with: send.body) as? [String: Any])?["message"] as? [String: Any]
    let sync = try #require((message?["data"] as? [String: String])?["sync"])
    #expect(sync == #"{"last_event_id":99,"queue_id":"q1"}"#)
    try await fixture.stop()
  }

  @Test("an EventServer pushes through the platform router; the token APNs calls gone is dropped from the registry")
  func throughTheServer() async throws {
    let fixture = try await PushSenderFixture.start()
    let gateway = DeliveryRecorder(PlatformPushGateway(apns: fixture.apns, fcm: fixture.fcm, fallback: NoPushGateway()))
    let server = EventServer(application: NoteBoard(), clock: ContinuousClock(), pushGateway: gateway)
    try await server.registerPushToken("iphone-token", platform: .apns, user: "alice", clientID: "iphone")
    try await server.registerPushToken("pixel-token", platform: .fcm, user: "alice", clientID: "pixel")
    fixture.fake.script("iphone-token", [.init(status: 410, body: #"{"reason":"Unregistered"}"#)])
    try await server.handle(.post("hello", to: ["alice"]), from: "bob")
    // Pushes go out from tasks of their own: wait (bounded) for both to finish and the gone token to go.
    for _ in 0..<500 {
      if gateway.deliveries.count == 2, await server.pushRegistrations.count == 1 { break }
      try await Task.sleep(for: .milliseconds(10))
    }
    #expect(
      gateway.deliveries.sorted { $0.token.rawValue < $1.token.rawValue }.map(\.delivery) == [.tokenInvalid, .accepted]
    )
    #expect(
      fixture.fake.received.map(\.path).sorted() == [
        "/3/device/iphone-token", "/token", "/v1/projects/example-project/messages:send",
      ]
    )
    #expect(await server.pushRegistrations.map(\.token) == ["pixel-token"])
    #expect(fixture.fake.problems == [])
    await server.shutdown()
    try await fixture.stop()
  }

  @Test("over HTTP: a client registers an FCM token with its platform; the server's next event reaches FCM")
  func overHTTP() async throws {
    let fixture = try await PushSenderFixture.start()
    let gateway = DeliveryRecorder(PlatformPushGateway(apns: fixture.apns, fcm: fixture.fcm, fallback: NoPushGateway()))
    var configuration = EventHTTPServerConfiguration(keys: testKeys)
    configuration.port = 0
    configuration.dataDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("push-\(UUID())")
    var logger = Logger(label: "push-over-http")
    logger.logLevel = .warning
    let server = EventHTTPServer(
      application: NoteBoard(),
      configuration: configuration,
      logger: logger,
      pushGateway: gateway
    )
    let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
    let running = Task { try await server.run(handleSignals: false) { continuation.yield($0) } }
    var iterator = ports.makeAsyncIterator()
    let port = try #require(await iterator.next())
    func transport(_ user: UserID) -> URLSessionTransport<NoteSnapshot, NoteEvent, NoteBoard.Command> {
      URLSessionTransport(
        baseURL: URL(string: "http://127.0.0.1:\(port)")!,
        credentials: .init(user: user, apiKey: testKeyByUser[user]!)
      )
    }
    let unknown = try await RawHTTP(base: URL(string: "http://127.0.0.1:\(port)")!).send(
      "POST",
      "api/v1/push_tokens",
      as: "alice",
      key: testKeyByUser["alice"],
      body: Data("token=t&client_id=pixel&platform=webpush".utf8),
      contentType: "application/x-www-form-urlencoded"
    )
    #expect(unknown.status == 400 && unknown.code == "BAD_REQUEST" && unknown.text.contains("apns, fcm"))
    let settings = try await RawHTTP(base: URL(string: "http://127.0.0.1:\(port)")!).send(
      "GET",
      "api/v1/server_settings",
      as: "alice",
      key: testKeyByUser["alice"]
    )
    #expect(settings.text.contains(#""push_notifications_enabled":true"#))
    try await transport("alice").registerPushToken("pixel-token", platform: .fcm, clientID: "pixel")
    _ = try await transport("bob").submit(
      MutationRequest(clientID: "bob-laptop", mutationID: MutationID(1), mutation: .post("hello", to: ["alice"])),
      queueID: nil
    )
    for _ in 0..<500 where gateway.deliveries.isEmpty { try await Task.sleep(for: .milliseconds(10)) }
    #expect(gateway.deliveries.map(\.delivery) == [.accepted])
    let send = try #require(fixture.fake.received.last)
    let message = (try JSONSerialization.jsonObject(with: send.body) as? [String: Any])?["message"] as? [String: Any]
    #expect(message?["token"] as? String == "pixel-token")
    #expect(fixture.fake.problems == [])
    await server.shutdown()
    try await running.value
    try await fixture.stop()
  }

  @Test("the router: each platform to its sender, tokens without one to the only sender configured")
  func routing() async {
    let apns = InMemoryPushGateway()
    let fcm = InMemoryPushGateway()
    let fallback = InMemoryPushGateway()
    let installation = MutationSource(user: "alice", clientID: "phone")
    func push(_ platform: PushPlatform?) -> PushNotification {
      PushNotification(token: "t", platform: platform, installation: installation, payload: [])
    }
    let both = PlatformPushGateway(apns: apns, fcm: fcm, fallback: fallback)
    _ = await both.send(push(.apns))
    _ = await both.send(push(.fcm))
    _ = await both.send(push(nil))
    #expect(apns.sent.count == 1 && fcm.sent.count == 1 && fallback.sent.count == 1)
    let onlyFCM = PlatformPushGateway(apns: nil, fcm: fcm, fallback: fallback)
    _ = await onlyFCM.send(push(nil))
    _ = await onlyFCM.send(push(.apns))
    #expect(fcm.sent.count == 2 && fallback.sent.count == 2)
  }

  @Test("service-account files: read when whole; refused in one line when not one, or when the key is not RSA")
  func serviceAccountFiles() throws {
    let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
    let good = """
      {"type":"service_account","project_id":"p","client_email":"e@p.iam.gserviceaccount.com",
       "private_key":\(String(decoding: try JSONEncoder().encode(key.pkcs8PEMRepresentation), as: UTF8.self))}
      """
    let credentials = try FCMCredentials(serviceAccountJSON: Data(good.utf8))
    #expect(credentials.projectID == "p" && credentials.tokenURI == "https://oauth2.googleapis.com/token")
    #expect(throws: FCMCredentials.Invalid.self) { try FCMCredentials(serviceAccountJSON: Data("{}".utf8)) }
    let user = #"{"type":"authorized_user","project_id":"p","client_email":"e","private_key":"x"}"#
    #expect(throws: FCMCredentials.Invalid.self) { try FCMCredentials(serviceAccountJSON: Data(user.utf8)) }
    let ecKey = """
      {"type":"service_account","project_id":"p","client_email":"e",
       "private_key":\(String(decoding: try JSONEncoder().encode(P256.Signing.PrivateKey().pemRepresentation), as: UTF8.self))}
      """
    #expect(throws: FCMCredentials.Invalid.self) { try FCMCredentials(serviceAccountJSON: Data(ecKey.utf8)) }
  }
}
