import EventProtocol
import EventServer
import Foundation
import Hummingbird
import HummingbirdTesting
import TestScheduling
import Testing

@testable import EventHTTPServer

/// What the wire says when the server cannot do something, how queries are read, and what needs no key
/// (`docs/protocol.md`, "Errors"; `docs/security.md`).
@Suite("Wire integrity: 5xx codes, server_settings, form-encoded queries", .serialized, .hangGuard)
struct WireIntegrityTests {
  @Test("a write the store cannot make durable is 503 SERVICE_UNAVAILABLE with Retry-After, never a code that drops it")
  func failingStoreIsRetry() async throws {
    let log = InMemoryServerLog()
    let (events, _) = try await EventServer.recovering(
      from: log,
      application: KanbanServer(team: ["alice"]),
      clock: ContinuousClock()
    )
    let gate = RequestGate(
      authenticator: try APIKeys(["alice": "alice-secret-key"]),
      policy: .init(),
      now: { Timestamp(Date()) }
    )
    let router = Router()
    EventRoutes(server: events, gate: gate).add(to: router)
    let authorization = "Basic \(Data("alice:alice-secret-key".utf8).base64EncodedString())"
    let body = #"{"client_id":"c","mutation_id":1,"mutation":{"card":"c","column":"done"}}"#
    log.failEveryCall(with: .storage("the disk is gone"))
    try await Hummingbird.Application(router: router).test(.router) { client in
      try await client.execute(
        uri: "/api/v1/mutations",
        method: .post,
        headers: [.authorization: authorization, .contentType: "application/json"],
        body: ByteBuffer(string: body)
      ) { response in
        #expect(response.status == .serviceUnavailable)
        #expect(response.headers[.retryAfter] == "1")
        let error = try JSONDecoder().decode(EventAPIError.self, from: Data(response.body.readableBytesView))
        #expect(error.code == .serviceUnavailable)
        #expect(!error.code.meansGiveUp)
      }
    }
  }

  @Test("no error the routes can meet is answered 5xx with a code that tells the client to give up")
  func noFiveHundredMeansGiveUp() async throws {
    let failures: [any Error] = [
      ServerLogError.storage("gone"), ServerLogError.damaged(position: 3), ServerLogError.gap(after: 1, next: 3),
      ServerLogError.newerFormat(found: 9, supported: 1), ServerLogError.undecodable("x"), CancellationError(),
      EventAPIError.serviceUnavailable("busy"), EventAPIError.badRequest("no"), EventAPIError.unauthorized(),
      EventAPIError.rateLimitHit(retryAfter: .seconds(2)), EventAPIError.badEventQueueID("q"),
      EventAPIError.mutationIDReused(MutationID(rawValue: 1)), URLError(.badURL),
    ]
    for failure in failures {
      let (status, error) = HTTPAnswer.answer(to: failure)
      if status.code >= 500 {
        #expect(!error.code.meansGiveUp, "\(failure) was answered \(status.code) \(error.code.wireValue)")
        #expect(error.code == .serviceUnavailable, "\(failure)")
      }
    }
    // The codes that mean "give up", and those that do not.
    let giveUp: [EventAPIError.Code] = [.badRequest, .badEventQueueID, .mutationIDReused, .unauthorized]
    #expect(giveUp.allSatisfy { $0.meansGiveUp })
    #expect(!EventAPIError.Code.serviceUnavailable.meansGiveUp && !EventAPIError.Code.rateLimitHit.meansGiveUp)
    #expect(EventAPIError.Code(wireValue: "SERVICE_UNAVAILABLE") == .serviceUnavailable)
  }

  @Test("server_settings needs no key (as Zulip's): a wrong key is refused on the first real request instead")
  func serverSettingsWithoutKey() async throws {
    let live = try await LiveServer.start()
    defer { live.removeData() }
    let http = RawHTTP(base: live.url)
    for answer in [
      try await http.send("GET", "api/v1/server_settings"),
      try await http.send("GET", "api/v1/server_settings", as: "alice", key: "not-alice-key"),
      try await http.send("GET", "api/v1/server_settings", as: "alice"),
    ] {
      #expect(answer.status == 200, "\(answer.text)")
      #expect(answer.text.contains("zulip_version"))
      #expect(!answer.text.contains("alice"))
    }
    // Still a 400 for a parameter it does not take, and the wrong key meets 401 elsewhere.
    #expect(try await http.send("GET", "api/v1/server_settings", query: ["x": "1"]).status == 400)
    let refused = try await http.send("POST", "api/v1/register", as: "alice", key: "not-alice-key")
    #expect(refused.status == 401 && refused.code == "UNAUTHORIZED")
    try await live.stop()
  }

