import EventProtocol
import TestScheduling
import Testing
import UpdateMachineTesting
import VideoMessaging

/// Random command sequences from three users, valid and not: for every user and every cut point, the
/// events after the cut applied to the snapshot at the cut give the final snapshot.
@Suite("VideoMessaging: snapshots and events agree")
struct VideoConvergenceTests {
  @Test(
    "events after any cut rebuild the final snapshot, for every user",
    .cpuBound,
    arguments: 0..<500 as Range<UInt64>
  )
  func convergence(seed: UInt64) {
    let (users, commands) = randomVideoCommands(seed: seed)
    let failure = ConvergenceCheck.check(
      application: VideoServer(),
      reducer: VideoReducer(),
      users: users,
      commands: commands
    )
    #expect(failure == nil, "seed \(seed): \(String(describing: failure))")
  }
}

/// The same random sequences, with each user's client holding the history of its conversations with the
/// others, fetched whole at the cut and kept live by the events after it.
@Suite("VideoMessaging: conversation histories follow the events", .serialized)
struct VideoHistoryConvergenceTests {
  @Test(
    "fetched histories and events after any cut agree with the final server",
    .cpuBound,
    arguments: 0..<300 as Range<UInt64>
  )
  func historyConvergence(seed: UInt64) {
    let (users, commands) = randomVideoCommands(seed: seed)
    var retention = VideoRetention()
    retention.historyPerConversation = 4
    let failure = ConvergenceCheck.checkPartial(
      application: VideoServer(retention: retention),
      reducer: VideoReducer(),
      users: users,
      narrows: { user in users.map { VideoHistory.conversation(between: user, and: $0) } },
      commands: commands
    )
    #expect(failure == nil, "seed \(seed): \(String(describing: failure))")
  }
}

/// Thirty commands from three users, valid and not (uploads, downloads, views, deletions, repeated uploads),
/// drawn from `seed`.
private func randomVideoCommands(seed: UInt64) -> (users: [UserID], commands: [(UserID, VideoCommand)]) {
  var random = SeededRandomNumberGenerator(seed: seed)
  let users = [alice, bob, carol]
  var videos: [VideoID] = []
  var commands: [(UserID, VideoCommand)] = []
  for step in 0..<30 {
    let user = users.randomElement(using: &random)!
    if videos.isEmpty || Int.random(in: 0..<4, using: &random) == 0 {
      let video = VideoID.make(
        at: t0.advanced(by: .seconds(Int64.random(in: 0..<100, using: &random))),
        using: &random
      )
      videos.append(video)
      let recipient = users.randomElement(using: &random)!
      commands.append((user, .uploaded(upload(video, to: recipient, size: step))))
    } else {
      let video = videos.randomElement(using: &random)!
      let command: VideoCommand = [
        .downloaded(video), .viewed(video), .deleted(video), .uploaded(upload(video, to: bob)),
      ]
      .randomElement(using: &random)!
      commands.append((user, command))
    }
  }
  return (users, commands)
}
