import Foundation
import Synchronization

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// The session delegate that refuses every authentication challenge, so a `401` reaches the caller as a
/// `401`.
///
/// The credentials go in the `Authorization` header of every request; a server that refuses them answers
/// `401` with `WWW-Authenticate: Basic …`, as RFC 7235 asks and `event-server` and Zulip do. Foundation
/// takes that header as a challenge for the session to answer. On Linux (swift-corelibs-foundation) a
/// session without a delegate and without a stored credential never answers it: the request neither
/// completes nor times out, and a wrong API key looked like a network that never comes back. Here every
/// challenge is cancelled at once and its task remembered; `CancellableDataTask` turns the cancellation of
/// a challenged task into the `401` it was (`UNAUTHORIZED`), so the engine stops with
/// `StopReason.unauthorized` instead of retrying for ever.
final class ChallengeRefuser: NSObject, URLSessionTaskDelegate, Sendable {
  private let challenged = Mutex<Set<Int>>([])

  func urlSession(
    _ session: URLSession,
    task: URLSessionTask,
    didReceive challenge: URLAuthenticationChallenge,
    completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
  ) {
    let identifier = task.taskIdentifier
    challenged.withLock { _ = $0.insert(identifier) }
    completionHandler(.cancelAuthenticationChallenge, nil)
  }

  /// Whether the task with this identifier ended because its challenge was refused (asked once: the mark
  /// is removed).
  func wasChallenged(_ taskIdentifier: Int) -> Bool {
    challenged.withLock { $0.remove(taskIdentifier) != nil }
  }

  /// The answer a refused challenge stands for: `401 UNAUTHORIZED`, with an API error body.
  static func unauthorized(for url: URL?) -> (Data, URLResponse) {
    let body = Data(
      #"{"result":"error","code":"UNAUTHORIZED","msg":"the server refused the credentials (HTTP 401)"}"#.utf8
    )
    let response = HTTPURLResponse(
      url: url ?? URL(string: "http://localhost")!,
      statusCode: 401,
      httpVersion: "HTTP/1.1",
      headerFields: ["Content-Type": "application/json"]
    )!
    return (body, response)
  }
}
