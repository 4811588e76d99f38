import EventProtocol
import EventServer
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import Synchronization

/// Turns what a route produced into an HTTP response: a JSON success body, or an API error with Zulip's
/// status (400, 401, 413, 429 with `Retry-After`) and its JSON body.
///
/// Answers never carry internals: an error the routes did not make (NIO's, Foundation's, a decoder's) is
/// answered with a stable message and logged here with its detail.
public enum HTTPAnswer {
  /// Where the detail of an error answered with a stable message goes.
  static let logger = Logger(label: "event-server.http")

  /// What a route handler can fail with besides an API error.
  public struct Refusal: Error {
    /// The status to answer with.
    public var status: HTTPResponse.Status
    /// The API error in the body.
    public var error: EventAPIError

    /// A refusal with this status and error.
    public init(status: HTTPResponse.Status, error: EventAPIError) {
      self.status = status
      self.error = error
    }
  }

  /// Runs `body`, answering with its success body or with the error it threw.
  public static func run(_ body: () async throws -> Data) async -> Response {
    Response(await plain(body))
  }

  /// ``plain(_:)`` for a body that does not suspend.
  static func plainNow(_ body: () throws -> Data) -> PlainAnswer {
    do {
      return PlainAnswer(status: .ok, body: try body())
    } catch {
      let (status, apiError) = answer(to: error)
      return plainFailure(apiError, status: status)
    }
  }

  /// Runs `body`, answering with its success body or with the error it threw, as a ``PlainAnswer`` that any
  /// HTTP stack can write (the lean poll listener writes it with NIO's own types).
  static func plain(_ body: () async throws -> Data) async -> PlainAnswer {
    do {
      return PlainAnswer(status: .ok, body: try await body())
    } catch {
      let (status, apiError) = answer(to: error)
      return plainFailure(apiError, status: status)
    }
  }

  /// The status and API error a failure is answered with. A `5xx` always carries `SERVICE_UNAVAILABLE` (send
  /// again later), never a code that tells the client to drop the request.
  static func answer(to error: any Error) -> (HTTPResponse.Status, EventAPIError) {
    switch error {
    case let error as EventAPIError:
      return (status(of: error), error)
    case is ServerLogError:
      // The input log cannot make writes durable: nothing was acknowledged; the client retries later.
      return (.serviceUnavailable, storeUnavailable)
    case let refusal as Refusal:
      return (refusal.status, refusal.error)
    case is NIOTooManyBytesError:
      return (.contentTooLarge, .badRequest(tooLarge))
    case let error as any HTTPResponseError where error.status == .contentTooLarge:
      return (.contentTooLarge, .badRequest(tooLarge))
    case is CancellationError:
      // The client went away (or the server is stopping): nobody reads this answer. Counted as what it is, a
      // request the client closed (nginx's 499), not as a failure of the server (a 5xx would trip alerts).
      return (clientClosedRequest, .serviceUnavailable("the request was cancelled"))
    default:
      logger.warning("a request failed outside the API's errors", metadata: ["error": "\(error)"])
      return (.badRequest, .badRequest("the request could not be read"))
    }
  }

  /// What a write that could not be made durable is answered with: `503 SERVICE_UNAVAILABLE`, retry in a
  /// second. Never `BAD_REQUEST`, which tells a client to drop the write.
  static let storeUnavailable = EventAPIError.serviceUnavailable(
    "the server cannot store writes right now: send the request again later",
    retryAfter: .seconds(1)
  )

  /// The status of a request whose client went away before its answer (nginx's 499): what the metrics count
  /// it as.
  static let clientClosedRequest = HTTPResponse.Status(code: 499, reasonPhrase: "Client Closed Request")

  /// The one message for a body over its route's limit (`docs/protocol.md` gives each limit).
  static let tooLarge = "the request body is over this route's limit"

  /// The HTTP status Zulip gives an API error.
  static func status(of error: EventAPIError) -> HTTPResponse.Status {
    switch error.code {
    case .unauthorized: .unauthorized
    case .rateLimitHit: .tooManyRequests
    case .serviceUnavailable: .serviceUnavailable
    default: .badRequest
    }
  }

  static func failure(_ error: EventAPIError, status: HTTPResponse.Status) -> Response {
    Response(plainFailure(error, status: status))
  }

  static func plainFailure(_ error: EventAPIError, status: HTTPResponse.Status) -> PlainAnswer {
    // A client that went away was refused nothing: its 499 is counted by status only.
    if status != clientClosedRequest { refusalNote?.note(error) }
    var answer = PlainAnswer(
      status: status,
      body: (try? WireFormat.encode(error)) ?? Data(#"{"result":"error","msg":""}"#.utf8)
    )
    if status != clientClosedRequest { answer.refusal = error.code }
    if let retryAfter = error.retryAfter {
      let seconds = max(1, Int((Double(retryAfter / .milliseconds(1)) / 1000).rounded(.up)))
      answer.headers[.retryAfter] = String(seconds)
    }
    if error.code == .unauthorized {
      // RFC 6750's challenge for a refused bearer token; HTTP basic's for everything else.
      answer.headers[.wwwAuthenticate] =
        error.reason?.hasPrefix("TOKEN_") == true
        ? #"Bearer realm="event-server", error="invalid_token""# : #"Basic realm="event-server""#
    }
    return answer
  }
}

/// An answer of the events API before any HTTP stack writes it: its status, its headers and its JSON body.
struct PlainAnswer: Sendable {
  var status: HTTPResponse.Status
  var headers: HTTPFields = [.contentType: "application/json"]
  var body: Data
  /// The API error's code when it refuses the request (what the metrics count; not for a client gone away).
  var refusal: EventAPIError.Code?
}

extension Response {
  /// `answer` as Hummingbird's response.
  init(_ answer: PlainAnswer) {
    self.init(
      status: answer.status,
      headers: answer.headers,
      body: ResponseBody(byteBuffer: ByteBuffer(bytes: answer.body))
    )
  }
}

extension HTTPAnswer {
  /// Where the request being answered notes its API error's code, for the metrics (set by the metrics
  /// middleware around each request).
  @TaskLocal static var refusalNote: RefusalNote?
}

/// The API error code one request was answered with, if any, and the reason credentials were refused.
final class RefusalNote: Sendable {
  private let noted = Mutex<(code: EventAPIError.Code, reason: String?)?>(nil)

  func note(_ error: EventAPIError) { noted.withLock { $0 = (error.code, error.reason) } }

  var code: EventAPIError.Code? { noted.withLock { $0?.code } }

  /// The refusal's reason (`TOKEN_EXPIRED`): a code from a fixed list, never a credential.
  var reason: String? { noted.withLock { $0?.reason } }
}
