// swift-tools-version:6.1
// The HTTP event server: the root package's EventServer behind Hummingbird. The root never depends on this
// package (it depends on no package at all); this one depends on the root by path.

import Foundation
import PackageDescription

/// SwiftPM names a path dependency after its folder, so the root's package name is the folder's name.
let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().lastPathComponent

let swiftSettings: [SwiftSetting] = [
  .enableUpcomingFeature("ExistentialAny"),
  .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
  name: "event-server",
  platforms: [.macOS(.v15)],
  products: [
    .executable(name: "event-server", targets: ["event-server"]),
    .executable(name: "video-client", targets: ["video-client"]),
    .executable(name: "event-server-load", targets: ["event-server-load"]),
    .executable(name: "soak-client", targets: ["soak-client"]),
    .executable(name: "durability-bench", targets: ["durability-bench"]),
    .executable(name: "stored-scale", targets: ["stored-scale"]),
    .executable(name: "edge-probe", targets: ["edge-probe"]),
    .library(name: "EventHTTPServer", targets: ["EventHTTPServer"]),
    .library(name: "VideoBlobRoutes", targets: ["VideoBlobRoutes"]),
    .library(name: "SQLiteServerLog", targets: ["SQLiteServerLog"]),
    .library(name: "PostgresServerLog", targets: ["PostgresServerLog"]),
    .library(name: "PartitionHosting", targets: ["PartitionHosting"]),
    .library(name: "PushSenders", targets: ["PushSenders"]),
    .library(name: "TokenAuthentication", targets: ["TokenAuthentication"]),
  ],
  dependencies: [
    .package(path: ".."),
    .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
    .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
    .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
    .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
    .package(url: "https://github.com/vapor/sqlite-nio", from: "1.13.2"),
    .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
    .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
    .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
    .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
    .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
    .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
    .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
    .package(url: "https://github.com/vapor/jwt-kit", from: "5.8.0"),
  ],
  targets: [
    // The embedded default input log: records and snapshots in SQLite (WAL, synchronous FULL).
    .target(
      name: "SQLiteServerLog",
      dependencies: [
        .product(name: "EventServer", package: root),
        .product(name: "SQLiteNIO", package: "sqlite-nio"),
        .product(name: "NIOCore", package: "swift-nio"),
      ],
      swiftSettings: swiftSettings
    ),
    // The input log and snapshots in PostgreSQL: one node today (fenced appends), and the gap-safe appends
    // and reads several nodes replicate from.
    .target(
      name: "PostgresServerLog",
      dependencies: [
        .product(name: "EventServer", package: root),
        .product(name: "PostgresNIO", package: "postgres-nio"),
        .product(name: "NIOCore", package: "swift-nio"),
        .product(name: "NIOSSL", package: "swift-nio-ssl"),
        .product(name: "Logging", package: "swift-log"),
      ],
      swiftSettings: swiftSettings
    ),
    // Routes, authentication, rate limiting and the shutdown order, over the root's EventServer: for any
    // ServerApplication (no domain here).
    // A node of a partitioned cluster: the partitions it leases and the cluster node serving each one. Hosts
    // nodes; the storage module below it never calls back up into them.
    .target(
      name: "PartitionHosting",
      dependencies: [
        .product(name: "EventProtocol", package: root),
        .product(name: "EventServer", package: root),
        "PostgresServerLog",
      ],
      swiftSettings: swiftSettings
    ),
    .target(
      name: "EventHTTPServer",
      dependencies: [
        .product(name: "EventProtocol", package: root),
        .product(name: "EventServer", package: root),
        .product(name: "Hummingbird", package: "hummingbird"),
        .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        .product(name: "UnixSignals", package: "swift-service-lifecycle"),
        .product(name: "Logging", package: "swift-log"),
        .product(name: "NIOCore", package: "swift-nio"),
        .product(name: "CoreMetrics", package: "swift-metrics"),
        .product(name: "Prometheus", package: "swift-prometheus"),
        .product(name: "AsyncHTTPClient", package: "async-http-client"),
        .product(name: "NIOHTTP1", package: "swift-nio"),
        .product(name: "NIOPosix", package: "swift-nio"),
        "SQLiteServerLog",
        "PostgresServerLog",
        "PartitionHosting",
      ],
      swiftSettings: swiftSettings
    ),
    // The video domain's blob routes (resumable uploads and ranged downloads), added to an EventHTTPServer.
    .target(
      name: "VideoBlobRoutes",
      dependencies: [
        "EventHTTPServer",
        .product(name: "EventProtocol", package: root),
        .product(name: "EventServer", package: root),
        .product(name: "VideoMessaging", package: root),
        .product(name: "Hummingbird", package: "hummingbird"),
        .product(name: "NIOCore", package: "swift-nio"),
      ],
      swiftSettings: swiftSettings
    ),
    // Push senders: APNs (HTTP/2, ES256 provider tokens) and FCM HTTP v1 (OAuth2 service-account tokens,
    // RS256), each a PushGateway, and a gateway routing each push by its token's platform.
    .target(
      name: "PushSenders",
      dependencies: [
        .product(name: "EventProtocol", package: root),
        .product(name: "EventServer", package: root),
        .product(name: "Crypto", package: "swift-crypto"),
        .product(name: "_CryptoExtras", package: "swift-crypto"),
        .product(name: "AsyncHTTPClient", package: "async-http-client"),
        .product(name: "NIOSSL", package: "swift-nio-ssl"),
        .product(name: "NIOCore", package: "swift-nio"),
        .product(name: "NIOHTTP1", package: "swift-nio"),
        .product(name: "Logging", package: "swift-log"),
      ],
      swiftSettings: swiftSettings
    ),
    // Users proven by the team's identity provider: bearer JWTs verified by jwt-kit against a JWKS, the
    // claims checked by a pure policy, the keys fetched again on a pure schedule.
    .target(
      name: "TokenAuthentication",
      dependencies: [
        "EventHTTPServer",
        .product(name: "EventProtocol", package: root),
        .product(name: "JWTKit", package: "jwt-kit"),
        .product(name: "AsyncHTTPClient", package: "async-http-client"),
        .product(name: "NIOCore", package: "swift-nio"),
        .product(name: "NIOHTTP1", package: "swift-nio"),
        .product(name: "Logging", package: "swift-log"),
      ],
      swiftSettings: swiftSettings
    ),
    // How every tool here reads its command line (swift-argument-parser; one-line errors, exit 2).
    .target(
      name: "CommandLineTool",
      dependencies: [.product(name: "ArgumentParser", package: "swift-argument-parser")],
      swiftSettings: swiftSettings
    ),
    // The server process: options, API keys, the dump on shutdown and its restore on start.
    .executableTarget(
      name: "event-server",
      dependencies: [
        "CommandLineTool",
        "EventHTTPServer",
        "VideoBlobRoutes",
        "PushSenders",
        "TokenAuthentication",
        "PostgresServerLog",
        .product(name: "AsyncHTTPClient", package: "async-http-client"),
        .product(name: "ArgumentParser", package: "swift-argument-parser"),
        .product(name: "VideoMessaging", package: root),
        .product(name: "EpisodeQueue", package: root),
        .product(name: "SampleApps", package: root),
      ],
      swiftSettings: swiftSettings
    ),
    // A video-messaging client process over HTTP, for the end-to-end script.
    .executableTarget(
      name: "video-client",
      dependencies: [
        "CommandLineTool",
        .product(name: "ArgumentParser", package: "swift-argument-parser"),
        .product(name: "EventProtocol", package: root),
        .product(name: "UpdateMachine", package: root),
        .product(name: "VideoMessaging", package: root),
      ],
      swiftSettings: swiftSettings
    ),
    // A note-board client over HTTP, for the crash soak: writes through the outbox, then checks the server.
    .executableTarget(
      name: "soak-client",
      dependencies: [
        "CommandLineTool",
        .product(name: "ArgumentParser", package: "swift-argument-parser"),
        .product(name: "EventProtocol", package: root),
        .product(name: "UpdateMachine", package: root),
        .product(name: "SampleApps", package: root),
      ],
      swiftSettings: swiftSettings
    ),
    // What durability costs: acknowledged mutations per second and latency with and without the log, and the
    // restart time of a long log. Prints figures.
    .executableTarget(
      name: "durability-bench",
      dependencies: [
        "CommandLineTool",
        .product(name: "ArgumentParser", package: "swift-argument-parser"),
        "SQLiteServerLog",
        "PostgresServerLog",
        .product(name: "Logging", package: "swift-log"),
        .product(name: "EventProtocol", package: root),
        .product(name: "EventServer", package: root),
        .product(name: "SampleApps", package: root),
      ],
      swiftSettings: swiftSettings
    ),
    // Whether a stored application's server grows with its data (1,000,000 users' notes). Prints figures.
    .executableTarget(
      name: "stored-scale",
      dependencies: [
        "CommandLineTool",
        .product(name: "ArgumentParser", package: "swift-argument-parser"),
        "SQLiteServerLog",
        "PostgresServerLog",
        .product(name: "Logging", package: "swift-log"),
        .product(name: "EventProtocol", package: root),
        .product(name: "EventServer", package: root),
        .product(name: "SampleApps", package: root),
      ],
      swiftSettings: swiftSettings
    ),
    // The floor of the HTTP edge: a bare NIO HTTP/1.1 server answering the events API's shapes with fixed
    // bodies, to measure what a parked poll and a short poll cost without Hummingbird (figures).
    .executableTarget(
      name: "edge-probe",
      dependencies: [
        "CommandLineTool",
        .product(name: "ArgumentParser", package: "swift-argument-parser"),
        .product(name: "NIOCore", package: "swift-nio"),
        .product(name: "NIOPosix", package: "swift-nio"),
        .product(name: "NIOHTTP1", package: "swift-nio"),
      ],
      swiftSettings: swiftSettings
    ),
    // A load generator on raw connections: parked long-polls held, and dont_block polls per second.
    .executableTarget(
      name: "event-server-load",
      dependencies: [
        "CommandLineTool",
        .product(name: "ArgumentParser", package: "swift-argument-parser"),
        .product(name: "NIOCore", package: "swift-nio"),
        .product(name: "NIOPosix", package: "swift-nio"),
      ],
      swiftSettings: swiftSettings
    ),
    .testTarget(
      name: "EventHTTPServerTests",
      dependencies: [
        "EventHTTPServer",
        "PushSenders",
        "TokenAuthentication",
        .product(name: "JWTKit", package: "jwt-kit"),
        .product(name: "TestScheduling", package: root),
        .product(name: "Crypto", package: "swift-crypto"),
        .product(name: "_CryptoExtras", package: "swift-crypto"),
        .product(name: "AsyncHTTPClient", package: "async-http-client"),
        .product(name: "NIOSSL", package: "swift-nio-ssl"),
        .product(name: "HummingbirdHTTP2", package: "hummingbird"),
        .product(name: "HummingbirdTesting", package: "hummingbird"),
        "VideoBlobRoutes",
        "SQLiteServerLog",
        .product(name: "SQLiteNIO", package: "sqlite-nio"),
        "PostgresServerLog",
        "PartitionHosting",
        .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        .product(name: "EventProtocol", package: root),
        .product(name: "EventServer", package: root),
        .product(name: "UpdateMachine", package: root),
        .product(name: "UpdateMachineTesting", package: root),
        .product(name: "VideoMessaging", package: root),
        .product(name: "EpisodeQueue", package: root),
        .product(name: "SampleApps", package: root),
      ],
      swiftSettings: swiftSettings
    ),
  ],
  swiftLanguageModes: [.v6]
)
