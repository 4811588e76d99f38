import EventProtocol
import EventServer
import Foundation
import JSONCoding
import UpdateMachine

/// The benchmark's server application: a status event fanned out to ten users per command (W1), or to
/// one user (W3, W4, C1).
struct StatusBoard: ServerApplication {
  /// Each video's latest status; the server keeps none (its snapshot is empty), clients build it from events.
  struct Snapshot: Codable, Sendable, Equatable {
    var statuses: [String: String] = [:]
  }

  enum Command: Codable, Sendable, Equatable {
    /// Event `index` to the users (index × 10 + k) mod `users`, k in 0..<fanOut.
    case fanOut(index: Int, users: Int, fanOut: Int)
    /// Event `index` to every user: to the list the board keeps when `keptList`, else to a list built for
    /// the event (as an application that computes its recipients each time does).
    case everyone(index: Int, keptList: Bool)
    /// One event to one user.
    case one(index: Int, to: UserID)
    /// Events `first..<first + count` to one user, in one step (a backlog that arrives at once).
    case many(first: Int, count: Int, to: UserID)
  }

  /// The users, made once: "u0", "u1", …
  let userIDs: [UserID]

  init(users: Int) {
    userIDs = (0..<users).map { UserID("u\($0)") }
  }

  func snapshot(for user: UserID) -> Snapshot { Snapshot() }

  mutating func handle(_ command: Command, from user: UserID) throws(CommandRejection) -> [Delivery<StatusEvent>] {
    switch command {
    case .fanOut(let index, let users, let fanOut):
      let recipients = (0..<fanOut).map { userIDs[(index * 10 + $0) % users] }
      return [Delivery(to: recipients, event: StatusEvent(videoID: "v\(index)", status: "viewed"))]
    case .everyone(let index, let keptList):
      let recipients = keptList ? userIDs : userIDs.map { $0 }
      return [Delivery(to: recipients, event: StatusEvent(videoID: "v\(index)", status: "viewed"))]
    case .one(let index, let user):
      return [Delivery(to: [user], event: StatusEvent(videoID: "v\(index)", status: "viewed"))]
    case .many(let first, let count, let user):
      return (first..<first + count).map {
        Delivery(to: [user], event: StatusEvent(videoID: "v\($0)", status: "viewed"))
      }
    }
  }
}

/// The client side of the status board: each event sets its video's status. The benchmark sends no writes.
struct StatusReducer: UpdateReducer {
  var initialState: StatusBoard.Snapshot { StatusBoard.Snapshot() }

  func apply(_ event: StatusEvent, to state: inout StatusBoard.Snapshot) throws(ReducerError) {
    state.statuses[event.videoID] = event.status
  }

  func applyOptimistically(_ mutation: StatusBoard.Command, to state: inout StatusBoard.Snapshot) {}
}

/// The status board's client for an app whose state does not grow with the events: it keeps the latest
/// status only, under one key (C1's second set of drains, the library's cost without the app's growing state).
struct LatestStatusReducer: UpdateReducer {
  /// The one key the state holds.
  static let key = "latest"

  var initialState: StatusBoard.Snapshot { StatusBoard.Snapshot() }

  func apply(_ event: StatusEvent, to state: inout StatusBoard.Snapshot) throws(ReducerError) {
    state.statuses[Self.key] = event.videoID
  }

  func applyOptimistically(_ mutation: StatusBoard.Command, to state: inout StatusBoard.Snapshot) {}
}

/// `{type: video_status, video_id: "v<i>", status: viewed}`. It writes and reads its own fields
/// (`JSONFieldsCodable`, the opt-in beside `Codable`).
struct StatusEvent: EventPayload, Hashable, JSONFieldsCodable {
  static let knownEventTypes: Set<String> = ["video_status"]
  var eventType: String { "video_status" }
  var videoID: String
  var status: String

  private enum CodingKeys: String, CodingKey {
    case videoID = "video_id"
    case status
  }

  init(videoID: String, status: String) {
    self.videoID = videoID
    self.status = status
  }

  func encodeFields(to fields: inout JSONFieldsWriter) throws {
    try fields.encode(videoID, forKey: "video_id")
    try fields.encode(status, forKey: "status")
  }

  init(fields: JSONFieldsReader) throws {
    videoID = try fields.decode(String.self, forKey: "video_id")
    status = try fields.decode(String.self, forKey: "status")
  }
}

/// Resident memory now and at its peak, from /proc/self/status (Linux), in bytes; 0 where unavailable.
enum Memory {
  static func resident() -> Int { field("VmRSS:") }
  static func peak() -> Int { field("VmHWM:") }

  private static func field(_ name: String) -> Int {
    guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
      let line = text.split(separator: "\n").first(where: { $0.hasPrefix(name) })
    else { return 0 }
    let kilobytes = line.split(separator: " ").compactMap { Int($0) }.first ?? 0
    return kilobytes * 1024
  }
}

/// Medians and ranges of repeated measurements.
struct Samples {
  var values: [Double] = []

  var median: Double {
    let sorted = values.sorted()
    return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
  }

  var range: String {
    guard let low = values.min(), let high = values.max() else { return "" }
    return String(format: "(%.3g–%.3g)", low, high)
  }
}
