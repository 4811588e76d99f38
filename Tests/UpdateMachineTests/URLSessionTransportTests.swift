import EventProtocol
import Foundation
import SampleApps
import Synchronization
import TestScheduling
import Testing

@testable import UpdateMachine

private typealias NotesTransport = URLSessionTransport<NoteSnapshot, NoteEvent, NoteBoard.Command>

private func transport(_ server: CannedHTTPServer) -> NotesTransport {
  NotesTransport(baseURL: server.url, credentials: .init(user: "alice", apiKey: "k3y"))
}

private let finger = EventFinger(queueID: "q1", lastEventID: 4)

@Suite("URLSessionTransport: HTTP answers become replies or typed errors", .hangGuard)
struct URLSessionTransportTests {
  @Test("a poll sends the query and basic credentials, and decodes the events")
  func pollRoundTrip() async throws {
    let server = try CannedHTTPServer(
      status: "200 OK",
      headers: ["Content-Type: application/json"],
      body: #"{"result":"success","msg":"","queue_id":"q1","events":[{"id":5,"type":"note","text":"hi"}]}"#
    )
    defer { server.stop() }
    let events = try await transport(server).poll(after: finger, dontBlock: true, limit: 100)
    #expect(events == [EventEnvelope(id: 5, body: .payload(.note(text: "hi")))])
    let head = try #require(server.requests.first)
    #expect(head.hasPrefix("GET /api/v1/events?queue_id=q1&last_event_id=4&dont_block=true&limit=100 HTTP/1.1"))
    // alice:k3y
    #expect(head.contains("Authorization: Basic YWxpY2U6azN5"))
  }

  @Test("register posts a form with JSON in field values, as Zulip's does")
  func registerForm() async throws {
    let server = try CannedHTTPServer(
      status: "200 OK",
      body: #"{"result":"success","msg":"","queue_id":"q9","last_event_id":-1,"notes":[]}"#
    )
    defer { server.stop() }
    let registration = try await transport(server).register(
      eventTypes: ["note", "restart"],
      lifespan: .seconds(600),
      clientID: "c 1"
    )
    #expect(registration.queueID == "q9" && registration.lastEventID == -1)
    #expect(server.requests.first?.hasPrefix("POST /api/v1/register HTTP/1.1") == true)
  }

  @Test(
    "every kind of failing answer is a typed error, never a crash",
    arguments: [
      ("502 Bad Gateway", [], "<html><body>Bad gateway</body></html>", TransportError.Kind.serverError(status: 502)),
      ("200 OK", [], "<html>a captive portal</html>", nil),
      ("404 Not Found", [], "<html>not here</html>", nil),
      ("401 Unauthorized", [], "no", .api(.unauthorized("HTTP 401 without an error body"))),
      (
        "400 Bad Request", [],
        #"{"result":"error","code":"BAD_EVENT_QUEUE_ID","msg":"Bad event queue ID: q1","queue_id":"q1"}"#,
        .api(.badEventQueueID("q1"))
      ),
      ("429 Too Many Requests", ["Retry-After: 7"], "slow down", .api(.rateLimitHit(retryAfter: .seconds(7)))),
      (
        "429 Too Many Requests", ["Retry-After: 7"],
        #"{"result":"error","code":"RATE_LIMIT_HIT","msg":"API usage exceeded rate limit","retry-after":2.5}"#,
        .api(.rateLimitHit(retryAfter: .milliseconds(2500)))
      ),
    ] as [(String, [String], String, TransportError.Kind?)]
  )
  func failures(status: String, headers: [String], body: String, expected: TransportError.Kind?) async throws {
    let server = try CannedHTTPServer(status: status, headers: headers, body: body)
    defer { server.stop() }
    do {
      _ = try await transport(server).poll(after: finger, dontBlock: true, limit: nil)
      Issue.record("\(status) was taken as a success")
    } catch {
      if let expected {
        #expect(error.kind == expected)
      } else {
        guard case .api(let apiError) = error.kind else {
          Issue.record("\(status): \(error)")
          return
        }
        #expect(apiError.code == .malformedResponse)
      }
    }
  }

