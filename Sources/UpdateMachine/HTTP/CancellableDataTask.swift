import Dispatch
import Foundation
import Synchronization

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// Runs one `URLSessionDataTask` as an async call that ends when its task is cancelled, without
/// `URLSession.data(for:)`.
///
/// On Linux (swift-corelibs-foundation, Swift 6.3.1), cancelling many `data(for:)` calls at once can
/// deadlock (swift-corelibs-foundation issue 5412). Here the task is a plain `dataTask` with a completion
/// handler; cancellation cancels it from another queue, never from inside the cancelling task's own
/// locks; and a cancellation that comes before the task starts ends the call without starting it.
/// `URLSessionTransportTests.cancelStorm` runs such a storm many times under a time limit.
///
/// A body is sent as a stream that can be given again (`BodyStreamProvider`), never as `httpBody`: when a
/// server closes a reused keep-alive connection just as a request goes out on it, libcurl retries the
/// request on a fresh connection and asks Foundation to rewind the body. For an `httpBody` FoundationNetworking
/// answers that it rewound without doing it, so the retry announced `Content-Length` and sent no body, and
/// the server waited for it until the request's deadline (about one write in 300 stalled for 30 s). For a
/// stream it asks the task's delegate for a new one, which works. The cost: bodies go out chunked
/// (`Transfer-Encoding: chunked`), which every HTTP/1.1 server and proxy accepts.
/// `RetriedBodyTests` reproduces the retry against a real socket.
final class CancellableDataTask: Sendable {
  private enum Stage {
    case notStarted
    case running(TaskHandle)
    case cancelled
  }

  private let stage = Mutex(Stage.notStarted)

  /// Runs `request` on `session`.
  /// - Parameter refuser: The session's delegate, when it refuses authentication challenges: a task ended
  ///   by a refused challenge returns the `401` it was.
  /// - Returns: The body and the response.
  /// - Throws: The `URLError` the task ended with; `URLError(.cancelled)` when the calling task was cancelled.
  func run(
    _ request: URLRequest,
    on session: URLSession,
    refusing refuser: ChallengeRefuser? = nil
  ) async throws -> (Data, URLResponse) {
    try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<(Data, URLResponse), any Error>) in
        // Set before the task starts, so the completion handler always finds it.
        let identifier = Mutex<Int?>(nil)
        // A body goes as a stream the delegate can give again (see above).
        var streamed = request
        let bodyProvider = request.httpBody.map { body in
          streamed.httpBody = nil
          streamed.httpBodyStream = InputStream(data: body)
          return BodyStreamProvider(body: body, refuser: refuser)
        }
        let task = session.dataTask(with: streamed) { data, response, error in
          if error != nil, let refuser, let id = identifier.withLock({ $0 }), refuser.wasChallenged(id) {
            continuation.resume(returning: ChallengeRefuser.unauthorized(for: request.url))
          } else if let error {
            continuation.resume(throwing: error)
          } else if let response {
            continuation.resume(returning: (data ?? Data(), response))
          } else {
            continuation.resume(throwing: URLError(.badServerResponse))
          }
        }
        identifier.withLock { $0 = task.taskIdentifier }
        if let bodyProvider { task.delegate = bodyProvider }
        // Started under the lock, so a cancellation either finds it running (and cancels it) or comes first
        // (and it never starts: its completion handler never runs, so the continuation is resumed here). The
        // handle is made under the lock too, since the lock is what hands it to the cancelling thread
        // (ThreadSanitizer sees no `Mutex`: .ci/tsan-suppressions.txt).
        let started = stage.withLock { stage -> Bool in
          guard case .notStarted = stage else { return false }
          let handle = TaskHandle(task)
          stage = .running(handle)
          handle.task.resume()
          return true
        }
        if !started { continuation.resume(throwing: URLError(.cancelled)) }
      }
    } onCancel: {
      let running = stage.withLock { stage -> TaskHandle? in
        defer { stage = .cancelled }
        if case .running(let handle) = stage { return handle }
        return nil
      }
      // Cancelled from another queue: never inside a lock the session may hold while calling back.
      if let running { DispatchQueue.global().async { running.task.cancel() } }
    }
  }
}

/// A `URLSessionTask` passed between the starting and the cancelling thread.
///
/// `@unchecked Sendable` is safe here: the reference is immutable (`let`), and the only members used from
/// more than one thread are `resume()` (called once, under `CancellableDataTask`'s lock) and `cancel()`
/// (called at most once, from the cancellation handler's dispatch queue). `URLSessionTask` documents both
/// as callable from any thread, and swift-corelibs-foundation guards the task's state with its own lock and
/// work queue. A `Mutex` cannot replace this: the task would still have to cross to the queue that cancels
/// it, and `URLSessionTask` is not `Sendable` on Linux.
private final class TaskHandle: @unchecked Sendable {
  let task: URLSessionTask

  init(_ task: URLSessionTask) {
    self.task = task
  }
}

/// The delegate of a task with a body: gives the body again, from its start, whenever libcurl retries the
/// request; refuses authentication challenges as the session's delegate does (a task's own delegate takes
/// the session's place).
///
/// `Sendable`: both stored properties are immutable and `Sendable`.
final class BodyStreamProvider: NSObject, URLSessionTaskDelegate, Sendable {
  let body: Data
  let refuser: ChallengeRefuser?

  init(body: Data, refuser: ChallengeRefuser?) {
    self.body = body
    self.refuser = refuser
  }

  func urlSession(
    _ session: URLSession,
    task: URLSessionTask,
    needNewBodyStream completionHandler: @escaping @Sendable (InputStream?) -> Void
  ) {
    completionHandler(InputStream(data: body))
  }

  func urlSession(
    _ session: URLSession,
    task: URLSessionTask,
    didReceive challenge: URLAuthenticationChallenge,
    completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
  ) {
    if let refuser {
      refuser.urlSession(session, task: task, didReceive: challenge, completionHandler: completionHandler)
    } else {
      completionHandler(.performDefaultHandling, nil)
    }
  }
}
