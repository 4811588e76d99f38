/// A small, fast, seedable random number generator (SplitMix64).
///
/// Everything random in the engine and the server (queue ids, heartbeat jitter, backoff jitter) comes
/// from an injected generator. Tests and the simulation inject this one so that a seed replays exactly;
/// apps inject `SystemRandomNumberGenerator`.
///
/// ```swift
/// var a = SeededRandomNumberGenerator(seed: 42)
/// var b = SeededRandomNumberGenerator(seed: 42)
/// assert(a.next() == b.next())
/// ```
public struct SeededRandomNumberGenerator: RandomNumberGenerator, Sendable, Hashable, Codable {
  private var state: UInt64

  /// Creates a generator whose sequence is fixed by `seed`.
  public init(seed: UInt64) {
    self.state = seed
  }

  public mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }
}
