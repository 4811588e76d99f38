import EventHTTPServer
import EventProtocol
import EventServer
import Foundation
import Synchronization
import TestScheduling
import Testing
import UpdateMachine
import VideoMessaging

/// Bearer tokens a test issues and expires, one valid per user at a time; API keys (``testKeys``) for the
/// rest: an identity provider's tokens in miniature.
private final class ExpiringTokens: Authenticator {
  private struct State {
    var userByToken: [String: UserID] = [:]
    var currentByUser: [UserID: String] = [:]
    var issued = 0
  }
  private let state = Mutex(State())

  func user(authorization: String?) async -> UserID? {
    guard let authorization, authorization.hasPrefix("Bearer ") else {
      return testKeys.user(authorization: authorization)
    }
    let token = String(authorization.dropFirst("Bearer ".count))
    return state.withLock { $0.userByToken[token] }
  }

  /// A new token for `user`; the one before stays valid until it expires.
  func issue(for user: UserID) -> String {
    state.withLock { state in
      state.issued += 1
      let token = "token-\(user.rawValue)-\(state.issued)"
      state.userByToken[token] = user
      state.currentByUser[user] = token
      return token
    }
  }

  /// The token `user` holds now.
  func current(for user: UserID) -> String? {
    state.withLock { $0.currentByUser[user] }
  }

  /// `user`'s token expires: the server refuses it from now on.
  func expire(for user: UserID) {
    state.withLock { state in
      if let token = state.currentByUser[user] { state.userByToken[token] = nil }
    }
  }

  /// How many tokens were issued.
  var issuedCount: Int { state.withLock { $0.issued } }
}

@Suite("Live HTTP server: bearer tokens that expire while the app runs", .serialized, .hangGuard)
struct TokenRefreshTests {
  @Test("a token expiring while the app runs is refreshed: the same queue, every write applied once, no stop")
  func expiringTokenIsRefreshed() async throws {
    let tokens = ExpiringTokens()
    _ = tokens.issue(for: "alice")
    let live = try await LiveServer.start(configure: { $0.authenticator = tokens })
    defer { live.removeData() }
    let credentials = CredentialsProvider { request in
      switch request {
      case .current: .bearer(tokens.current(for: "alice") ?? "none")
      case .refresh: .bearer(tokens.issue(for: "alice"))
      }
    }
    let alice = makeMachine(VideoTransport(baseURL: live.url, credentials: credentials))
    let bob = makeMachine(live.transport("bob"))
    await alice.start()
    await bob.start()
    await waitFor(alice, isPolling)
    await waitFor(bob, isPolling)
    _ = await alice.submit(upload("v1", to: "bob"))
    await waitFor(bob) { $0.confirmedState?.incoming.count == 1 }

    tokens.expire(for: "alice")
    // Refused once (401), refreshed, sent again: acknowledged, and alice's next poll carries the new token.
    _ = await alice.submit(upload("v2", to: "bob"))
    let received = await waitFor(bob) { $0.confirmedState?.incoming.map(\.id.rawValue) == ["v1", "v2"] }
    #expect(received != nil)
    let sent = await waitFor(alice) { $0.pendingMutations.isEmpty && $0.confirmedState?.outgoing.count == 2 }
    // One refresh; no stop and no new queue; each write applied once.
    #expect(sent?.stopReason == nil && sent?.metrics.registers == 1 && tokens.issuedCount == 2)
    #expect(try await live.events.application.videos.map(\.key.rawValue).sorted() == ["v1", "v2"])
    await alice.stop()
    await bob.stop()
    try await live.stop()
  }

  @Test("a token refused again after its refresh stops the machine as unauthorized, keeping the write")
  func refusedAfterRefreshStops() async throws {
    let tokens = ExpiringTokens()
    let live = try await LiveServer.start(configure: { $0.authenticator = tokens })
    defer { live.removeData() }
    // Tokens no server accepts: the first is refused, and so is the refreshed one.
    let credentials = CredentialsProvider { request in
      switch request {
      case .current: .bearer("forged")
      case .refresh: .bearer("forged-again")
      }
    }
    let alice = makeMachine(VideoTransport(baseURL: live.url, credentials: credentials))
    _ = await alice.submit(upload("kept", to: "bob"))
    await alice.start()
    let stopped = await waitFor(alice) { $0.stopReason != nil }
    guard case .unauthorized? = stopped?.stopReason else {
      Issue.record("not stopped as unauthorized: \(String(describing: stopped?.stopReason))")
      return
    }
    #expect(stopped?.pendingMutations.count == 1)
    await alice.stop()
    try await live.stop()
  }
}
