import EventProtocol
import Foundation
import Synchronization

/// What a request carries to say who it is from: a user's API key (HTTP basic authentication, as Zulip's
/// API takes it), or a bearer token from the team's identity provider (a JWT the server verifies).
public enum HTTPAuthorization: Sendable, Hashable {
  /// A user and their API key.
  case basic(HTTPCredentials)
  /// A bearer token, such as an access token from the team's identity provider.
  case bearer(String)

  /// The value of the `Authorization` header.
  public var headerValue: String {
    switch self {
    case .basic(let credentials):
      "Basic " + Data("\(credentials.user.rawValue):\(credentials.apiKey)".utf8).base64EncodedString()
    case .bearer(let token):
      "Bearer \(token)"
    }
  }
}

/// Why an endpoint asks its ``CredentialsProvider`` for credentials.
public enum CredentialsRequest: Sendable, Hashable {
  /// Before a request: the credentials to send now. Asked before every request, so a provider answers from
  /// what it holds while that is valid (a token refreshed ahead of its expiry, say).
  case current
  /// The server refused `refused` (`401`): fresh credentials, such as a token refreshed with the identity
  /// provider. Asked once per refusal, never by two requests at once (the endpoint's requests refused
  /// together wait for one answer); a request refused again with the fresh ones fails as `UNAUTHORIZED`,
  /// and the machine stops with ``StopReason/unauthorized(message:)``.
  case refresh(refused: HTTPAuthorization)
}

/// Where an ``HTTPEndpoint`` (and so a ``URLSessionTransport``) gets the credentials it sends: an async
/// closure asked before every request, and asked to refresh them once after a `401`.
///
/// A provider that throws ``CredentialsUnavailable`` (the user signed out, the refresh token was revoked)
/// makes the request fail as `UNAUTHORIZED`, which stops the machine until ``UpdateMachine/resume()``; any
/// other error (the identity provider unreachable) is a connection failure, retried with backoff.
///
/// ```swift
/// let credentials = CredentialsProvider { request in
///   switch request {
///   case .current: .bearer(try await session.accessToken())
///   case .refresh: .bearer(try await session.refreshedAccessToken())
///   }
/// }
/// let transport = URLSessionTransport<VideoSnapshot, VideoEvent, VideoCommand>(
///   baseURL: URL(string: "https://sync.example.com")!,
///   credentials: credentials
/// )
/// ```
public struct CredentialsProvider: Sendable {
  private let provide: @Sendable (CredentialsRequest) async throws -> HTTPAuthorization

  /// A provider that answers with `provide`.
  public init(_ provide: @escaping @Sendable (CredentialsRequest) async throws -> HTTPAuthorization) {
    self.provide = provide
  }

  /// Credentials that never change: a refusal stops the machine at once (what a static API key gets).
  public static func fixed(_ authorization: HTTPAuthorization) -> CredentialsProvider {
    CredentialsProvider { _ in authorization }
  }

  /// A user's API key that never changes.
  public static func fixed(_ credentials: HTTPCredentials) -> CredentialsProvider {
    fixed(.basic(credentials))
  }

  /// The provider's answer to `request`.
  public func callAsFunction(_ request: CredentialsRequest) async throws -> HTTPAuthorization {
    try await provide(request)
  }
}

/// What a ``CredentialsProvider`` throws when it has no credentials to give and none will come by waiting:
/// the request fails as `UNAUTHORIZED` and the machine stops.
public struct CredentialsUnavailable: Error, Sendable, Hashable {
  /// Why, for the stop reason shown to the user.
  public var reason: String

  /// Credentials unavailable for `reason`.
  public init(_ reason: String) {
    self.reason = reason
  }
}

/// An endpoint's provider with its refreshes coalesced: requests refused together wait for one refresh,
/// and a request refused with credentials already replaced takes the replacement without asking again.
final class CredentialSource: Sendable {
  let provider: CredentialsProvider
  private struct State {
    /// The refresh under way, by number.
    var refreshing: (number: Int, task: Task<HTTPAuthorization, any Error>)?
    var refreshes = 0
    /// What the last refresh gave, and what it replaced.
    var replaced: (old: HTTPAuthorization, new: HTTPAuthorization)?
  }
  private let state = Mutex(State())

  init(_ provider: CredentialsProvider) {
    self.provider = provider
  }

  /// The credentials to send now.
  func current() async throws(TransportError) -> HTTPAuthorization {
    try await ask(.current)
  }

  /// Fresh credentials after the server refused `refused`; `nil` when the provider has none newer.
  func refreshed(after refused: HTTPAuthorization) async throws(TransportError) -> HTTPAuthorization? {
    enum Step {
      case replacedAlready(HTTPAuthorization)
      case wait(number: Int, task: Task<HTTPAuthorization, any Error>, isOwn: Bool)
    }
    let step = state.withLock { state -> Step in
      if let replaced = state.replaced, replaced.old == refused { return .replacedAlready(replaced.new) }
      if let refreshing = state.refreshing {
        return .wait(number: refreshing.number, task: refreshing.task, isOwn: false)
      }
      state.refreshes += 1
      let provider = provider
      let task = Task { try await provider(.refresh(refused: refused)) }
      state.refreshing = (state.refreshes, task)
      return .wait(number: state.refreshes, task: task, isOwn: true)
    }
    let number: Int
    let task: Task<HTTPAuthorization, any Error>
    let isOwn: Bool
    switch step {
    case .replacedAlready(let fresh): return fresh
    case .wait(let waitedNumber, let waitedTask, let own): (number, task, isOwn) = (waitedNumber, waitedTask, own)
    }
    let outcome = await task.result
    if isOwn {
      state.withLock { state in
        if state.refreshing?.number == number { state.refreshing = nil }
        if case .success(let fresh) = outcome { state.replaced = (refused, fresh) }
      }
    }
    switch outcome {
    case .success(let fresh): return fresh == refused ? nil : fresh
    case .failure(let error): throw Self.transportError(for: error)
    }
  }

  private func ask(_ request: CredentialsRequest) async throws(TransportError) -> HTTPAuthorization {
    do {
      return try await provider(request)
    } catch {
      throw Self.transportError(for: error)
    }
  }

  /// How a provider's failure counts: unavailable stops the machine, cancelled is cancelled, anything else
  /// is retried as a connection failure.
  static func transportError(for error: any Error) -> TransportError {
    if let unavailable = error as? CredentialsUnavailable {
      return .api(.unauthorized("no credentials: \(unavailable.reason)"))
    }
    if error is CancellationError { return .cancelled }
    return .connectionFailed("the credentials provider failed: \(error)")
  }
}
