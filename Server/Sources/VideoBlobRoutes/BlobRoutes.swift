import EventHTTPServer
import EventProtocol
import EventServer
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import VideoMessaging

/// The video files on HTTP, resumable both ways (`docs/protocol.md`, "Blobs"):
///
/// - `GET /api/v1/uploads?key=K`: how many bytes of the upload are stored (`{"length": n}`);
/// - `PUT /api/v1/uploads?key=K&offset=n`: appends the body at byte `n` (409 `OFFSET_MISMATCH` otherwise);
/// - `POST /api/v1/uploads/complete?key=K`: makes the upload a complete blob, atomically;
/// - `GET /api/v1/blobs/info?key=K`: the complete blob's size (`{"size": n}`);
/// - `GET /api/v1/blobs?key=K` with `Range: bytes=a-b`: those bytes (206), so a download resumes.
///
/// Keys travel as a query parameter because they contain slashes (`videos/<id>`).
///
/// Keys are not capabilities (`docs/security.md`): the first user to upload under a key owns it (bound
/// durably, through the application's log), only their video may claim it, and once claimed it is no longer
/// written. A blob is readable by the sender and the recipient of the video that claimed it until it is
/// released (downloaded, viewed or deleted). An unknown, unreadable or released blob is 404 `BLOB_GONE`
/// (the same for all, so a blob's existence is not revealed).
public struct BlobRoutes: Sendable {
  let ledger: any VideoBlobLedger
  let blobs: any BlobStore
  let gate: RequestGate
  let limits: RequestLimits
  let now: @Sendable () -> Timestamp

  /// Routes for the blobs of the videos whose keys `ledger` keeps (an in-memory or a stored video server's),
  /// kept in `blobs`.
  public init(
    ledger: any VideoBlobLedger,
    blobs: any BlobStore,
    gate: RequestGate,
    limits: RequestLimits = .init(),
    now: @escaping @Sendable () -> Timestamp
  ) {
    self.ledger = ledger
    self.blobs = blobs
    self.gate = gate
    self.limits = limits
    self.now = now
  }

  /// Routes for the blobs of an in-memory ``VideoServer``'s videos, kept in `blobs`.
  public init<C: Clock>(
    server: EventServer<VideoServer, C>,
    blobs: any BlobStore,
    gate: RequestGate,
    limits: RequestLimits = .init(),
    now: @escaping @Sendable () -> Timestamp
  ) where C.Duration == Duration {
    self.init(
      ledger: InMemoryVideoBlobLedger(server: server),
      blobs: blobs,
      gate: gate,
      limits: limits,
      now: now
    )
  }

