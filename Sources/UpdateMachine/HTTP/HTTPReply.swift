import EventProtocol
import Foundation

/// How an HTTP answer becomes a reply or a typed ``TransportError``.
enum HTTPReply {
  /// Decodes an answer with status `status`.
  ///
  /// - 2xx: the body must be a Zulip-shaped JSON success (an error body there is its API error; anything
  ///   else, such as an HTML page, is `MALFORMED_RESPONSE`).
  /// - 429: `RATE_LIMIT_HIT`, with the body's `retry-after` or else the `Retry-After` header (seconds).
  /// - 5xx: a server error, whatever the body.
  /// - 401: the body's error when it is one, else `UNAUTHORIZED`.
  /// - Other 4xx: the body's API error when it is one, else `MALFORMED_RESPONSE` naming the status.
  /// - A body over `maximumBodySize`: `MALFORMED_RESPONSE`.
  static func decode<Reply: Decodable>(
    _ type: Reply.Type,
    status: Int,
    retryAfterHeader: String?,
    body: Data,
    maximumBodySize: Int
  ) throws(TransportError) -> Reply {
    if (500...599).contains(status) { throw .serverError(status: status) }
    guard body.count <= maximumBodySize else {
      throw .api(.malformedResponse("a body of \(body.count) bytes, over the \(maximumBodySize)-byte limit"))
    }
    if status == 429 {
      let fromBody = apiError(in: body).flatMap { $0.code == .rateLimitHit ? $0 : nil }
      if let fromBody, fromBody.retryAfter != nil { throw .api(fromBody) }
      let seconds = retryAfterHeader.flatMap { Double($0.trimmingCharacters(in: .whitespaces)) }
      throw .api(.rateLimitHit(retryAfter: seconds.map { .milliseconds(Int64(($0 * 1000).rounded())) }))
    }
    if (200...299).contains(status) {
      do {
        return try WireFormat.decode(Reply.self, from: body)
      } catch {
        throw .api(error)
      }
    }
    if let error = apiError(in: body) { throw .api(error) }
    if status == 401 { throw .api(.unauthorized("HTTP 401 without an error body")) }
    throw .api(.malformedResponse("HTTP \(status) with a body that is not an API error"))
  }

  /// The API error a body carries, if it is a well-formed Zulip error body.
  private static func apiError(in body: Data) -> EventAPIError? {
    do {
      _ = try WireFormat.decode(Ignored.self, from: body)
      return nil
    } catch {
      return error.code == .malformedResponse ? nil : error
    }
  }

  private struct Ignored: Decodable {}
}

/// `application/x-www-form-urlencoded` bodies, as Zulip's register takes.
enum HTTPForm {
  /// The fields, percent-encoded (everything but `A-Z a-z 0-9 - . _ ~`), joined with `&`.
  static func encode(_ fields: [(String, String)]) -> String {
    fields.map { "\(escape($0.0))=\(escape($0.1))" }.joined(separator: "&")
  }

  private static let unreserved = CharacterSet(
    charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"
  )

  private static func escape(_ text: String) -> String {
    text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? ""
  }
}
