extension Duration {
  /// Whole nanoseconds (toward zero), for a metric.
  var wholeNanoseconds: Int64 {
    components.seconds * 1_000_000_000 + components.attoseconds / 1_000_000_000
  }

  /// Whole milliseconds (toward zero), for a log line.
  var wholeMilliseconds: Int64 {
    components.seconds * 1_000 + components.attoseconds / 1_000_000_000_000_000
  }
}
