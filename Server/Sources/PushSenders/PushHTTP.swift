import AsyncHTTPClient
import EventServer
import Foundation
import Logging
import NIOCore
import NIOHTTP1

/// One HTTP exchange of a push sender: a POST with a deadline, the answer's status, headers (names in
/// lower case) and body (at most 64 KiB: platform answers are small).
enum PushHTTP {
  struct Answer: Sendable {
    var status: Int
    var headers: [String: String]
    var body: Data
  }

  static func post(
    _ url: String,
    headers: [String: String],
    body: Data,
    timeout: Duration,
    on client: HTTPClient
  ) async throws -> Answer {
    var request = HTTPClientRequest(url: url)
    request.method = .POST
    for (name, value) in headers.sorted(by: { $0.key < $1.key }) { request.headers.add(name: name, value: value) }
    request.body = .bytes(ByteBuffer(bytes: body))
    let milliseconds = Int64(timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
    let response = try await client.execute(request, timeout: .milliseconds(milliseconds))
    var answerHeaders: [String: String] = [:]
    for header in response.headers where answerHeaders[header.name.lowercased()] == nil {
      answerHeaders[header.name.lowercased()] = header.value
    }
    let bytes = try await response.body.collect(upTo: 64 * 1024)
    return Answer(status: Int(response.status.code), headers: answerHeaders, body: Data(bytes.readableBytesView))
  }
}

/// The loop every sender runs for one push: send, read the answer, and follow ``PushRetryPolicy``.
enum PushAttempts {
  /// Sends until the policy finishes; `send` is told when to renew its credentials first. A push given up
  /// is logged.
  static func run(
    policy: PushRetryPolicy,
    environment: PushSenderEnvironment,
    logger: Logger,
    platform: String,
    send: (_ renewCredentials: Bool) async -> PushAnswer
  ) async -> PushDelivery {
    let delivery = await attempts(policy: policy, environment: environment, send: send)
    if case .failed(let reason) = delivery {
      logger.warning("push not delivered", metadata: ["platform": "\(platform)", "reason": "\(reason)"])
    }
    return delivery
  }

  private static func attempts(
    policy: PushRetryPolicy,
    environment: PushSenderEnvironment,
    send: (_ renewCredentials: Bool) async -> PushAnswer
  ) async -> PushDelivery {
    var attempt = 1
    var renew = false
    while true {
      let answer = await send(renew)
      renew = false
      switch policy.step(after: answer, attempt: attempt) {
      case .finish(let delivery):
        return delivery
      case .wait(let duration):
        do { try await environment.sleep(duration) } catch { return .failed("cancelled while waiting to retry") }
      case .renewCredentials:
        renew = true
      }
      attempt += 1
    }
  }
}
