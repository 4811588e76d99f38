import EventProtocol
import EventServer
import Foundation

/// The benchmark's server application: a status event fanned out to ten users per command (W1), or to
/// one user (W3, W4, C1).
struct StatusBoard: ServerApplication {
  struct Snapshot: Codable, Sendable, Equatable {}

  enum Command: Codable, Sendable, Equatable {
    /// Event `index` to the users (index × 10 + k) mod `users`, k in 0..<fanOut.
    case fanOut(index: Int, users: Int, fanOut: Int)
    /// One event to one user.
    case one(index: Int, to: UserID)
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
    case .one(let index, let user):
      return [Delivery(to: [user], event: StatusEvent(videoID: "v\(index)", status: "viewed"))]
    }
  }
}

/// `{type: video_status, video_id: "v<i>", status: viewed}`.
struct StatusEvent: EventPayload, Hashable {
  static let knownEventTypes: Set<String> = ["video_status"]
  var eventType: String { "video_status" }
  var videoID: String
  var status: String

  private enum CodingKeys: String, CodingKey {
    case videoID = "video_id"
    case status
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