  /// FoundationNetworking takes `WWW-Authenticate: Basic` as a credential challenge; unanswered, the
  /// request hung until its deadline and a wrong API key looked like a network failure for ever.
  @Test("a 401 with a Basic challenge (as event-server sends it) is UNAUTHORIZED at once, not a hang")
  func unauthorizedWithChallenge() async throws {
    let server = try CannedHTTPServer(
      status: "401 Unauthorized",
      headers: ["Content-Type: application/json", #"WWW-Authenticate: Basic realm="event-server""#],
      body: #"{"result":"error","code":"UNAUTHORIZED","msg":"Invalid API key"}"#
    )
    defer { server.stop() }
    // Before the fix the request waited out this timeout (a connection failure, retried for ever).
    var configuration = NotesTransport.Configuration()
    configuration.requestTimeout = .seconds(5)
    let client = NotesTransport(
      baseURL: server.url,
      credentials: .init(user: "alice", apiKey: "wrong-key"),
      configuration: configuration
    )
    do {
      _ = try await client.register(eventTypes: nil, lifespan: nil, clientID: nil)
      Issue.record("a 401 was taken as a success")
    } catch {
      guard case .api(let apiError) = error.kind else {
        Issue.record("not an API error: \(error)")
        return
      }
      #expect(apiError.code == .unauthorized)
    }
    // The credentials were sent once; the challenge was not answered with them again.
    #expect(server.requests.count == 1)
  }

  @Test("a body over the limit is malformed; a refused connection is a connection failure")
  func limitsAndRefusals() async throws {
    let body = #"{"result":"success","msg":"","events":[]}"# + String(repeating: " ", count: 2_000)
    let server = try CannedHTTPServer(status: "200 OK", body: body)
    defer { server.stop() }
    var configuration = NotesTransport.Configuration()
    configuration.maximumBodySize = 1_000
    let small = NotesTransport(
      baseURL: server.url,
      credentials: .init(user: "a", apiKey: "b"),
      configuration: configuration
    )
    await #expect(throws: TransportError.self) { try await small.poll(after: finger, dontBlock: true, limit: nil) }

    let closed = try CannedHTTPServer.closedPort()
    let nowhere = NotesTransport(
      baseURL: URL(string: "http://127.0.0.1:\(closed)")!,
      credentials: .init(user: "a", apiKey: "b")
    )
    do {
      _ = try await nowhere.poll(after: finger, dontBlock: true, limit: nil)
      Issue.record("a closed port answered")
    } catch {
      #expect(error.kind == .connectionFailed)
    }
  }

  /// swift-corelibs-foundation issue 5412: cancelling many `data(for:)` calls at once deadlocks. The transport
  /// must come back from 100 requests cancelled together, every time: requests to a server that never
  /// answers (some on the wire, the rest queued in the session), and requests cancelled before they start.
  @Test(
    "storms of 100 requests cancelled together end every time (to a closed port and to a silent server; in flight and before starting)",
    arguments: [false, true]
  )
  func cancelStorm(toClosedPort: Bool) async throws {
    let (hole, silentPort) = try CannedHTTPServer.blackHole()
    defer { close(hole) }
    let port = toClosedPort ? try CannedHTTPServer.closedPort() : silentPort
    let silent = NotesTransport(
      baseURL: URL(string: "http://127.0.0.1:\(port)")!,
      credentials: .init(user: "a", apiKey: "b")
    )
    for storm in 0..<40 {
      let inFlight = storm % 2 == 0
      let started = Counter()
      let outcomes = await withTaskGroup(of: TransportError.Kind?.self) { group in
        for _ in 0..<100 {
          group.addTask {
            started.increment()
            do throws(TransportError) {
              _ = try await silent.poll(after: finger, dontBlock: false, limit: nil)
              return nil
            } catch {
              return error.kind
            }
          }
        }
        if inFlight {
          // Every task has called into the transport before the storm.
          while started.value < 100 { await Task.yield() }
        }
        group.cancelAll()
        var kinds: [TransportError.Kind?] = []
        for await kind in group { kinds.append(kind) }
        return kinds
      }
      #expect(outcomes.count == 100)
      // A refused connection may fail before the cancellation reaches it.
      let acceptable: Set<TransportError.Kind?> = toClosedPort ? [.cancelled, .connectionFailed] : [.cancelled]
      #expect(
        outcomes.allSatisfy(acceptable.contains),
        "storm \(storm): \(outcomes.filter { !acceptable.contains($0) })"
      )
    }
  }
}

private final class Counter: Sendable {
  private let count = Mutex(0)
  var value: Int { count.withLock { $0 } }
  func increment() { count.withLock { $0 += 1 } }
}
