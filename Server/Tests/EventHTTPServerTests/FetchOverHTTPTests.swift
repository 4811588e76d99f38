import EventHTTPServer
import EventProtocol
import EventServer
import Foundation
import TestScheduling
import Testing
import UpdateMachine
import VideoMessaging

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// `GET /api/v1/fetch` on the real HTTP server: a conversation's history fetched by page through
/// `URLSessionTransport` and kept live; bad requests answered with typed errors.
@Suite("Live HTTP server: partial state fetched by page", .serialized, .hangGuard)
struct FetchOverHTTPTests {
  @Test("bob fetches the newest two videos from alice, then older ones; a new one arrives live")
  func historyByPage() async throws {
    let live = try await LiveServer.start()
    defer { live.removeData() }
    let alice = makeMachine(live.transport("alice"))
    let bob = makeMachine(live.transport("bob"))
    await alice.start()
    await bob.start()
    for video in ["v1", "v2", "v3"] { _ = await alice.submit(upload(video, to: "bob")) }
    await waitFor(alice) { $0.pendingMutations.isEmpty && $0.confirmedState?.outgoing.count == 3 }
    await waitFor(bob) { $0.confirmedState?.incoming.count == 3 }

    let conversation = VideoHistory.conversation(between: "bob", and: "alice")
    #expect(await bob.fetch(VideoHistory.latest(2, between: "bob", and: "alice")) == .merged)
    var list = await bob.snapshot.state?.history.list(conversation)
    #expect(list?.items.map(\.video.rawValue) == ["v2", "v3"])
    #expect(list?.reachesNewest == true && list?.reachesOldest == false)

    let oldest = try #require(list?.items.first?.position)
    #expect(
      await bob.fetch(FetchRequest(narrow: conversation, anchor: .position(oldest), before: 5, after: 0)) == .merged
    )
    list = await bob.snapshot.state?.history.list(conversation)
    #expect(list?.items.map(\.video.rawValue) == ["v1", "v2", "v3"])
    #expect(list?.complete.intervals == [.oldest ... .newest])

    _ = await alice.submit(upload("v4", to: "bob"))
    let updated = await waitFor(bob) { $0.state?.history.list(conversation).items.count == 4 }
    #expect(updated?.state?.history.item("v4").item?.status == .uploaded)
    _ = await bob.submit(.viewed("v1"))
    await waitFor(bob) { $0.confirmedState?.history.item("v1").item?.status == .viewed }
    await alice.stop()
    await bob.stop()
    try await live.stop()
  }

  @Test("a bad anchor, narrow, conversation or queue is a 400; answers name result and msg once")
  func badFetches() async throws {
    let live = try await LiveServer.start()
    defer { live.removeData() }
    let http = RawHTTP(base: live.url)
    let registered = try await http.send(
      "POST",
      "api/v1/register",
      as: "alice",
      body: Data(),
      contentType: "application/x-www-form-urlencoded"
    )
    let queueID = try #require(
      (try JSONSerialization.jsonObject(with: registered.body) as? [String: Any])?["queue_id"] as? String
    )
    func fetch(_ query: [String: String]) async throws -> RawHTTP.Answer {
      try await http.send("GET", "api/v1/fetch", query: query, as: "alice")
    }
    let good = try await fetch([
      "queue_id": queueID, "anchor": "newest", "num_before": "5",
      "narrow": #"[{"operator":"dm","operand":"alice,bob"}]"#,
    ])
    #expect(good.status == 200)
    #expect(good.text.contains("\"last_event_id\":-1") && good.text.contains("\"found_newest\":true"))
    // Each success body names `result` and `msg` once (they were written twice: SuccessBodyTests).
    let events = try await http.send(
      "GET",
      "api/v1/events",
      query: ["queue_id": queueID, "last_event_id": "-1", "dont_block": "true"],
      as: "alice"
    )
    #expect(events.status == 200)
    for body in [String(decoding: registered.body, as: UTF8.self), events.text, good.text] {
      #expect(body.components(separatedBy: #""result":"#).count == 2, "\(body)")
      #expect(body.components(separatedBy: #""msg":"#).count == 2, "\(body)")
    }
    let badAnchor = try await fetch(["queue_id": queueID, "anchor": "middle"])
    #expect(badAnchor.status == 400 && badAnchor.code == "BAD_REQUEST")
    let badNarrow = try await fetch(["queue_id": queueID, "anchor": "newest", "narrow": "dm:bob"])
    #expect(badNarrow.status == 400 && badNarrow.code == "BAD_REQUEST")
    let foreign = try await fetch([
      "queue_id": queueID, "anchor": "newest", "narrow": #"[{"operator":"dm","operand":"bob,carol"}]"#,
    ])
    #expect(foreign.status == 400 && foreign.code == "BAD_REQUEST")
    let tooMany = try await fetch(["queue_id": queueID, "anchor": "newest", "num_before": "1001"])
    #expect(tooMany.status == 400)
    let unknownQueue = try await fetch(["queue_id": "not-a-queue", "anchor": "newest"])
    #expect(unknownQueue.status == 400 && unknownQueue.code == "BAD_EVENT_QUEUE_ID")
    let bobsQueue = try await http.send(
      "GET",
      "api/v1/fetch",
      query: ["queue_id": queueID, "anchor": "newest"],
      as: "bob"
    )
    #expect(bobsQueue.status == 400 && bobsQueue.code == "BAD_EVENT_QUEUE_ID", "alice's queue is not bob's")
    try await live.stop()
  }
}
