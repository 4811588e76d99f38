import EventHTTPServer
import EventProtocol
import EventServer
import Foundation
import TestScheduling
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// The lean poll listener (`pollPort`): the events route below Hummingbird answers as the main listener does,
/// behind the same gate, and a parked poll there ends with its client or with the server.
@Suite("The lean poll listener", .serialized, .hangGuard)
struct PollListenerTests {
  private static func startWithPolls() async throws -> (LiveServer, RawHTTP, RawHTTP) {
    let live = try await LiveServer.start { $0.pollPort = 0 }
    let pollPort = try #require(live.pollPort)
    return (live, RawHTTP(base: live.url), RawHTTP(base: URL(string: "http://127.0.0.1:\(pollPort)")!))
  }

  private static func queueID(of answer: RawHTTP.Answer) throws -> String {
    try #require((try JSONSerialization.jsonObject(with: answer.body) as? [String: Any])?["queue_id"] as? String)
  }

  private static func eventIDs(of answer: RawHTTP.Answer) -> [Int] {
    let events = (try? JSONSerialization.jsonObject(with: answer.body) as? [String: Any])?["events"] as? [[String: Any]]
    return (events ?? []).compactMap { $0["id"] as? Int }
  }

  @Test("polls answer as on the main listener: the same events and errors, one user kept from another's queue")
  func answersAsTheMainListener() async throws {
    let (live, main, polls) = try await Self.startWithPolls()
    defer { live.removeData() }
    let queue = try Self.queueID(of: try await main.send("POST", "api/v1/register", as: "bob"))
    let video = VideoCommandJSON.uploaded(video: "v1", recipient: "bob", key: "videos/v1", size: 1)
    #expect(try await main.mutation(video, as: "alice", id: 1).status == 200)
    let query = ["queue_id": queue, "last_event_id": "-1", "dont_block": "true"]
    let viaPolls = try await polls.send("GET", "api/v1/events", query: query, as: "bob")
    let viaMain = try await main.send("GET", "api/v1/events", query: query, as: "bob")
    #expect(viaPolls.status == 200)
    #expect(viaPolls.body == viaMain.body)
    #expect(Self.eventIDs(of: viaPolls).count == 1)
    #expect(viaPolls.headers["content-type"] == "application/json")

    // The same gate: a wrong key, another user's queue, an unknown parameter.
    let wrongKey = try await polls.send("GET", "api/v1/events", query: query, as: "bob", key: "not-bobs-key-at-all")
    #expect(wrongKey.status == 401 && wrongKey.code == "UNAUTHORIZED")
    #expect(wrongKey.headers["www-authenticate"]?.contains("Basic") == true)
    let stolen = try await polls.send("GET", "api/v1/events", query: query, as: "alice")
    #expect(stolen.status == 400 && stolen.code == "BAD_EVENT_QUEUE_ID")
    let misspelt = try await polls.send("GET", "api/v1/events", query: query.merging(["limt": "1"]) { $1 }, as: "bob")
    #expect(misspelt.status == 400 && misspelt.text.contains("limt"))

    // Only the events route, and only GET and DELETE.
    let other = try await polls.send("POST", "api/v1/register", as: "bob")
    #expect(other.status == 404 && other.text.contains("main port"))
    let post = try await polls.send("POST", "api/v1/events", query: query, as: "bob")
    #expect(post.status == 405 && post.headers["allow"] == "GET, DELETE")
    #expect(try await live.events.queueCount == 1)

    // A DELETE by another user changes nothing; the owner's (queue id in the form body, as Zulip's clients
    // send it) removes the queue.
    #expect(try await polls.send("DELETE", "api/v1/events", query: ["queue_id": queue], as: "alice").status == 400)
    let deleted = try await polls.send(
      "DELETE",
      "api/v1/events",
      as: "bob",
      body: Data("queue_id=\(queue)".utf8),
      contentType: "application/x-www-form-urlencoded"
    )
    #expect(deleted.status == 200)
    #expect(try await live.events.queueCount == 0)
    try await live.stop()
  }

  @Test("a parked poll is woken by a write on the main listener, and its answer closes the connection")
  func parkedPollWakes() async throws {
    let (live, main, polls) = try await Self.startWithPolls()
    defer { live.removeData() }
    let queue = try Self.queueID(of: try await main.send("POST", "api/v1/register", as: "bob"))
    async let parked = polls.send("GET", "api/v1/events", query: ["queue_id": queue, "last_event_id": "-1"], as: "bob")
    try await live.events.waitForParkedPolls(count: 1)
    let video = VideoCommandJSON.uploaded(video: "v1", recipient: "bob", key: "videos/v1", size: 1)
    #expect(try await main.mutation(video, as: "alice", id: 1).status == 200)
    let answer = try await parked
    #expect(answer.status == 200)
    #expect(Self.eventIDs(of: answer).count == 1)
    #expect(answer.headers["connection"] == "close")
    try await live.stop()
  }

  @Test("a client going away ends its parked poll at once; a stop answers the parked polls and drains")
  func goneClientAndStop() async throws {
    let (live, main, polls) = try await Self.startWithPolls()
    defer { live.removeData() }
    let pollPort = try #require(live.pollPort)
    let queue = try Self.queueID(of: try await main.send("POST", "api/v1/register", as: "bob"))
    let credentials = Data("bob:\(testKeyByUser["bob"]!)".utf8).base64EncodedString()
    let request =
      "GET /api/v1/events?queue_id=\(queue)&last_event_id=-1 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
      + "Authorization: Basic \(credentials)\r\n\r\n"
    let socket = try #require(loopbackSocket(from: "127.0.0.1", to: pollPort, receiveTimeoutSeconds: 5))
    #expect(request.withCString { send(socket, $0, strlen($0), 0) } > 0)
    try await live.events.waitForParkedPolls(count: 1)
    close(socket)
    // The poll's task was cancelled when its connection closed, not at the heartbeat (a minute away).
    while try await live.events.parkedPollCount > 0 { await Task.yield() }

    // Parked again, then the server stops: the poll is answered (empty) before the listener drains.
    async let parked = polls.send("GET", "api/v1/events", query: ["queue_id": queue, "last_event_id": "-1"], as: "bob")
    try await live.events.waitForParkedPolls(count: 1)
    try await live.stop()
    let answer = try await parked
    #expect(answer.status == 200)
    #expect(Self.eventIDs(of: answer).isEmpty)
  }
}