  /// Adds the routes to `router`.
  public func add<Context: RequestContext>(to router: Router<Context>) {
    router.refuseOtherMethods(on: "api/v1/uploads", allowing: [.get, .put])
    router.refuseOtherMethods(on: "api/v1/uploads/complete", allowing: [.post])
    router.refuseOtherMethods(on: "api/v1/blobs/info", allowing: [.get])
    router.refuseOtherMethods(on: "api/v1/blobs", allowing: [.get])
    router.get("api/v1/uploads") { request, _ in
      await HTTPAnswer.run {
        let (_, key) = try await admitUploader(request)
        var length = try await blobCall { try await blobs.partialLength(key) }
        // An upload completed whose answer the device lost (a node killed, a partition moving) is its whole
        // length: the device goes on to send the completion again (a no-op for the blob, and the service
        // records it if it had not), where 0 had it append from the start to a blob no longer partial,
        // refused for ever. The uploader may not read the blob before a video claims it, so asking here
        // is its only way to learn that the upload is done.
        if length == 0 { length = try await completedLength(key) }
        return try WireFormat.encodeSuccess(Length(length: length))
      }
    }
    router.put("api/v1/uploads") { request, _ in
      await HTTPAnswer.run {
        let (user, key) = try await admitUploader(request, writing: true)
        let query = try RequestFields(query: request, allowed: ["key", "offset"])
        let maximum = await ledger.limits.maximumVideoBytes
        guard let offset = try query.int("offset", in: 0...maximum) else {
          throw EventAPIError.badRequest("Missing 'offset' argument")
        }
        var request = request
        let chunk = Data(try await request.collectBody(upTo: limits.blobChunkBytes).readableBytesView)
        guard !chunk.isEmpty else { throw EventAPIError.badRequest("an upload chunk needs at least one byte") }
        guard offset + chunk.count <= maximum else {
          throw HTTPAnswer.Refusal(
            status: .contentTooLarge,
            error: EventAPIError(code: .quotaExceeded, message: "a video is at most \(maximum) bytes")
          )
        }
        try await checkUserBytes(user, adding: chunk.count)
        try await blobCall { try await blobs.append(chunk, to: key, at: offset) }
        return try WireFormat.encodeSuccess(Length(length: offset + chunk.count))
      }
    }
    router.post("api/v1/uploads/complete") { request, _ in
      await HTTPAnswer.run {
        let (user, key) = try await admitUploader(request)
        try await blobCall { try await blobs.complete(key, at: now()) }
        if try await ledgerCall({ try await ledger.binding(of: key) })?.isUploading == true {
          // The size is recorded (logged) before the completion is answered: it counts toward the user's bytes,
          // and the video that claims the key must declare it.
          let size = try await blobCall { try await blobs.size(of: key) }
          do {
            try await ledger.handle(.uploadCompleted(key, size: size), from: user)
          } catch let error as EventAPIError where error.code == .badRequest {
            // The service refused the size (over the user's bytes): the blob goes. Any other failure (the
            // database away, the user's partition moving) is answered as it is, and the blob stays: the
            // client sends the completion again, or its video claims the blob with its size.
            try? await blobs.delete(key)
            throw HTTPAnswer.Refusal(
              status: .tooManyRequests,
              error: EventAPIError(code: .quotaExceeded, message: error.message)
            )
          }
        }
        return try WireFormat.encodeSuccess(Empty())
      }
    }
    router.get("api/v1/blobs/info") { request, _ in
      await HTTPAnswer.run {
        let key = try await admitReader(request)
        return try WireFormat.encodeSuccess(Size(size: try await blobCall { try await blobs.size(of: key) }))
      }
    }
    router.get("api/v1/blobs") { request, _ in
      do {
        let key = try await admitReader(request)
        let size = try await blobCall { try await blobs.size(of: key) }
        let range = try ByteRange(header: request.headers[.range], size: size, maximum: limits.blobChunkBytes)
        let bytes = try await blobCall { try await blobs.read(key, offset: range.offset, length: range.length) }
        var headers: HTTPFields = [.contentType: "application/octet-stream", .acceptRanges: "bytes"]
        if range.isPartial {
          headers[.contentRange] = "bytes \(range.offset)-\(range.offset + bytes.count - 1)/\(size)"
        }
        return Response(
          status: range.isPartial ? .partialContent : .ok,
          headers: headers,
          body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes))
        )
      } catch {
        return await HTTPAnswer.run { throw error }
      }
    }
  }

  private func key(_ request: Request) throws(EventAPIError) -> BlobKey {
    let parameters: Set<String> = request.method == .put ? ["key", "offset"] : ["key"]
    let raw = try RequestFields(query: request, allowed: parameters).required("key")
    guard Self.isValidKey(raw) else { throw .badRequest(Self.keyRule) }
    return BlobKey(rawValue: raw)
  }

  /// What `Server/openapi.yaml` says of a key (its `pattern` and `maxLength`).
  static var keyRule: String {
    "a blob key is 1 to 160 characters of [A-Za-z0-9._-] in /-separated segments, none empty or starting with ."
  }

  /// Whether `raw` matches `^[A-Za-z0-9_-][A-Za-z0-9._-]*(/[A-Za-z0-9_-][A-Za-z0-9._-]*)*$` in at most 160
  /// bytes: no segment is empty, `.`, `..` or hidden, so no key names a path outside the store.
  static func isValidKey(_ raw: String) -> Bool {
    guard (1...160).contains(raw.utf8.count) else { return false }
    return raw.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).allSatisfy { segment in
      guard let first = segment.first, first != UInt8(ascii: ".") else { return false }
      return segment.allSatisfy { byte in
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
          || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "-")
          || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ".")
      }
    }
  }

  /// The uploader and the key, once the key is bound to them: the first upload under a key binds it through
  /// the application (a logged command, so the binding survives a restart); another user's key, a released
  /// one, or (for a write) one a video already claimed is answered as gone, the same as a key never seen.
  private func admitUploader(_ request: Request, writing: Bool = false) async throws -> (UserID, BlobKey) {
    let user = try await gate.admit(authorization: request.headers[.authorization])
    let key = try key(request)
    let binding = try await ledgerCall { try await ledger.binding(of: key) }
    switch binding {
    case nil:
      do {
        try await ledger.handle(.uploadStarted(key), from: user)
      } catch let error as EventAPIError where error.code == .badRequest {
        // Another user bound it first, or this user has too many uploads waiting.
        if try await ledgerCall({ try await ledger.binding(of: key) }) != nil { throw Self.gone(key) }
        throw HTTPAnswer.Refusal(
          status: .tooManyRequests,
          error: EventAPIError(code: .quotaExceeded, message: error.message)
        )
      }
    case let binding? where binding.owner == user && binding.releasedAt == nil && (binding.video == nil || !writing):
      break
    default:
      throw Self.gone(key)
    }
    return (user, key)
  }

  /// Refuses a chunk that would take `user` over their bytes: what the application counts (completed uploads,
  /// videos not released) plus every upload of theirs in progress.
  private func checkUserBytes(_ user: UserID, adding count: Int) async throws {
    let usage = try await ledgerCall { try await ledger.usage(of: user) }
    var total = usage.storedBytes + count
    for key in usage.uploads {
      total += try await blobCall { try await blobs.partialLength(key) }
    }
    let maximum = await ledger.limits.maximumBytesPerUser
    guard total <= maximum else {
      throw HTTPAnswer.Refusal(
        status: .tooManyRequests,
        error: EventAPIError(code: .quotaExceeded, message: "your blobs would be over \(maximum) bytes")
      )
    }
  }

  private func admitReader(_ request: Request) async throws -> BlobKey {
    let user = try await gate.admit(authorization: request.headers[.authorization])
    let key = try key(request)
    guard try await ledgerCall({ try await ledger.mayRead(key, user: user) }) else { throw Self.gone(key) }
    return key
  }

  /// The size of the complete blob under `key`; 0 when there is none.
  private func completedLength(_ key: BlobKey) async throws -> Int {
    do {
      return try await blobs.size(of: key)
    } catch  where error.isGone {
      return 0
    } catch {
      return try await blobCall { throw error }
    }
  }

  /// Asks the ledger: a server that cannot answer now (its database unreachable) is 503, retried.
  private func ledgerCall<Value>(_ body: () async throws -> Value) async throws -> Value {
    do {
      return try await body()
    } catch let error as EventAPIError {
      throw error
    } catch {
      throw EventAPIError.serviceUnavailable("the video server cannot answer now: \(error)", retryAfter: .seconds(1))
    }
  }

  private func blobCall<Value>(_ body: () async throws -> Value) async throws -> Value {
    do {
      return try await body()
    } catch let error as BlobStoreError {
      if error.isGone {
        throw HTTPAnswer.Refusal(status: .notFound, error: EventAPIError(code: .blobGone, message: error.description))
      }
      if error.isOffsetMismatch {
        throw HTTPAnswer.Refusal(
          status: .conflict,
          error: EventAPIError(code: .offsetMismatch, message: error.description)
        )
      }
      throw HTTPAnswer.Refusal(
        status: .serviceUnavailable,
        error: EventAPIError(code: .blobUnavailable, message: error.description)
      )
    }
  }

  private static func gone(_ key: BlobKey) -> HTTPAnswer.Refusal {
    HTTPAnswer.Refusal(status: .notFound, error: EventAPIError(code: .blobGone, message: "blob \(key) is gone"))
  }
}

