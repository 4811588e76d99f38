/// Where a scripted session writes its lines: standard output for `Demo --scripted`, a collector in tests.
typealias ScriptedSessionOutput = @Sendable (String) -> Void

/// A scripted session that could not reach its end: the step it was waiting for, and what came instead.
///
/// Every step of a scripted session is deterministic, so this is a defect in the session or in the code it
/// drives; `Demo --scripted` prints it on one line and exits non-zero.
struct ScriptedSessionError: Error, CustomStringConvertible {
  /// The session's step that did not happen, and what happened instead.
  let description: String
}
