import EventProtocol
import Foundation
import SampleApps
import Synchronization
import TestScheduling
import Testing

@testable import UpdateMachine

private typealias NotesTransport = URLSessionTransport<NoteSnapshot, NoteEvent, NoteBoard.Command>

private let finger = EventFinger(queueID: "q1", lastEventID: 4)
private let emptyEvents = #"{"result":"success","msg":"","queue_id":"q1","events":[]}"#

/// A canned answer with `status` and a JSON `body`.
private func answer(_ status: String, _ body: String) -> String {
  "HTTP/1.1 \(status)\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\nContent-Type: application/json\r\n\r\n"
    + body
}

private let refusal = answer("401 Unauthorized", #"{"result":"error","code":"UNAUTHORIZED","msg":"token expired"}"#)

/// The one bearer token a test server accepts.
private final class ValidToken: Sendable {
  let token: Mutex<String>

  init(_ token: String) {
    self.token = Mutex(token)
  }
}

/// A server that accepts only the bearer token `valid` holds.
private func server(accepting valid: ValidToken) throws -> CannedHTTPServer {
  try CannedHTTPServer { head in
    let token = valid.token.withLock { $0 }
    return head.contains("Authorization: Bearer \(token)\r\n") ? answer("200 OK", emptyEvents) : refusal
  }
}

/// A provider of bearer tokens "t0", "t1", …: the current one, and a new one for each refresh, counted.
private final class TokenIssuer: Sendable {
  let issued = Mutex(0)

  var refreshes: Int { issued.withLock { $0 } }

  var provider: CredentialsProvider {
    CredentialsProvider { [self] request in
      switch request {
      case .current:
        return .bearer("t\(issued.withLock { $0 })")
      case .refresh:
        let next = issued.withLock { issued in
          issued += 1
          return issued
        }
        return .bearer("t\(next)")
      }
    }
  }
}

/// A server accepting only `token`, a token issuer, and a transport sending the issuer's tokens.
private func tokenWorld(accepting token: String) throws -> (CannedHTTPServer, TokenIssuer, NotesTransport) {
  let server = try server(accepting: ValidToken(token))
  let issuer = TokenIssuer()
  return (server, issuer, NotesTransport(baseURL: server.url, credentials: issuer.provider))
}

/// The API error a poll through `transport` fails with; `nil`, with an issue recorded, for any other outcome.
private func apiError(polling transport: NotesTransport) async -> EventAPIError? {
  do {
    _ = try await transport.poll(after: finger, dontBlock: true, limit: 100)
    Issue.record("the poll succeeded")
  } catch {
    if case .api(let apiError) = error.kind { return apiError }
    Issue.record("not an API error: \(error)")
  }
  return nil
}

@Suite("Credentials: a provider asked before each request, and once to refresh after a 401", .hangGuard)
struct CredentialsRefreshTests {
  @Test("a refused token is refreshed once and the request sent again with the new one")
  func refreshAfterRefusal() async throws {
    let (server, issuer, transport) = try tokenWorld(accepting: "t1")
    defer { server.stop() }
    let events = try await transport.poll(after: finger, dontBlock: true, limit: 100)
    #expect(events.isEmpty)
    #expect(issuer.refreshes == 1)
    let heads = server.requests
    #expect(heads.count == 2)
    #expect(heads.first?.contains("Authorization: Bearer t0\r\n") == true)
    #expect(heads.last?.contains("Authorization: Bearer t1\r\n") == true)
    // The next request sends the refreshed token first: no refusal, no refresh.
    _ = try await transport.poll(after: finger, dontBlock: true, limit: 100)
    #expect(server.requests.count == 3 && issuer.refreshes == 1)
  }

  @Test("refused again with the fresh token: UNAUTHORIZED after one refresh, so the machine stops")
  func refusedTwice() async throws {
    let (server, issuer, transport) = try tokenWorld(accepting: "never")
    defer { server.stop() }
    for _ in 0..<2 {
      let refused = await apiError(polling: transport)
      #expect(refused?.code == .unauthorized && refused?.message == "token expired")
    }
    // Two polls, each sent twice (refused, then refused with a fresh token), each with one refresh.
    #expect(server.requests.count == 4 && issuer.refreshes == 2)
  }

  @Test("requests refused together wait for one refresh")
  func refreshesCoalesce() async throws {
    let (server, issuer, transport) = try tokenWorld(accepting: "t1")
    defer { server.stop() }
    try await withThrowingTaskGroup(of: Void.self) { group in
      for _ in 0..<6 {
        group.addTask { _ = try await transport.poll(after: finger, dontBlock: true, limit: 100) }
      }
      try await group.waitForAll()
    }
    #expect(issuer.refreshes == 1)
    #expect(server.requests.filter { $0.contains("Bearer t1\r\n") }.count == 6)
  }

  @Test("a provider with no credentials stops the machine; one that fails otherwise is retried")
  func providerFailures() async throws {
    let server = try CannedHTTPServer(status: "200 OK", body: emptyEvents)
    defer { server.stop() }
    let signedOut = NotesTransport(
      baseURL: server.url,
      credentials: CredentialsProvider { _ in throw CredentialsUnavailable("signed out") }
    )
    #expect(await apiError(polling: signedOut) == .unauthorized("no credentials: signed out"))
    struct IdentityProviderDown: Error {}
    let unreachable = NotesTransport(
      baseURL: server.url,
      credentials: CredentialsProvider { _ in throw IdentityProviderDown() }
    )
    do {
      _ = try await unreachable.poll(after: finger, dontBlock: true, limit: 100)
      Issue.record("a poll without credentials succeeded")
    } catch {
      guard case .connectionFailed = error.kind else {
        Issue.record("not retried: \(error)")
        return
      }
    }
    // Neither request was sent.
    #expect(server.requests.isEmpty)
  }

  @Test("basic credentials and bearer tokens make their Authorization headers")
  func headerValues() {
    #expect(HTTPAuthorization.basic(.init(user: "alice", apiKey: "k3y")).headerValue == "Basic YWxpY2U6azN5")
    #expect(HTTPAuthorization.bearer("abc.def.ghi").headerValue == "Bearer abc.def.ghi")
  }
}
