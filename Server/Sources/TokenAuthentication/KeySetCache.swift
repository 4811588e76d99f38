import EventHTTPServer
import EventProtocol
import Logging

/// The key set in use and its fetches: performs what ``KeySetSchedule`` decides, one fetch at a time, and
/// decides nothing itself.
actor KeySetCache {
  /// The keys to verify a token with, or why there are none for it.
  enum Answer: Sendable {
    case keys(VerifyingKeys)
    case refused(AuthenticationRefusal)
    case unavailable(String)
  }

  private var schedule: KeySetSchedule
  private var keys: VerifyingKeys?
  /// The fetch under way, when ``schedule`` is fetching.
  private var fetch: Task<Void, Never>?
  private let source: KeySetSource
  private let logger: Logger
  private let now: @Sendable () -> Timestamp

  init(source: KeySetSource, policy: KeySetSchedule.Policy, logger: Logger, now: @escaping @Sendable () -> Timestamp) {
    self.schedule = KeySetSchedule(policy: policy)
    self.source = source
    self.logger = logger
    self.now = now
  }

  /// The keys for a token with `header`, fetching them first when the schedule says so.
  func keys(for header: TokenHeader) async -> Answer {
    switch schedule.tokenArrived(keyKnown: keys?.keyID(for: header) != nil, now: now()) {
    case .fetchThenAsk:
      if fetch == nil { startFetch() }
      await fetch?.value
      return answer(schedule.askedAgain(keyKnown: keys?.keyID(for: header) != nil))
    case .verifyAndRefresh:
      if fetch == nil { startFetch() }
      return answer(.verify)
    case let decision:
      return answer(decision)
    }
  }

  private func answer(_ decision: KeySetSchedule.Decision) -> Answer {
    switch decision {
    case .verify, .verifyAndRefresh:
      guard let keys else { preconditionFailure("KeySetCache: the schedule said verify with no keys loaded") }
      return .keys(keys)
    case .refuseUnknownKey: return .refused(.tokenUnknownKey)
    case .unavailable, .fetchThenAsk: return .unavailable("the keys that verify tokens could not be loaded yet")
    }
  }

  private func startFetch() {
    let source = source
    fetch = Task {
      let loaded: Result<VerifyingKeys, KeySetError>
      do {
        loaded = .success(try await VerifyingKeys(jwks: try await source.read()))
      } catch let error as KeySetError {
        loaded = .failure(error)
      } catch {
        loaded = .failure(KeySetError("reading \(source.description) failed: \(type(of: error))"))
      }
      self.fetchEnded(loaded)
    }
  }

  private func fetchEnded(_ loaded: Result<VerifyingKeys, KeySetError>) {
    switch loaded {
    case .success(let fresh):
      keys = fresh
      schedule.fetchEnded(succeeded: true, now: now())
      logger.debug(
        "token keys loaded",
        metadata: ["source": "\(source.description)", "keys": "\(fresh.declared.count)"]
      )
    case .failure(let error):
      schedule.fetchEnded(succeeded: false, now: now())
      logger.warning(
        "token keys could not be loaded",
        metadata: ["source": "\(source.description)", "error": "\(error)", "in_use": "\(keys?.declared.count ?? 0)"]
      )
    }
    fetch = nil
  }
}
