import ArgumentParser
import AsyncHTTPClient
import EventHTTPServer
import EventProtocol
import EventServer
import Foundation
import Logging
import PushSenders

/// The push options: which platforms the server sends to, with which credentials. Without any, pushes
/// are only logged.
struct PushArguments: ParsableArguments {
  @Option(name: .customLong("apns-key-file"), help: "The APNs signing key (.p8 file from Apple); enables APNs.")
  var apnsKeyFile: String?
  @Option(name: .customLong("apns-key-id"), help: "The APNs key's id (10 characters).")
  var apnsKeyID: String?
  @Option(name: .customLong("apns-team-id"), help: "The Apple developer team id.")
  var apnsTeamID: String?
  @Option(name: .customLong("apns-topic"), help: "The app's bundle id.")
  var apnsTopic: String?
  @Flag(name: .customLong("apns-sandbox"), help: "Send to APNs' development server (apps signed for development).")
  var apnsSandbox = false
  @Option(name: .customLong("apns-server"), help: .hidden)
  var apnsServer: String?
  @Option(
    name: .customLong("fcm-service-account"),
    help: "A Google service account's JSON key file with FCM rights; enables FCM."
  )
  var fcmServiceAccount: String?
  @Option(name: .customLong("fcm-server"), help: .hidden)
  var fcmServer: String?
  @Option(
    name: .customLong("push-default-platform"),
    help: "apns | fcm: where tokens registered without a platform go (default: the only platform configured)."
  )
  var defaultPlatform: String?

  func validate() throws {
    let apnsParts = [apnsKeyFile, apnsKeyID, apnsTeamID, apnsTopic]
    if apnsParts.contains(where: { $0 != nil }), apnsParts.contains(where: { $0 == nil }) {
      throw ValidationError("APNs needs all of --apns-key-file, --apns-key-id, --apns-team-id and --apns-topic")
    }
    if let defaultPlatform, PushPlatform(rawValue: defaultPlatform) == nil {
      throw ValidationError("--push-default-platform must be apns or fcm, not '\(defaultPlatform)'")
    }
  }

  /// Whether any platform is configured.
  var isConfigured: Bool { apnsKeyFile != nil || fcmServiceAccount != nil }

  /// The gateway the options ask for: the platforms' senders over `client`, logging what has no sender.
  /// - Throws: ``Options/Problem`` when a key file cannot be read or is not a key.
  func gateway(client: HTTPClient, logger: Logger) throws -> any PushGateway {
    var apns: APNsSender?
    if let apnsKeyFile, let apnsKeyID, let apnsTeamID, let apnsTopic {
      guard let pem = try? String(contentsOfFile: apnsKeyFile, encoding: .utf8) else {
        throw Options.Problem(description: "cannot read the APNs key file \(apnsKeyFile)")
      }
      let credentials: APNsCredentials
      do {
        credentials = try APNsCredentials(teamID: apnsTeamID, keyID: apnsKeyID, p8: pem)
      } catch {
        throw Options.Problem(description: "\(apnsKeyFile) is not a P-256 private key in PEM (a .p8 file)")
      }
      let server = apnsServer ?? (apnsSandbox ? APNsConfiguration.sandboxServer : APNsConfiguration.productionServer)
      apns = APNsSender(
        configuration: APNsConfiguration(credentials: credentials, topic: apnsTopic, server: server),
        httpClient: client,
        logger: logger
      )
    }
    var fcm: FCMSender?
    if let fcmServiceAccount {
      guard let data = FileManager.default.contents(atPath: fcmServiceAccount) else {
        throw Options.Problem(description: "cannot read the FCM service-account file \(fcmServiceAccount)")
      }
      let credentials: FCMCredentials
      do {
        credentials = try FCMCredentials(serviceAccountJSON: data)
      } catch {
        throw Options.Problem(description: "\(fcmServiceAccount): \(error)")
      }
      fcm = FCMSender(
        configuration: FCMConfiguration(
          credentials: credentials,
          server: fcmServer ?? FCMConfiguration.productionServer
        ),
        httpClient: client,
        logger: logger
      )
    }
    return PlatformPushGateway(
      apns: apns,
      fcm: fcm,
      unspecified: defaultPlatform.flatMap(PushPlatform.init(rawValue:)),
      fallback: LoggingPushGateway(logger: logger)
    )
  }
}
