import EventProtocol
import EventServer
import Foundation
import HTTPTypes

/// The events route's answers apart from any HTTP stack: Hummingbird's routes (``EventRoutes/add(to:)``) and
/// the lean ``PollListener`` both give them.
extension EventRoutes {
  /// The answer to `GET /api/v1/events` with this `Authorization` header and query string, whatever HTTP
  /// stack carries it (Hummingbird's route, or the lean ``PollListener``'s `dont_block` polls). A long-poll
  /// parks in the event server until events come, its heartbeat, or the task's cancellation (the client went
  /// away). `mark`, when given, hears of the admission instead of the task's ``RequestGate/currentMark``.
  func pollAnswer(authorization: String?, query text: String, mark: AuthenticationMark? = nil) async -> PlainAnswer {
    let isLongPoll = PollQuery.isLongPoll(query: text)
    var answer = await HTTPAnswer.plain {
      let (server, poll) = try await admitPoll(authorization: authorization, query: text, mark: mark)
      do {
        // Answered at once with `dont_block`: the connection stays open for the next request.
        let events = try await server.events(
          queueID: poll.queueID,
          user: poll.user,
          lastEventID: poll.lastEventID,
          dontBlock: poll.dontBlock,
          limit: poll.limit
        )
        return try encode(events, of: poll.queueID)
      } catch is CancellationError where !poll.dontBlock {
        // The server is stopping: the parked poll is answered (empty), and the client polls again later.
        // (A client that went away cancelled it; nobody reads that answer.)
        guard await server.isShuttingDown else { throw CancellationError() }
        return try encode([], of: poll.queueID)
      }
    }
    // A long-poll's connection is closed after its answer (its inbound side is watched for the client going
    // away), so the answer says so: a proxy keeping upstream connections alive (nginx's `keepalive`) must not
    // send its next request on it. Without this nginx reused such connections and logged "upstream
    // prematurely closed connection" (502s reached clients) with no fault at all.
    if isLongPoll { answer.headers[.connection] = "close" }
    return answer
  }

  /// A long-poll of the lean ``PollListener``: as ``pollAnswer(authorization:query:mark:)``, but the answer
  /// comes through `answer` (called once) and the parked poll holds no task, only the callback
  /// (``EventServer/startPoll(queueID:user:lastEventID:dontBlock:limit:answer:)``).
  /// - Returns: What ends the poll when its client goes away; `nil` when it was answered already (refused).
  func startLongPoll(
    authorization: String?,
    query text: String,
    mark: AuthenticationMark?,
    answer: @escaping @Sendable (PlainAnswer) -> Void
  ) async -> (@Sendable () -> Void)? {
    // A long-poll's answer closes its connection (see ``pollAnswer(authorization:query:mark:)``).
    let closing: @Sendable (PlainAnswer) -> Void = { plain in
      var plain = plain
      plain.headers[.connection] = "close"
      answer(plain)
    }
    do {
      let (server, poll) = try await admitPoll(authorization: authorization, query: text, mark: mark)
      let pollID = await server.startPoll(
        queueID: poll.queueID,
        user: poll.user,
        lastEventID: poll.lastEventID,
        dontBlock: poll.dontBlock,
        limit: poll.limit
      ) { result in
        // Called on the event server's executor: the answer is encoded in a task of its own.
        Task { closing(HTTPAnswer.plainNow { try encode(try result.get(), of: poll.queueID) }) }
      }
      return { Task { await server.cancelPoll(pollID) } }
    } catch {
      let (status, apiError) = HTTPAnswer.answer(to: error)
      closing(HTTPAnswer.plainFailure(apiError, status: status))
      return nil
    }
  }

  /// A poll's fields, read from its query once its caller is admitted.
  private struct PollFields: Sendable {
    var user: UserID
    var queueID: QueueID
    var lastEventID: Int
    var dontBlock: Bool
    var limit: Int?
  }

  /// Admits a poll's caller and reads its query: the server that serves the caller, and the poll.
  private func admitPoll(
    authorization: String?,
    query text: String,
    mark: AuthenticationMark?
  ) async throws -> (EventServer<Application, C>, PollFields) {
    let user = try await gate.admit(authorization: authorization, mark: mark)
    let server = try await node(user)
    let query = try RequestFields(query: text, allowed: PollQuery.parameters)
    let queueID = QueueID(rawValue: try query.required("queue_id"))
    guard let lastEventID = try query.int("last_event_id", in: Int.min...Int.max) else {
      throw EventAPIError.badRequest("Missing 'last_event_id' argument")
    }
    let fields = PollFields(
      user: user,
      queueID: queueID,
      lastEventID: lastEventID,
      dontBlock: try query.bool("dont_block") ?? false,
      limit: try query.int("limit", in: 1...100_000)
    )
    return (server, fields)
  }

  /// A poll's success body, counted in the metrics.
  private func encode(_ events: [EventEnvelope<Application.Event>], of queueID: QueueID) throws -> Data {
    metrics?.eventsDelivered(events.count)
    return try WireFormat.encodeSuccess(EventsReply(events: events, queueID: queueID))
  }

  /// The answer to `DELETE /api/v1/events` with this `Authorization` header, query string and form body,
  /// whatever HTTP stack carries it.
  func deleteAnswer(
    authorization: String?,
    query text: String,
    form body: String,
    mark: AuthenticationMark? = nil
  ) async -> PlainAnswer {
    await HTTPAnswer.plain {
      let user = try await gate.admit(authorization: authorization, mark: mark)
      let server = try await node(user)
      // Zulip's clients send `queue_id` in the form body of the DELETE; others in the query.
      let query = try RequestFields(query: text, allowed: ["queue_id"])
      let form = try RequestFields(form: body)
      guard let text = query.string("queue_id") ?? form.string("queue_id"), !text.isEmpty else {
        throw EventAPIError.badRequest("Missing 'queue_id' argument")
      }
      let queueID = QueueID(rawValue: text)
      try await server.deleteQueue(queueID, user: user)
      return try WireFormat.encodeSuccess(Empty())
    }
  }
}

/// What the poll routes of both listeners read from a poll's query before answering it.
enum PollQuery {
  /// The query parameters of a poll.
  static let parameters: Set<String> = ["queue_id", "last_event_id", "dont_block", "limit"]

  /// Whether a poll with this query may park (it does not say `dont_block`): its answer closes the
  /// connection. Reads only `dont_block` (the first, as ``RequestFields`` keeps the first of a name): this
  /// runs for every poll, before its query is read whole.
  static func isLongPoll(query: String) -> Bool {
    for pair in query.split(separator: "&") {
      let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
      guard RequestFields.decode(parts[0]) == "dont_block" else { continue }
      let value = parts.count > 1 ? RequestFields.decode(parts[1])?.lowercased() : ""
      return value != "true" && value != "1"
    }
    return true
  }
}
