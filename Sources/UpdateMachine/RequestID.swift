/// The shell's handle on one request of an ``UpdateMachineCore``, so late answers to cancelled or timed-out
/// requests are recognised and ignored.
public struct RequestID: Hashable, Sendable, Comparable, CustomStringConvertible {
  /// The number the core gave the request; numbers increase from 1.
  public let rawValue: UInt64

  /// Creates a request id; tests and previews use it to build actions to compare with.
  public init(rawValue: UInt64) {
    self.rawValue = rawValue
  }

  public static func < (lhs: RequestID, rhs: RequestID) -> Bool { lhs.rawValue < rhs.rawValue }

  public var description: String { "#\(rawValue)" }
}
