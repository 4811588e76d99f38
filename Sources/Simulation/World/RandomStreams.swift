import EventProtocol

/// Independent random streams, one per purpose and device, all derived from the scenario's seed.
///
/// Common random numbers: what a user does, when the network drops, when the OS grants background time and
/// when the app is killed are drawn from streams that no engine choice touches, so every strategy run on
/// the same seed faces the same users and the same network. Draws whose count depends on the engine (a
/// request's latency and faults, a push's fate) come from streams of their device and purpose, so a
/// strategy that sends more requests on one device shifts no other device's draws and no user's behaviour.
enum RandomStream: UInt64 {
  /// Sessions, recordings and their recipients and sizes, watch delays.
  case user = 1
  /// Offline periods.
  case network = 2
  /// App kills, between steps and at any moment.
  case kills = 3
  /// The OS's decisions: background refresh slots, force-quits, terminations.
  case platform = 4
  /// Latency and faults of each request and transfer step.
  case requests = 5
  /// Each push's fate in the push service (lost, duplicated, late).
  case pushes = 6
  /// The engine's and transfer queue's own jitter.
  case engine = 7
  /// The server's generator and its restarts.
  case server = 8
  /// Users browsing histories.
  case browsing = 9
  /// Which cluster node each request reaches, when nodes follow, which node dies.
  case nodes = 10
  /// A domain's own draws (the episode queue's listeners and broadcaster).
  case domain = 11

  /// The generator of this purpose for `device` (or the world when `nil`) under `seed`; `epoch` tells apart
  /// the generators of successive app launches.
  func generator(seed: UInt64, device: Int? = nil, epoch: Int = 0) -> SeededRandomNumberGenerator {
    var mixer = SeededRandomNumberGenerator(seed: seed)
    var value = mixer.next() ^ rawValue &* 0x9E37_79B9_7F4A_7C15
    value ^= UInt64(truncatingIfNeeded: (device ?? -1) + 1) &* 0xC2B2_AE3D_27D4_EB4F
    value ^= UInt64(truncatingIfNeeded: epoch) &* 0x1656_67B1_9E37_79F9
    var generator = SeededRandomNumberGenerator(seed: value)
    _ = generator.next()
    return generator
  }
}
