/// `swift run Demo [seed]`: runs the scripted server session, the client engine's, then the video domain's.
@main
struct Demo {
  static func main() async throws {
    let seed = CommandLine.arguments.dropFirst().first.flatMap(UInt64.init) ?? 2026
    try await ScriptedServerSession(seed: seed).run()
    try await ScriptedClientSession(seed: seed).run()
    try await ScriptedVideoSession(seed: seed).run()
    print("Done (seed \(seed); run again with the same seed for the same ids).")
  }
}
