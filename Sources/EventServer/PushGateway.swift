import EventProtocol
import Synchronization

/// Where an ``EventServer`` sends push notifications: APNs, FCM, or a log. The server decides whom to push
/// and what (see ``PushRegistry``); a gateway only delivers.
///
/// An APNs or FCM sender implements ``send(_:)`` with the platform's HTTP/2 API and answers
/// ``PushDelivery/tokenInvalid`` when the platform says the token is gone (APNs `410 Unregistered`, FCM
/// `UNREGISTERED`), so the server stops pushing to it. The `Server/` package's `PushSenders` module has
/// both.
///
/// ```swift
/// let gateway = InMemoryPushGateway()
/// let server = EventServer(application: app, configuration: .init(), clock: clock, pushGateway: gateway)
/// ```
public protocol PushGateway: Sendable {
  /// Delivers one push.
  /// - Returns: Whether the platform accepted it, or said the token is no longer valid.
  func send(_ push: PushNotification) async -> PushDelivery
}

/// What a ``PushGateway`` learned from the platform.
public enum PushDelivery: Sendable, Hashable {
  /// Handed to the platform (which may still lose it: pushes are not guaranteed).
  case accepted
  /// The platform said the token is no longer valid; the server drops it.
  case tokenInvalid
  /// Not delivered, the token kept: the platform refused this push (too large, a wrong topic) or was still
  /// failing when the sender's retries ran out. The next event brings a new push.
  case failed(String)
}

/// A gateway that sends nothing: the default when a server has no push set up.
public struct NoPushGateway: PushGateway {
  /// Creates the gateway.
  public init() {}

  public func send(_ push: PushNotification) async -> PushDelivery { .accepted }
}

/// A gateway that records every push, for tests and the demo; tokens can be marked invalid.
public final class InMemoryPushGateway: PushGateway {
  private struct Contents {
    var sent: [PushNotification] = []
    var invalidTokens: Set<PushToken> = []
    var waiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
  }

  private let contents = Mutex(Contents())

  /// Creates an empty gateway.
  public init() {}

  /// Every push sent so far, oldest first.
  public var sent: [PushNotification] { contents.withLock { $0.sent } }

  /// Makes later pushes to `token` answer ``PushDelivery/tokenInvalid``.
  public func invalidate(_ token: PushToken) {
    contents.withLock { _ = $0.invalidTokens.insert(token) }
  }

  public func send(_ push: PushNotification) async -> PushDelivery {
    let (delivery, ready) = contents.withLock { contents -> (PushDelivery, [CheckedContinuation<Void, Never>]) in
      if contents.invalidTokens.contains(push.token) { return (.tokenInvalid, []) }
      contents.sent.append(push)
      let count = contents.sent.count
      let ready = contents.waiters.filter { $0.count <= count }.map(\.continuation)
      contents.waiters.removeAll { $0.count <= count }
      return (.accepted, ready)
    }
    for waiter in ready { waiter.resume() }
    return delivery
  }

  /// Suspends until at least `count` pushes were sent: pushes go out from a task of their own.
  public func waitForPushes(count: Int) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      let done = contents.withLock { contents -> Bool in
        if contents.sent.count >= count { return true }
        contents.waiters.append((count, continuation))
        return false
      }
      if done { continuation.resume() }
    }
  }
}