  @Test("a long-poll's answer says Connection: close (its connection closes), a dont_block answer does not")
  func longPollClosesItsConnection() async throws {
    let live = try await LiveServer.start()
    defer { live.removeData() }
    let http = RawHTTP(base: live.url)
    let registered = try await http.send("POST", "api/v1/register", as: "bob")
    let object = try JSONSerialization.jsonObject(with: registered.body) as? [String: Any]
    let queue = try #require(object?["queue_id"] as? String)
    _ = try await http.mutation(
      VideoCommandJSON.uploaded(video: "v1", recipient: "bob", key: "blob-v1", size: 3),
      as: "alice",
      id: 1
    )
    // An event is waiting: the long-poll answers at once, and says its connection closes (nginx must not reuse
    // it for its next request).
    let longPoll = try await http.send(
      "GET",
      "api/v1/events",
      query: ["queue_id": queue, "last_event_id": "-1", "dont_block": "false"],
      as: "bob"
    )
    #expect(longPoll.status == 200)
    #expect(longPoll.headers["connection"]?.lowercased() == "close")
    let shortPoll = try await http.send(
      "GET",
      "api/v1/events",
      query: ["queue_id": queue, "last_event_id": "-1", "dont_block": "true"],
      as: "bob"
    )
    #expect(shortPoll.status == 200)
    #expect(shortPoll.headers["connection"]?.lowercased() != "close")
    try await live.stop()
  }

  @Test("a query is read as application/x-www-form-urlencoded: + is a space, %2B a plus, a bad escape a 400")
  func queryPlusIsSpace() async throws {
    let live = try await LiveServer.start()
    defer { live.removeData() }
    let http = RawHTTP(base: live.url)
    let registered = try await http.send(
      "POST",
      "api/v1/register",
      as: "bob",
      body: Data("event_types=null".utf8),
      contentType: "application/x-www-form-urlencoded"
    )
    let queueID = try #require(
      (try JSONSerialization.jsonObject(with: registered.body) as? [String: Any])?["queue_id"] as? String
    )
    // A narrow as Python requests' params= sends it: spaces after the JSON's colons and commas as `+`.
    let narrow = #"[{"operator":+"dm",+"operand":+"alice,bob"}]"#
      .replacingOccurrences(of: "\"", with: "%22").replacingOccurrences(of: "[", with: "%5B")
      .replacingOccurrences(of: "]", with: "%5D").replacingOccurrences(of: "{", with: "%7B")
      .replacingOccurrences(of: "}", with: "%7D").replacingOccurrences(of: ":", with: "%3A")
      .replacingOccurrences(of: ",", with: "%2C")
    let fetched = try await http.send(
      "GET",
      "api/v1/fetch",
      as: "bob",
      rawQuery: "queue_id=\(queueID)&anchor=newest&num_before=5&narrow=\(narrow)"
    )
    #expect(fetched.status == 200, "\(fetched.text)")
    // `+` in a queue id is a space; `%2B` is a plus: both named back as read.
    let spaced = try await http.send(
      "GET",
      "api/v1/events",
      as: "bob",
      rawQuery: "queue_id=no+such+queue&last_event_id=-1&dont_block=true"
    )
    #expect(spaced.code == "BAD_EVENT_QUEUE_ID" && spaced.text.contains(#""queue_id":"no such queue""#))
    let plus = try await http.send(
      "GET",
      "api/v1/events",
      as: "bob",
      rawQuery: "queue_id=a%2Bb&last_event_id=-1&dont_block=true"
    )
    #expect(plus.text.contains(#""queue_id":"a+b""#))
    let bad = try await http.send("GET", "api/v1/events", as: "bob", rawQuery: "queue_id=%zz&last_event_id=-1")
    #expect(bad.status == 400 && bad.code == "BAD_REQUEST")
    try await live.stop()
  }
}
