import EventProtocol

/// The intervals of completeness of a list: the ranges of positions between which the list held is the
/// whole list on the server (seed 003's "intervals of completeness").
///
/// Bounds are `ListBound`s, so an interval may start at the very beginning or run to the very end
/// (including items created later, while the machine is live). Positions are integers, so intervals that
/// touch (`1...3` and `4...6`) merge, as do overlapping ones; the set always holds the fewest, sorted,
/// disjoint intervals.
///
/// ```swift
/// var complete = IntervalSet()
/// complete.insert(.position(10) ... .position(20))
/// complete.insert(.position(21) ... .newest)
/// complete.intervals  // [10...newest]
/// ```
public struct IntervalSet: Hashable, Sendable, Codable, CustomStringConvertible {
  /// The intervals, sorted and disjoint, none touching another.
  public private(set) var intervals: [ClosedRange<ListBound>]

  /// Creates an empty set (nothing known to be complete).
  public init() {
    self.intervals = []
  }

  /// Creates a set holding `intervals`, merged.
  public init(_ intervals: [ClosedRange<ListBound>]) {
    self.intervals = []
    for interval in intervals { insert(interval) }
  }

  /// Whether no interval is known complete.
  public var isEmpty: Bool { intervals.isEmpty }

  /// Whether `position` lies in a complete interval.
  public func contains(_ position: Int) -> Bool {
    interval(containing: .position(position)) != nil
  }

  /// The interval holding `bound`, if any.
  public func interval(containing bound: ListBound) -> ClosedRange<ListBound>? {
    intervals.first { $0.contains(bound) }
  }

  /// Whether the whole of `range` lies in one complete interval.
  public func covers(_ range: ClosedRange<ListBound>) -> Bool {
    intervals.contains { $0.lowerBound <= range.lowerBound && range.upperBound <= $0.upperBound }
  }

  /// Adds `interval`, merging it with every interval it overlaps or touches.
  public mutating func insert(_ interval: ClosedRange<ListBound>) {
    var merged = interval
    var kept: [ClosedRange<ListBound>] = []
    kept.reserveCapacity(intervals.count + 1)
    for existing in intervals {
      if Self.joins(existing, merged) {
        merged = Swift.min(existing.lowerBound, merged.lowerBound)...Swift.max(existing.upperBound, merged.upperBound)
      } else {
        kept.append(existing)
      }
    }
    kept.append(merged)
    kept.sort { $0.lowerBound < $1.lowerBound }
    intervals = kept
  }

  /// Removes `range` from every interval, splitting one that holds it in its middle. Positions are
  /// integers, so removing `5...7` from `1...10` leaves `1...4` and `8...10`.
  public mutating func remove(_ range: ClosedRange<ListBound>) {
    var kept: [ClosedRange<ListBound>] = []
    for existing in intervals {
      guard existing.overlaps(range) else {
        kept.append(existing)
        continue
      }
      if existing.lowerBound < range.lowerBound, let below = Self.before(range.lowerBound) {
        kept.append(existing.lowerBound...Swift.max(existing.lowerBound, below))
      }
      if range.upperBound < existing.upperBound, let above = Self.after(range.upperBound) {
        kept.append(Swift.min(above, existing.upperBound)...existing.upperBound)
      }
    }
    intervals = kept
  }

  /// Whether two intervals overlap or touch (adjacent integer positions).
  static func joins(_ left: ClosedRange<ListBound>, _ right: ClosedRange<ListBound>) -> Bool {
    if left.overlaps(right) { return true }
    let (lower, upper) = left.upperBound < right.lowerBound ? (left, right) : (right, left)
    if case .position(let end) = lower.upperBound, case .position(let start) = upper.lowerBound {
      return end < Int.max && end + 1 == start
    }
    return false
  }

  /// The bound just before `bound` among integer positions; `nil` when nothing is before it.
  static func before(_ bound: ListBound) -> ListBound? {
    switch bound {
    case .oldest: nil
    case .position(let position): position == Int.min ? .oldest : .position(position - 1)
    case .newest: .position(Int.max)
    }
  }

  /// The bound just after `bound` among integer positions; `nil` when nothing is after it.
  static func after(_ bound: ListBound) -> ListBound? {
    switch bound {
    case .oldest: .position(Int.min)
    case .position(let position): position == Int.max ? .newest : .position(position + 1)
    case .newest: nil
    }
  }

  public var description: String {
    "[" + intervals.map { "\($0.lowerBound)…\($0.upperBound)" }.joined(separator: ", ") + "]"
  }
}
