import EventProtocol
import Foundation
import JSONCoding
import JSONTestSupport
import TestScheduling
import Testing
import VideoMessaging

// The video events' fields (JSONFieldsCodable) against their Codable path and Foundation's, on random
// values of every case; and whole events through the wire both ways.

private func videoID(_ draw: inout Draw) -> VideoID { VideoID(rawValue: draw.key()) }
private func user(_ draw: inout Draw) -> UserID { UserID(rawValue: draw.key()) }
private func maybe<Value>(_ draw: inout Draw, _ make: (inout Draw) -> Value) -> Value? {
  draw.chance(50) ? make(&draw) : nil
}

private func randomEvent(_ draw: inout Draw) -> VideoEvent {
  switch draw.int(0...6) {
  case 0:
    return .sent(
      VideoSent(
        video: videoID(&draw),
        recipient: user(&draw),
        blobKey: maybe(&draw) { BlobKey(rawValue: $0.string()) },
        size: maybe(&draw) { $0.int(0...1 << 40) },
        sender: maybe(&draw, user),
        position: maybe(&draw) { $0.int(0...99) },
        caption: maybe(&draw) { $0.string() }
      )
    )
  case 1:
    let statuses: [VideoStatus] = [.sending, .uploaded, .downloaded, .viewed]
    return .status(VideoStatusChanged(video: videoID(&draw), status: statuses[draw.int(0...statuses.count - 1)]))
  case 2, 4, 5:
    let reasons: [VideoGoneReason?] = [nil, .downloaded, .viewed, .deleted, .expired, .retired]
    let gone = VideoGone(video: videoID(&draw), reason: reasons[draw.int(0...reasons.count - 1)])
    return draw.chance(33) ? .untracked(gone) : draw.chance(50) ? .incomingGone(gone) : .historyTrimmed(gone)
  case 3:
    return .incoming(
      IncomingVideoFields(
        video: videoID(&draw),
        sender: user(&draw),
        blobKey: BlobKey(rawValue: draw.string()),
        size: draw.int(0...1 << 40),
        position: maybe(&draw) { $0.int(0...99) },
        recipient: maybe(&draw, user),
        caption: maybe(&draw) { $0.string() }
      )
    )
  default:
    return .captioned(VideoCaptionChanged(video: videoID(&draw), caption: maybe(&draw) { $0.string() }))
  }
}

@Suite("Video events: their own fields against Codable and Foundation")
struct VideoEventFieldsTests {
  @Test("every case's fields: Codable's bytes, values and errors", .cpuBound, arguments: 0..<300)
  func parity(seed: UInt64) {
    var draw = Draw(seed: seed)
    let differences: [String] =
      switch randomEvent(&draw) {
      case .sent(let fields): JSONFieldsParity.differences(fields)
      case .status(let fields): JSONFieldsParity.differences(fields)
      case .untracked(let fields), .incomingGone(let fields), .historyTrimmed(let fields):
        JSONFieldsParity.differences(fields)
      case .incoming(let fields): JSONFieldsParity.differences(fields)
      case .captioned(let fields): JSONFieldsParity.differences(fields)
      }
    #expect(differences == [], "seed \(seed)")
  }

  @Test("a poll's answer of every case: Foundation's bytes out, the same events back", .cpuBound, arguments: 0..<100)
  func answers(seed: UInt64) throws {
    var draw = Draw(seed: seed)
    let events = (0..<draw.int(0...8)).map { index in
      EventEnvelope(id: index, body: .payload(randomEvent(&draw)))
    }
    let reply = EventsReply(events: events, queueID: "q")
    let ours = try WireFormat.encodeBytes(reply)
    let reference = try foundationSorted(reply)
    #expect(String(decoding: ours, as: UTF8.self) == String(decoding: reference, as: UTF8.self), "seed \(seed)")
    #expect(try WireFormat.decode(EventsReply<VideoEvent>.self, from: ours) == reply)
    #expect(try JSONDecoder().decode(EventsReply<VideoEvent>.self, from: Data(ours)) == reply)
  }
}
