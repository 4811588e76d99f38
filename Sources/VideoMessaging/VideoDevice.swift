import EventProtocol
import Foundation
import JSONCoding
import UpdateMachine

/// What a ``VideoDevice`` tells the app.
public enum VideoDeviceEvent: Sendable, Hashable {
  /// A video finished downloading and is playable (handed over once).
  case delivered(DeliveredVideo)
  /// A download was given up, and why ("you already have it" or "it was taken back").
  case abandoned(VideoID, TransferQueue.AbandonReason)
  /// A download failed for now and will be tried again at `retryAt`, from the offset it reached.
  case retrying(VideoID, at: Timestamp)
  /// A transfer moved bytes: reported after each step, within a few seconds whatever the link's speed
  /// (``TransferPacer``).
  case progressed(TransferProgress)
}

/// How far one transfer got.
public struct TransferProgress: Sendable, Hashable {
  /// Which way the bytes go.
  public enum Direction: Sendable, Hashable {
    /// A recording going to blob storage.
    case upload
    /// An incoming video coming to the device.
    case download
  }

  /// The video.
  public var video: VideoID
  /// Which way.
  public var direction: Direction
  /// The bytes stored so far (where a resume starts).
  public var bytesDone: Int
  /// The video's size.
  public var size: Int
}

