import EventProtocol
import Foundation
import VideoMessaging

/// What happens to one device whatever the sync strategy: when its user opens and leaves the app (and
/// whether by a force-quit), what the user records and for whom, when the network drops, when the app is
/// killed, and when the OS offers background time or reclaims the app. Drawn in full before the run from
/// the device's own streams (``RandomStream``), so every strategy run on the same seed meets the same
/// script; only the engine's choices differ.
struct DeviceScript: Hashable {
  /// A time the user has the app on screen.
  struct Session: Hashable {
    var opens: Timestamp
    var closes: Timestamp
    /// The user leaves by force-quitting the app.
    var forceQuits: Bool
  }

  /// A video the user records.
  struct Recording: Hashable {
    var at: Timestamp
    var video: VideoID
    /// Picks the recipient among the user's friends (taken modulo their number).
    var recipientDraw: UInt64
    var bytes: Int
  }

  /// A time without network.
  struct Outage: Hashable {
    var from: Timestamp
    var until: Timestamp
  }

  var sessions: [Session] = []
  var recordings: [Recording] = []
  var outages: [Outage] = []
  /// Kills at an arbitrary moment.
  var kills: [Timestamp] = []
  /// Kills that strike at the first step the engine or the transfer queue takes from then on: between two
  /// persistence steps, the worst moment.
  var killsBetweenSteps: [Timestamp] = []
  /// When the OS offers a background refresh (taken only by a closed app whose strategy asks for it).
  var refreshSlots: [Timestamp] = []
  /// When the OS reclaims the app if it is in the background then.
  var terminations: [Timestamp] = []

  /// Draws the script of device `index` for `scenario`, from `start` to the end of its faults.
  init(device index: Int, scenario: Scenario, start: Timestamp) {
    let end = start.advanced(by: scenario.duration)
    let seed = scenario.seed
    let behaviour = scenario.behaviour
    let faults = scenario.faults
    let platform = scenario.platform

    var user = RandomStream.user.generator(seed: seed, device: index)
    var time = start
    while let wait = user.waitingTime(perHour: behaviour.opensPerHour) {
      time = time.advanced(by: wait)
      guard time < end else { break }
      let length = Duration.seconds(Int.random(in: behaviour.openSeconds, using: &user))
      let session = Session(
        opens: time,
        closes: time.advanced(by: length),
        forceQuits: user.chance(platform.forceQuitShare)
      )
      sessions.append(session)
      var moment = session.opens
      while let gap = user.waitingTime(perHour: behaviour.recordingsPerOpenHour) {
        moment = moment.advanced(by: gap)
        guard moment < session.closes else { break }
        recordings.append(
          Recording(
            at: moment,
            video: VideoID.make(at: moment, using: &user),
            recipientDraw: user.next(),
            bytes: Int.random(in: behaviour.videoKilobytes, using: &user) * 1000
          )
        )
      }
      time = session.closes
    }

    var network = RandomStream.network.generator(seed: seed, device: index)
    time = start
    while let wait = network.waitingTime(perHour: faults.offlinePerHour) {
      time = time.advanced(by: wait)
      guard time < end else { break }
      let until = time.advanced(by: .seconds(Int.random(in: faults.offlineSeconds, using: &network)))
      outages.append(Outage(from: time, until: until))
      time = until
    }

    var killing = RandomStream.kills.generator(seed: seed, device: index)
    kills = Self.moments(perHour: faults.crashesPerHour, from: start, to: end, using: &killing)
    killsBetweenSteps = Self.moments(perHour: faults.killsBetweenStepsPerHour, from: start, to: end, using: &killing)

    var os = RandomStream.platform.generator(seed: seed, device: index)
    time = start
    let spacing = Duration.seconds(platform.backgroundRefreshMinimumSeconds)
    while let wait = os.waitingTime(perHour: platform.backgroundRefreshPerHour) {
      time = time.advanced(by: max(wait, spacing))
      guard time < end else { break }
      refreshSlots.append(time)
    }
    terminations = Self.moments(perHour: platform.terminationsPerBackgroundHour, from: start, to: end, using: &os)
  }

  /// The moments of a Poisson process of `rate` per hour between `start` and `end`.
  static func moments(
    perHour rate: Double,
    from start: Timestamp,
    to end: Timestamp,
    using random: inout SeededRandomNumberGenerator
  ) -> [Timestamp] {
    var moments: [Timestamp] = []
    var time = start
    while let wait = random.waitingTime(perHour: rate) {
      time = time.advanced(by: wait)
      guard time < end else { break }
      moments.append(time)
    }
    return moments
  }

  /// How long after delivery the user of device `index` watches `video`: drawn from the pair alone, so it
  /// does not depend on when, or in which order, videos arrive.
  static func watchDelay(_ video: VideoID, device index: Int, within range: ClosedRange<Int>) -> Duration {
    var hash: UInt64 = 0xCBF2_9CE4_8422_2325
    for byte in video.rawValue.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
    var random = SeededRandomNumberGenerator(seed: hash ^ UInt64(truncatingIfNeeded: index))
    return .seconds(Int.random(in: range, using: &random))
  }
}
