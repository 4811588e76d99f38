import EventProtocol
import Foundation
import SampleApps
import Synchronization
import UpdateMachine

/// `soak-client --lag-write-server A --lag-poll-server B`: the replication lag of a cluster, measured as a
/// client sees it. A long-poll parks on node B; a note is written through node A; the lag is the time
/// from A's acknowledgement to the note reaching the poll on B (0 when it arrived first). Repeated
/// `--lag-samples` times; prints the median, the 99th percentile and the largest.
final class LagProbe: Sendable {
  let writeServer: URL
  let pollServer: URL
  let user: UserID
  let key: String
  let samples: Int

  init?(_ arguments: SoakClientArguments) {
    guard let write = arguments.lagWriteServer.flatMap(URL.init(string:)),
      let poll = arguments.lagPollServer.flatMap(URL.init(string:))
    else { return nil }
    writeServer = write
    pollServer = poll
    user = UserID(arguments.user)
    key = arguments.key
    samples = arguments.lagSamples
  }

  private let retries = Mutex(0)

  /// Runs `request`, trying again every 200 ms for up to 30 s while it fails for a reason a client retries
  /// (a node briefly answering 503 after the database came back, say); counts the retries.
  private func retrying<T>(_ request: () async throws(TransportError) -> T) async throws(TransportError) -> T {
    let started = ContinuousClock.now
    while true {
      do {
        return try await request()
      } catch  where error.isRetried && ContinuousClock.now - started < .seconds(30) {
        retries.withLock { $0 += 1 }
        try? await Task.sleep(for: .milliseconds(200))
      }
    }
  }

  func run() async -> (String, Bool) {
    let credentials = HTTPCredentials(user: user, apiKey: key)
    let writer = URLSessionTransport<NoteSnapshot, NoteEvent, NoteBoard.Command>(
      baseURL: writeServer,
      credentials: credentials
    )
    let poller = URLSessionTransport<NoteSnapshot, NoteEvent, NoteBoard.Command>(
      baseURL: pollServer,
      credentials: credentials
    )
    do {
      let registration = try await retrying { () async throws(TransportError) in
        try await poller.register(eventTypes: ["note"], lifespan: nil, clientID: nil)
      }
      var finger = EventFinger(queueID: registration.queueID, lastEventID: registration.lastEventID)
      var lags: [Duration] = []
      let clientID = ClientID(rawValue: "lag-\(UInt32.random(in: 0...UInt32.max))")
      for number in 1...samples {
        let text = "lag-\(number)"
        let parked = Task { [finger] in
          let events = try await retrying { () async throws(TransportError) in
            try await poller.poll(after: finger, dontBlock: false, limit: nil)
          }
          return (events, ContinuousClock.now)
        }
        // Give the poll time to park on B before writing (a poll that has not parked yet answers at once
        // with the note, which would measure nothing but the poll's own round trip).
        try await Task.sleep(for: .milliseconds(20))
        let request = MutationRequest(
          clientID: clientID,
          mutationID: MutationID(rawValue: UInt64(number)),
          mutation: NoteBoard.Command.post(text, to: [user])
        )
        _ = try await retrying { () async throws(TransportError) in try await writer.submit(request, queueID: nil) }
        let acknowledged = ContinuousClock.now
        let (events, arrived) = try await parked.value
        guard let last = events.last else { throw TransportError.connectionFailed("the poll ended without the note") }
        finger.lastEventID = last.id
        lags.append(max(.zero, arrived - acknowledged))
        if number % 50 == 0 { FileHandle.standardError.write(Data("lag-probe: \(number) of \(samples)\n".utf8)) }
      }
      try? await poller.deleteQueue(registration.queueID)
      lags.sort()
      func milliseconds(_ duration: Duration) -> String {
        String(
          format: "%.2f ms",
          Double(duration.components.attoseconds) / 1e15 + Double(duration.components.seconds) * 1000
        )
      }
      let p50 = lags[lags.count / 2]
      let p99 = lags[min(lags.count - 1, lags.count * 99 / 100)]
      let retried = retries.withLock { $0 }
      return (
        "lag-probe: \(lags.count) writes on \(writeServer.absoluteString), polled on \(pollServer.absoluteString): "
          + "p50 \(milliseconds(p50)), p99 \(milliseconds(p99)), max \(milliseconds(lags.last!)); "
          + "requests retried \(retried)", true
      )
    } catch {
      return ("lag-probe: failed: \(error)", false)
    }
  }
}

extension TransportError {
  /// Whether a client tries the request again (the server or the connection failed; not an API answer).
  fileprivate var isRetried: Bool {
    switch kind {
    case .connectionFailed, .timedOut, .serverError: true
    case .api, .cancelled: false
    }
  }
}
