#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The process's soft limit on open files.
enum FileDescriptorLimit {
  static var current: Int {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 }
    return Int(clamping: min(limit.rlim_cur, 1 << 20))
  }
}