extension EventAPIError.Code {
  /// The blob does not exist, or the caller may not read it.
  static let blobGone = EventAPIError.Code(wireValue: "BLOB_GONE")
  /// An upload chunk did not start where the stored upload ends.
  static let offsetMismatch = EventAPIError.Code(wireValue: "OFFSET_MISMATCH")
  /// The blob store failed this time.
  static let blobUnavailable = EventAPIError.Code(wireValue: "BLOB_UNAVAILABLE")
  /// The user is over one of their bounds (uploads waiting, a video's size).
  static let quotaExceeded = EventAPIError.Code(wireValue: "QUOTA_EXCEEDED")
}

/// The body of a success with no fields.
private struct Empty: Encodable {}

private struct Length: Encodable {
  var length: Int
}

private struct Size: Encodable {
  var size: Int
}

/// The bytes a `Range` header asks for, within a blob of `size` bytes, at most `maximum` of them.
struct ByteRange: Equatable {
  var offset: Int
  var length: Int
  var isPartial: Bool

  init(header: String?, size: Int, maximum: Int) throws(HTTPAnswer.Refusal) {
    guard let header else {
      guard size <= maximum else {
        throw HTTPAnswer.Refusal(
          status: .rangeNotSatisfiable,
          error: .badRequest("the blob is \(size) bytes; ask for at most \(maximum) with a Range header")
        )
      }
      self.init(offset: 0, length: size, isPartial: false)
      return
    }
    let spec = header.trimmingCharacters(in: .whitespaces)
    let parts =
      spec.hasPrefix("bytes=") ? spec.dropFirst(6).split(separator: "-", omittingEmptySubsequences: false) : []
    guard parts.count == 2, let first = Int(parts[0]), first >= 0, first < max(size, 1),
      parts[1].isEmpty || (Int(parts[1]).map { $0 >= first } ?? false)
    else {
      throw HTTPAnswer.Refusal(
        status: .rangeNotSatisfiable,
        error: .badRequest("unsatisfiable range \(spec.prefix(60)) of \(size) bytes")
      )
    }
    let last = min(parts[1].isEmpty ? size - 1 : Int(parts[1])!, size - 1)
    self.init(offset: first, length: min(last - first + 1, maximum), isPartial: true)
  }

  init(offset: Int, length: Int, isPartial: Bool) {
    self.offset = offset
    self.length = length
    self.isPartial = isPartial
  }
}
