import EventProtocol

/// One device's downloads (never synced): a pure state machine that, given the confirmed projection and
/// whether it came from the server this session, says which files to fetch, cancel and delete.
///
/// The rule that matters (I2 of `docs/episode-queue.md`): a download starts only while the confirmed state
/// came from the server this session (`UpdateMachineCore.isConfirmedThisSession`), and only for an episode
/// that is queued and available there, so a device back from a month offline never downloads what was
/// finished meanwhile. Files of episodes that are finished, dismissed, unpublished or gone from the queue
/// are deleted, from any confirmed state (also the one read back after a restart); a file of an older
/// `mediaVersion` is replaced while the episode is queued.
///
/// The device's own pending writes count too: nothing is downloaded (and any file is deleted) for an
/// episode this device finished or dismissed, even while that write still waits in the outbox, so a media
/// replacement arriving before the finish is confirmed downloads nothing.
///
/// ```swift
/// var downloads = EpisodeDownloads(keep: 10)
/// let actions = downloads.update(
///   confirmed: projection,
///   isConfirmedThisSession: core.isConfirmedThisSession,
///   pending: core.pendingMutations.map(\.mutation)
/// )
/// // perform .start / .cancel / .delete, then report downloadFinished(_:mediaVersion:)
/// ```
public struct EpisodeDownloads: Codable, Sendable, Equatable {
  /// A file on the device.
  public struct File: Codable, Sendable, Hashable {
    /// The version of the episode's audio the file holds.
    public var mediaVersion: Int
    /// Whether the whole file is there (else a partial download, resumable).
    public var complete: Bool
  }

  /// What the device must do.
  public enum Action: Sendable, Hashable {
    /// Download (or resume) this version of the episode's audio from `url`.
    case start(EpisodeID, mediaVersion: Int, url: String)
    /// Stop the download under way for the episode, keeping nothing of it.
    case cancel(EpisodeID)
    /// Delete the episode's file from the device.
    case delete(EpisodeID)
  }

  /// How many queued episodes (from the top) to keep downloaded.
  public var keep: Int
  /// The files, complete or partial.
  public private(set) var files: [EpisodeID: File] = [:]
  /// The downloads under way.
  public private(set) var inFlight: [EpisodeID: Int] = [:]
  /// Downloads completed per (episode, media version) since the episode's file was last deleted: more than
  /// one means the device fetched a file it already had. (An episode that left the queue and came back
  /// legitimately, restored with a current basis or republished, is downloaded again after its deletion.)
  public private(set) var completedCount: [String: Int] = [:]

  /// A device with no files.
  public init(keep: Int = 10) {
    self.keep = max(keep, 0)
  }

  /// What to do now that the confirmed projection is `confirmed` and these of the device's writes are not
  /// yet confirmed (oldest first).
  ///
  /// Every start and every deletion follows the device's shown state, the confirmed projection with
  /// `pending` on top: an episode this device finished or dismissed in a write still in its outbox is never
  /// started, and its file goes.
  /// - Parameters:
  ///   - confirmed: The engine's confirmed state.
  ///   - isConfirmedThisSession: Whether that state came from the server since launch
  ///     (`UpdateMachineSnapshot.isConfirmedThisSession`); nothing starts otherwise.
  ///   - pending: The engine's pending writes, oldest first (`pendingMutations.map(\.mutation)`). It has
  ///     no default, so a caller cannot leave them out by accident.
  /// - Returns: The downloads to start, cancel and delete, in order.
  public mutating func update(
    confirmed: EpisodeProjection,
    isConfirmedThisSession: Bool,
    pending: [EpisodeCommand]
  ) -> [Action] {
    var actions: [Action] = []
    let ended = Self.endedHere(pending)
    let wanted = Dictionary(
      uniqueKeysWithValues: confirmed.queue.prefix(keep).compactMap { item -> (EpisodeID, EpisodeMeta)? in
        guard let meta = confirmed.meta[item.episode], meta.available, !ended.contains(item.episode) else {
          return nil
        }
        return (item.episode, meta)
      }
    )
    let queued = Set(confirmed.queue.map(\.episode)).subtracting(ended)
    // Leaving: terminal, unpublished, gone from the queue, or replaced by new media.
    for episode in Set(files.keys).union(inFlight.keys).sorted() {
      let meta = confirmed.meta[episode]
      let stillWanted = queued.contains(episode) && meta?.available == true
      let version = inFlight[episode] ?? files[episode]?.mediaVersion
      let outdated = meta.map { version != nil && version! < $0.mediaVersion } ?? false
      guard !stillWanted || outdated else { continue }
      if inFlight.removeValue(forKey: episode) != nil { actions.append(.cancel(episode)) }
      if files.removeValue(forKey: episode) != nil { actions.append(.delete(episode)) }
      completedCount = completedCount.filter { !$0.key.hasPrefix("\(episode.rawValue)#") }
    }
    guard isConfirmedThisSession else { return actions }
    for item in confirmed.queue.prefix(keep) {
      guard let meta = wanted[item.episode], inFlight[item.episode] == nil else { continue }
      if let file = files[item.episode], file.complete, file.mediaVersion == meta.mediaVersion { continue }
      inFlight[item.episode] = meta.mediaVersion
      actions.append(.start(item.episode, mediaVersion: meta.mediaVersion, url: meta.url))
    }
    return actions
  }

  /// The episodes this device finished or dismissed in writes not yet confirmed (a later pending `enqueue`
  /// of the same episode, "play again", takes it back).
  static func endedHere(_ pending: [EpisodeCommand]) -> Set<EpisodeID> {
    var ended: Set<EpisodeID> = []
    for command in pending {
      switch command {
      case .markFinished(let episode, _), .dismiss(let episode, _): ended.insert(episode)
      case .enqueue(let episode, _, _): ended.remove(episode)
      default: break
      }
    }
    return ended
  }

  /// A download ended with the whole file.
  public mutating func downloadFinished(_ episode: EpisodeID, mediaVersion: Int) {
    guard inFlight[episode] == mediaVersion else { return }
    inFlight[episode] = nil
    files[episode] = File(mediaVersion: mediaVersion, complete: true)
    completedCount["\(episode.rawValue)#\(mediaVersion)", default: 0] += 1
  }

  /// A download stopped with part of the file (it resumes at the next update that wants it).
  public mutating func downloadInterrupted(_ episode: EpisodeID) {
    guard let version = inFlight.removeValue(forKey: episode) else { return }
    files[episode] = File(mediaVersion: version, complete: false)
  }

  /// The device restarted: nothing is under way any more; partial files stay, to resume.
  public mutating func restarted() {
    for (episode, version) in inFlight { files[episode] = File(mediaVersion: version, complete: false) }
    inFlight = [:]
  }
}
