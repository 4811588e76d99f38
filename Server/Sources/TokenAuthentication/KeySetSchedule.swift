import EventProtocol

/// When the verifying keys are fetched again: the first token fetches them, a key set older than
/// ``Policy/refreshInterval`` is refreshed in the background while it stays in use, a token naming a key
/// the set lacks fetches it again at most once per ``Policy/unknownKeyInterval`` (an issuer's rotation is
/// picked up at once, a flood of made-up key ids costs one fetch), and a failed fetch is retried after
/// ``Policy/retryInterval`` while the last good set stays in use.
///
/// A pure machine: each token's arrival and each fetch's end go in with `now`; what to do comes out.
///
/// ```swift
/// var schedule = KeySetSchedule(policy: .init())
/// schedule.tokenArrived(keyKnown: false, now: t0)  // .fetchThenAsk: no keys yet
/// schedule.fetchEnded(succeeded: true, now: t0)
/// schedule.tokenArrived(keyKnown: true, now: t0)   // .verify
/// ```
public struct KeySetSchedule: Sendable, Equatable {
  /// How often keys are fetched.
  public struct Policy: Sendable, Equatable {
    /// The age past which a key set in use is fetched again in the background.
    public var refreshInterval: Duration = .seconds(300)
    /// The shortest time between two fetches started by tokens that name an unknown key.
    public var unknownKeyInterval: Duration = .seconds(30)
    /// The wait before a failed fetch is tried again.
    public var retryInterval: Duration = .seconds(5)

    /// The defaults: refresh every 5 minutes, unknown keys at most every 30 s, retry after 5 s.
    public init() {}
  }

  /// What the shell does with a token, or after a fetch.
  public enum Decision: Equatable, Sendable {
    /// Verify the token with the key set in use.
    case verify
    /// Verify the token with the key set in use, and fetch the set again in the background.
    case verifyAndRefresh
    /// Fetch the key set (or wait for the fetch under way), then ask again.
    case fetchThenAsk
    /// Refuse the token: its key is not in the set, which was fetched too recently to fetch again.
    case refuseUnknownKey
    /// Answer that tokens cannot be checked now: no key set has been loaded, and the last fetch failed
    /// less than ``Policy/retryInterval`` ago.
    case unavailable
  }

  private enum State: Equatable, Sendable {
    /// No key set has been loaded; the last fetch failed at `lastFailure`, if one was tried.
    case empty(lastFailure: Timestamp?)
    /// A fetch started at `started` is under way; the set loaded at `keysLoadedAt` stays in use meanwhile.
    case fetching(started: Timestamp, keysLoadedAt: Timestamp?)
    /// The set in use was loaded at `loadedAt`; the last fetch started at `lastFetchStarted`.
    case loaded(loadedAt: Timestamp, lastFetchStarted: Timestamp)
  }

  private var state: State = .empty(lastFailure: nil)
  /// How often keys are fetched.
  public let policy: Policy

  /// A schedule with no key set loaded.
  public init(policy: Policy) {
    self.policy = policy
  }

  /// Whether a fetch is under way (the shell's fetch is to be awaited, not started again).
  public var isFetching: Bool {
    if case .fetching = state { true } else { false }
  }

  /// A token arrived whose `kid` is (`keyKnown`) or is not in the key set in use.
  /// - Returns: What to do with it; ``Decision/fetchThenAsk`` and ``Decision/verifyAndRefresh`` start a
  ///   fetch unless one is under way.
  public mutating func tokenArrived(keyKnown: Bool, now: Timestamp) -> Decision {
    switch state {
    case .empty(let lastFailure):
      if let lastFailure, now < lastFailure.advanced(by: policy.retryInterval) { return .unavailable }
      state = .fetching(started: now, keysLoadedAt: nil)
      return .fetchThenAsk
    case .fetching(_, let keysLoadedAt):
      return keyKnown && keysLoadedAt != nil ? .verify : .fetchThenAsk
    case .loaded(let loadedAt, let lastFetchStarted):
      if !keyKnown {
        guard now >= lastFetchStarted.advanced(by: policy.unknownKeyInterval) else { return .refuseUnknownKey }
        state = .fetching(started: now, keysLoadedAt: loadedAt)
        return .fetchThenAsk
      }
      let stale = now >= loadedAt.advanced(by: policy.refreshInterval)
      guard stale, now >= lastFetchStarted.advanced(by: policy.retryInterval) else { return .verify }
      state = .fetching(started: now, keysLoadedAt: loadedAt)
      return .verifyAndRefresh
    }
  }

  /// A token arrived after the fetch it waited for ended: verify it if its key is now known, else refuse
  /// it (unknown key, or no keys at all). Never starts another fetch.
  public func askedAgain(keyKnown: Bool) -> Decision {
    switch state {
    case .empty, .fetching(_, keysLoadedAt: nil): .unavailable
    case .fetching, .loaded: keyKnown ? .verify : .refuseUnknownKey
    }
  }

  /// The fetch under way ended: its set is now in use, or the previous one stays.
  public mutating func fetchEnded(succeeded: Bool, now: Timestamp) {
    guard case .fetching(let started, let keysLoadedAt) = state else {
      preconditionFailure("KeySetSchedule: a fetch ended in \(state), with none under way")
    }
    if succeeded {
      state = .loaded(loadedAt: now, lastFetchStarted: started)
    } else if let keysLoadedAt {
      state = .loaded(loadedAt: keysLoadedAt, lastFetchStarted: started)
    } else {
      state = .empty(lastFailure: now)
    }
  }
}
