import Foundation

#if canImport(Glibc)
  import Glibc
#endif

@_silgen_name("LLVMFuzzerRunDriver")
private func runFuzzerDriver(
  _ argc: UnsafeMutablePointer<CInt>,
  _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
  _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt

/// The fuzz target chosen by `FUZZ_TARGET`, read once.
private let selectedTarget: FuzzTarget = {
  let name = ProcessInfo.processInfo.environment["FUZZ_TARGET"] ?? ""
  guard let target = FuzzTarget(rawValue: name) else {
    let names = FuzzTarget.allCases.map(\.rawValue).joined(separator: ", ")
    FileHandle.standardError.write(Data("FUZZ_TARGET must be one of: \(names)\n".utf8))
    exit(2)
  }
  return target
}()

/// The executable's entry point (SwiftPM names it after the target): hands control to libFuzzer.
@_cdecl("FuzzTargets_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
  if let folder = ProcessInfo.processInfo.environment["FUZZ_WRITE_SEEDS"] {
    do {
      try SeedWriter.write(to: URL(fileURLWithPath: folder))
      return 0
    } catch {
      FileHandle.standardError.write(Data("cannot write seeds: \(error)\n".utf8))
      return 1
    }
  }
  var argc = argc
  var argv = argv
  _ = selectedTarget
  return runFuzzerDriver(&argc, &argv) { start, count in
    selectedTarget.run(start.map { Data(bytes: $0, count: count) } ?? Data())
    return 0
  }
}