/// One installation of the video app: an `UpdateMachine` keeping the user's ``VideoSnapshot`` live, and a
/// ``TransferQueue`` moving files, saved together in the machine's record.
///
/// The actor is a shell: the machine decides requests, the transfer queue decides transfers; the device
/// feeds the machine's *confirmed* incoming list to the queue, performs the queue's actions with the blob
/// stores, and sends the commands they produce through the machine's outbox.
///
/// ```swift
/// let device = VideoDevice(user: "alice", transport: transport, store: FileStore(url: recordURL),
///                          remoteBlobs: blobStorage, localBlobs: FileBlobStore(directory: videosURL))
/// await device.start()
/// let id = await device.send(recording, to: "bob")
/// for await event in await device.events() { … }
/// ```
public actor VideoDevice {
  /// The user signed in on this device.
  public let user: UserID
  /// The engine keeping the user's videos live.
  public let machine: UpdateMachine<VideoSnapshot, VideoEvent, VideoCommand>
  private let remoteBlobs: any BlobStore
  private let localBlobs: any BlobStore
  private let readClock: @Sendable () -> Timestamp
  private let sleepUntil: @Sendable (Timestamp) async throws -> Void
  private let chunkSize: Int
  private var transfers: TransferQueue
  private var random: SeededRandomNumberGenerator
  private var transfersByVideo: [VideoID: Task<Void, Never>] = [:]
  private var uploadTask: Task<Void, Never>?
  private var observer: Task<Void, Never>?
  private var timer: Task<Void, Never>?
  private var timerDeadline: Timestamp?
  private var lastConfirmed: VideoSnapshot?
  private var subscribers: [AsyncStream<VideoDeviceEvent>.Continuation] = []
  private var isStarted = false

  /// Creates a device; nothing happens until ``start()``.
  /// - Parameters:
  ///   - user: The user signed in.
  ///   - transport: How the engine reaches the server.
  ///   - store: Where the engine's record (state, outbox, and this device's transfers) is saved.
  ///   - remoteBlobs: The service's blob storage.
  ///   - localBlobs: The device's own files.
  ///   - clock: The clock for deadlines, backoff and retries.
  ///   - anchor: The timestamp the clock's current instant stands for; the wall clock's when `nil`.
  ///   - configuration: The engine's configuration.
  ///   - seed: Seeds video ids, backoff jitter and the engine's randomness.
  ///   - chunkSize: The most bytes a transfer moves per step (and so how much a failure can lose); steps
  ///     start smaller and grow with the link's measured speed (``TransferPacer``).
  ///   - log: Receives the engine's structured events (`UpdateMachineLogEvent`); nothing is logged when
  ///     `nil`.
  public init<Transport: EventTransport, C: Clock>(
    user: UserID,
    transport: Transport,
    store: any UpdateStore,
    remoteBlobs: any BlobStore,
    localBlobs: any BlobStore,
    clock: C,
    anchor: Timestamp? = nil,
    configuration: UpdateMachineConfiguration = .init(),
    seed: UInt64,
    chunkSize: Int = 64 << 10,
    log: (@Sendable (UpdateMachineLogEvent) -> Void)? = nil
  )
  where
    Transport.State == VideoSnapshot, Transport.Event == VideoEvent, Transport.Mutation == VideoCommand,
    C.Duration == Duration
  {
    let timeline = Timeline(clock: clock, anchor: anchor)
    self.user = user
    self.machine = UpdateMachine(
      reducer: VideoReducer(),
      transport: transport,
      store: store,
      clock: clock,
      anchor: anchor,
      configuration: configuration,
      random: SeededRandomNumberGenerator(seed: seed),
      log: log
    )
    self.remoteBlobs = remoteBlobs
    self.localBlobs = localBlobs
    self.readClock = { timeline.now() }
    self.sleepUntil = { try await timeline.sleep(until: $0) }
    self.chunkSize = max(chunkSize, 1)
    self.transfers = TransferQueue(seed: seed &+ 1)
    self.random = SeededRandomNumberGenerator(seed: seed &+ 2)
  }

  // MARK: - Lifecycle

  /// Starts the engine, reads back the transfers saved with its record (resuming each from its offset),
  /// and follows the confirmed state.
  public func start() async {
    guard !isStarted else { return }
    isStarted = true
    await machine.start()
    if let data = await machine.deviceData, let saved = try? WireJSON.decode(TransferQueue.self, from: data) {
      transfers = saved
    }
    await perform(transfers.restarted(now: readClock()))
    let stream = await machine.snapshots()
    observer = Task { [weak self] in
      for await snapshot in stream {
        // Only a state the server confirmed this session moves downloads: the one read back at launch may
        // be older than a backup being restored.
        guard let self, snapshot.isConfirmedThisSession, let state = snapshot.confirmedState else { continue }
        await self.confirmed(state)
      }
    }
  }

  /// Stops every transfer and the engine. What was saved stays.
  public func stop() async {
    observer?.cancel()
    timer?.cancel()
    uploadTask?.cancel()
    for task in transfersByVideo.values { task.cancel() }
    transfersByVideo = [:]
    for subscriber in subscribers { subscriber.finish() }
    subscribers = []
    await machine.stop()
  }

  // MARK: - What the platform reports

  /// The platform's path monitor reports the network gone: the machine and the transfer queue stop
  /// retrying into it (each tries once every five minutes in case the report was wrong).
  public func networkLost() async {
    await machine.networkLost()
    await perform(transfers.networkLost(now: readClock()))
  }

  /// The platform reports a network again: the machine and the waiting transfers try at once.
  public func networkBecameAvailable() async {
    await machine.networkBecameAvailable()
    await perform(transfers.networkBecameAvailable(now: readClock()))
  }

  // MARK: - What the app does

  /// Records a video for `recipient`: the file is kept on the device, uploaded (resumably), then announced
  /// through the outbox, with `caption` if there is one.
  /// - Returns: The new video's id.
  public func send(_ recording: Data, to recipient: UserID, caption: String? = nil) async -> VideoID {
    let now = readClock()
    let video = VideoID.make(at: now, using: &random)
    let localKey = BlobKey(rawValue: "outgoing/\(video.rawValue)")
    do {
      try await localBlobs.append(recording, to: localKey, at: 0)
      try await localBlobs.complete(localKey, at: now)
    } catch {
      return video
    }
    let notice = VideoUpload(
      video: video,
      recipient: recipient,
      blobKey: .forVideo(video),
      size: recording.count,
      caption: caption
    )
    await perform(transfers.recorded(notice, localKey: localKey, now: now))
    return video
  }

  /// The user changed the caption of a video they sent (an empty caption removes it): it shows at once in
  /// the conversation's history, and reaches the server once, after the video's own notice.
  public func setCaption(_ caption: String, of video: VideoID) async {
    await perform(transfers.captioned(video, caption: caption))
  }

  /// The app played `video`: `viewed` goes to the server once.
  public func markViewed(_ video: VideoID) async {
    await perform(transfers.viewed(video))
  }

  /// The app removed `video` from its library; its file is deleted and it is never downloaded again.
  public func remove(_ video: VideoID) async {
    await perform(transfers.removed(video))
  }

  /// The videos downloaded and not removed, oldest first.
  public var library: [DeliveredVideo] { transfers.library }

  /// The transfer queue as it stands.
  public var transferQueue: TransferQueue { transfers }

  /// A stream of deliveries and abandoned downloads, from now on.
  public func events() -> AsyncStream<VideoDeviceEvent> {
    let (stream, continuation) = AsyncStream.makeStream(of: VideoDeviceEvent.self)
    subscribers.append(continuation)
    return stream
  }

  // MARK: - Performing the queue's actions

  private func confirmed(_ state: VideoSnapshot) async {
    guard state != lastConfirmed else { return }
    lastConfirmed = state
    await perform(transfers.confirmed(state, isConfirmedThisSession: true, now: readClock()))
  }

  private func perform(_ actions: [TransferQueue.Action]) async {
    for action in actions {
      switch action {
      case .download(let video, let localKey):
        startDownload(video, localKey: localKey)
      case .cancelDownload(let video):
        transfersByVideo.removeValue(forKey: video)?.cancel()
      case .upload(let notice, let localKey):
        startUpload(notice, localKey: localKey)
      case .deliver(let delivered):
        for subscriber in subscribers { subscriber.yield(.delivered(delivered)) }
      case .abandon(let video, let reason):
        for subscriber in subscribers { subscriber.yield(.abandoned(video, reason)) }
      case .discardLocal(let key):
        try? await localBlobs.delete(key)
      case .submit(let command):
        _ = await machine.submit(command)
      case .save:
        if let data = try? WireJSON.encodeData(transfers, sortedKeys: false) { await machine.saveDeviceData(data) }
      }
    }
    reschedule()
  }

  private func startDownload(_ video: IncomingVideo, localKey: BlobKey) {
    transfersByVideo[video.id]?.cancel()
    transfersByVideo[video.id] = Task { [remoteBlobs, localBlobs, chunkSize, readClock] in
      do throws(BlobStoreError) {
        if (try? await localBlobs.size(of: localKey)) == nil {
          var offset = try await localBlobs.partialLength(localKey)
          var pacer = TransferPacer(maximumStep: chunkSize)
          while offset < video.size {
            if Task.isCancelled { return }
            let started = readClock()
            let chunk = try await remoteBlobs.read(
              video.blobKey,
              offset: offset,
              length: min(pacer.nextStep, video.size - offset)
            )
            guard !chunk.isEmpty else { throw .unavailable("the blob ended at \(offset) of \(video.size) bytes") }
            try await localBlobs.append(chunk, to: localKey, at: offset)
            offset += chunk.count
            pacer.stepCompleted(bytes: chunk.count, took: started.duration(to: readClock()))
            self.progressed(
              TransferProgress(video: video.id, direction: .download, bytesDone: offset, size: video.size)
            )
          }
          if Task.isCancelled { return }
          try await localBlobs.complete(localKey, at: readClock())
        }
        await self.downloadEnded(video.id, error: nil)
      } catch {
        await self.downloadEnded(video.id, error: error)
      }
    }
  }

  private func progressed(_ progress: TransferProgress) {
    switch progress.direction {
    case .download: transfers.downloadProgressed(progress.video, bytesDone: progress.bytesDone)
    case .upload: transfers.uploadProgressed(progress.video, bytesDone: progress.bytesDone)
    }
    for subscriber in subscribers { subscriber.yield(.progressed(progress)) }
  }

  private func downloadEnded(_ video: VideoID, error: BlobStoreError?) async {
    guard transfersByVideo.removeValue(forKey: video) != nil else { return }
    let now = readClock()
    if let error {
      let actions = transfers.downloadFailed(video, error, now: now)
      if case .failed(_, let retryAt)? = transfers.downloads.first(where: { $0.video.id == video })?.state {
        for subscriber in subscribers { subscriber.yield(.retrying(video, at: retryAt)) }
      }
      await perform(actions)
    } else {
      await perform(transfers.downloadFinished(video, now: now))
    }
  }

  private func startUpload(_ notice: VideoUpload, localKey: BlobKey) {
    uploadTask?.cancel()
    uploadTask = Task { [remoteBlobs, localBlobs, chunkSize, readClock] in
      do throws(BlobStoreError) {
        if (try? await remoteBlobs.size(of: notice.blobKey)) == nil {
          var offset = try await remoteBlobs.partialLength(notice.blobKey)
          var pacer = TransferPacer(maximumStep: chunkSize)
          while offset < notice.size {
            if Task.isCancelled { return }
            let chunk = try await localBlobs.read(
              localKey,
              offset: offset,
              length: min(pacer.nextStep, notice.size - offset)
            )
            guard !chunk.isEmpty else { throw .unavailable("the recording ended at \(offset) bytes") }
            let started = readClock()
            try await remoteBlobs.append(chunk, to: notice.blobKey, at: offset)
            offset += chunk.count
            pacer.stepCompleted(bytes: chunk.count, took: started.duration(to: readClock()))
            self.progressed(
              TransferProgress(video: notice.video, direction: .upload, bytesDone: offset, size: notice.size)
            )
          }
          try await remoteBlobs.complete(notice.blobKey, at: readClock())
        }
        await self.uploadEnded(notice.video, failed: false)
      } catch {
        await self.uploadEnded(notice.video, failed: true)
      }
    }
  }

  private func uploadEnded(_ video: VideoID, failed: Bool) async {
    uploadTask = nil
    let now = readClock()
    await perform(failed ? transfers.uploadFailed(video, now: now) : transfers.uploadFinished(video, now: now))
  }

  private func reschedule() {
    let deadline = transfers.nextRetryAt
    guard deadline != timerDeadline else { return }
    timer?.cancel()
    timerDeadline = deadline
    guard let deadline else { return }
    timer = Task { [sleepUntil] in
      do {
        try await sleepUntil(deadline)
      } catch {
        return
      }
      await self.timerFired(at: deadline)
    }
  }

  private func timerFired(at deadline: Timestamp) async {
    guard deadline == timerDeadline else { return }
    timerDeadline = nil
    await perform(transfers.timerFired(now: readClock()))
  }
}
