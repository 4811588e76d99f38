import EventProtocol
import Foundation
import VideoMessaging

let t0 = Timestamp(secondsSinceEpoch: 1_700_000_000)
let alice: UserID = "alice"
let bob: UserID = "bob"
let carol: UserID = "carol"

/// A video id made at `seconds` after t0, with a fixed random part per `tag`.
func videoID(_ seconds: Int64, _ tag: UInt64 = 1) -> VideoID {
  var random = SeededRandomNumberGenerator(seed: tag)
  return VideoID.make(at: t0.advanced(by: .seconds(seconds)), using: &random)
}

func upload(_ video: VideoID, to recipient: UserID, size: Int = 1_000) -> VideoUpload {
  VideoUpload(video: video, recipient: recipient, blobKey: .forVideo(video), size: size)
}

func incoming(_ video: VideoID, from sender: UserID, size: Int = 1_000) -> IncomingVideo {
  IncomingVideo(id: video, sender: sender, blobKey: .forVideo(video), size: size)
}

extension AsyncStream<VideoDeviceEvent>.Iterator {
  /// The next event that is not a progress report.
  mutating func nextSkippingProgress() async -> VideoDeviceEvent? {
    while let event = await next() {
      if case .progressed = event { continue }
      return event
    }
    return nil
  }
}
