import EventProtocol

/// A structured event from an ``UpdateMachine``, for an app's logs. Nothing is logged unless the app
/// passes a `log` function when it makes the machine.
///
/// ```swift
/// import os
/// let logger = Logger(subsystem: "com.example.app", category: "sync")
/// let machine = UpdateMachine(reducer: r, transport: t, store: s, log: { event in
///   logger.debug("\(event.description, privacy: .public)")
/// })
/// ```
public enum UpdateMachineLogEvent: Sendable, Equatable, CustomStringConvertible {
  /// The persisted record was read: the finger it held, how many writes it held, what had to be done.
  case loaded(finger: EventFinger?, pendingWrites: Int, recovery: [StoreRecovery])
  /// The phase changed.
  case phaseChanged(from: Phase, to: Phase)
  /// A request was sent.
  case requestSent(RequestID, RequestKind)
  /// A request was answered successfully.
  case requestSucceeded(RequestID, RequestKind)
  /// A request failed, and how the failure counts.
  case requestFailed(RequestID, RequestKind, TransportError, FailureKind)
  /// A request was cancelled (background, a push, a deadline, a stop).
  case requestCancelled(RequestID)
  /// The whole record was saved.
  case saved(bytes: Int)
  /// A save appended one entry of `events` events to the journal instead of writing the whole record.
  case journaled(bytes: Int, events: Int)
  /// Saving failed; the old file is intact and the save will be retried.
  case saveFailed(PersistenceError)
  /// The outbox changed: writes pending and refused.
  case outboxChanged(pending: Int, rejected: Int)
  /// The outbox took a new client id (the server said the old one's mutation ids were reused).
  case clientIDChanged(ClientID)

  /// What a request was for.
  public enum RequestKind: Sendable, Equatable, CustomStringConvertible {
    /// A register request.
    case register
    /// A poll on `finger`.
    case poll(EventFinger, dontBlock: Bool)
    /// Mutations from the outbox, in one request.
    case submit([MutationID])
    /// A fetch of a page of partial state.
    case fetch(FetchRequest)

    public var description: String {
      switch self {
      case .register: "register"
      case .poll(let finger, let dontBlock): "poll \(finger)\(dontBlock ? " (dont_block)" : "")"
      case .submit(let ids) where ids.count == 1: "submit \(ids[0])"
      case .submit(let ids):
        "submit \(ids.first.map(String.init(describing:)) ?? "")…\(ids.last.map(String.init(describing:)) ?? "") (\(ids.count))"
      case .fetch(let request): "fetch \(request)"
      }
    }
  }

  public var description: String {
    switch self {
    case .loaded(let finger, let pending, let recovery):
      "loaded: finger \(finger.map(\.description) ?? "none"), \(pending) pending writes"
        + (recovery.isEmpty ? "" : ", " + recovery.map(\.description).joined(separator: "; "))
    case .phaseChanged(let from, let to): "phase \(from) → \(to)"
    case .requestSent(let id, let kind): "\(id) \(kind) sent"
    case .requestSucceeded(let id, let kind): "\(id) \(kind) succeeded"
    case .requestFailed(let id, let kind, let error, let failure): "\(id) \(kind) failed (\(failure)): \(error)"
    case .requestCancelled(let id): "\(id) cancelled"
    case .saved(let bytes): "saved \(bytes) bytes"
    case .journaled(let bytes, let events): "journaled \(events) events in \(bytes) bytes"
    case .saveFailed(let error): "save failed: \(error)"
    case .outboxChanged(let pending, let rejected): "outbox: \(pending) pending, \(rejected) refused"
    case .clientIDChanged(let clientID): "new client id \(clientID)"
    }
  }
}
