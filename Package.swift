// swift-tools-version:6.1
// The root package depends on no other package: the Swift toolchain only (the user's explicit choice).

import PackageDescription

/// Settings applied to every target, so the whole package is held to the same rules.
let swiftSettings: [SwiftSetting] = [
  // https://github.com/swiftlang/swift-evolution/blob/main/proposals/0335-existential-any.md
  .enableUpcomingFeature("ExistentialAny"),
  // https://github.com/swiftlang/swift-evolution/blob/main/proposals/0444-member-import-visibility.md
  .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
  name: "swift-update-machine",
  platforms: [.macOS(.v15), .iOS(.v18)],
  products: [
    .library(name: "EventProtocol", targets: ["EventProtocol"]),
    // For payloads that opt in to writing and reading their own fields (JSONFieldsCodable).
    .library(name: "JSONCoding", targets: ["JSONCoding"]),
    .library(name: "EventServer", targets: ["EventServer"]),
    .library(name: "UpdateMachine", targets: ["UpdateMachine"]),
    .library(name: "UpdateMachineTesting", targets: ["UpdateMachineTesting"]),
    .library(name: "TestScheduling", targets: ["TestScheduling"]),
    .library(name: "VideoMessaging", targets: ["VideoMessaging"]),
    .library(name: "Simulation", targets: ["Simulation"]),
    .library(name: "EpisodeQueue", targets: ["EpisodeQueue"]),
    // A small note board (server application and reducer): for demos, soak tests and examples.
    .library(name: "SampleApps", targets: ["SampleApps"]),
    .executable(name: "Demo", targets: ["Demo"]),
    .executable(name: "Bench", targets: ["Bench"]),
  ],
  targets: [
    // The package's own JSON coder: one pass each way for every `Codable` type, Foundation's bytes out
    // (docs/json-coder.md). Depends on nothing; the package's modules use its `package` API, apps only its
    // opt-in for payloads (JSONFieldsCodable, JSONFieldsParity).
    .target(name: "JSONCoding", swiftSettings: swiftSettings),
    // The shared vocabulary: ids, event envelopes, Zulip-shaped wire JSON, API errors, time and randomness.
    .target(name: "EventProtocol", dependencies: ["JSONCoding"], swiftSettings: swiftSettings),
    // The client engine: a pure core inside an actor shell. Never imports EventServer.
    .target(name: "UpdateMachine", dependencies: ["EventProtocol", "JSONCoding"], swiftSettings: swiftSettings),
    // The in-process event-queue server: a pure state machine inside an actor shell.
    .target(name: "EventServer", dependencies: ["EventProtocol", "JSONCoding"], swiftSettings: swiftSettings),
    // The testing kit apps import: a manual clock, a fault-injecting transport, a deterministic loopback world.
    .target(
      name: "UpdateMachineTesting",
      dependencies: ["EventProtocol", "EventServer", "UpdateMachine"],
      swiftSettings: swiftSettings
    ),
    // The video domain: server application, client reducer, blob stores and per-video transfers.
    .target(
      name: "VideoMessaging",
      dependencies: ["EventProtocol", "EventServer", "JSONCoding", "UpdateMachine"],
      swiftSettings: swiftSettings
    ),
    // The podcast episode queue domain: server application, client reducer, per-device downloads.
    .target(
      name: "EpisodeQueue",
      dependencies: ["EventProtocol", "EventServer", "UpdateMachine"],
      swiftSettings: swiftSettings
    ),
    // A deterministic world of users and devices on flaky networks, over the real cores and wire format.
    .target(
      name: "Simulation",
      dependencies: [
        "EventProtocol", "EventServer", "JSONCoding", "UpdateMachine", "UpdateMachineTesting", "VideoMessaging",
        "EpisodeQueue",
      ],
      swiftSettings: swiftSettings
    ),
    // Small example applications (server side and reducer) used by the demo and the tests.
    .target(
      name: "SampleApps",
      dependencies: ["EventProtocol", "EventServer", "JSONCoding", "UpdateMachine"],
      swiftSettings: swiftSettings
    ),
    .executableTarget(
      name: "Demo",
      dependencies: [
        "EventProtocol", "EventServer", "UpdateMachine", "UpdateMachineTesting", "SampleApps", "VideoMessaging",
        "Simulation", "EpisodeQueue",
      ],
      swiftSettings: swiftSettings
    ),
    // A Swift Testing trait for test targets (these and an app's): CPU-bound cases leave the async tests a
    // thread (docs/testing.md).
    .target(name: "TestScheduling", swiftSettings: swiftSettings),
    // Random values and documents for the coder's property tests (its own and the vocabulary's).
    .target(
      name: "JSONTestSupport",
      dependencies: ["EventProtocol"],
      path: "Tests/JSONTestSupport",
      swiftSettings: swiftSettings
    ),
    .testTarget(
      name: "JSONCodingTests",
      dependencies: ["JSONCoding", "JSONTestSupport", "TestScheduling"],
      swiftSettings: swiftSettings
    ),
    .testTarget(
      name: "EventProtocolTests",
      dependencies: ["EventProtocol", "JSONCoding", "JSONTestSupport", "TestScheduling"],
      resources: [.copy("Fixtures")],
      swiftSettings: swiftSettings
    ),
    .testTarget(
      name: "UpdateMachineTests",
      dependencies: [
        "EventProtocol", "EventServer", "JSONCoding", "UpdateMachine", "UpdateMachineTesting", "SampleApps",
        "TestScheduling",
      ],
      swiftSettings: swiftSettings
    ),
    .testTarget(
      name: "VideoMessagingTests",
      dependencies: [
        "EventProtocol", "EventServer", "JSONCoding", "JSONTestSupport", "UpdateMachine", "UpdateMachineTesting",
        "VideoMessaging", "TestScheduling",
      ],
      swiftSettings: swiftSettings
    ),
    // The performance workloads; prints figures, never a timed test.
    .executableTarget(
      name: "Bench",
      dependencies: ["EventProtocol", "EventServer", "JSONCoding", "UpdateMachine", "VideoMessaging", "Simulation"],
      swiftSettings: swiftSettings
    ),
    .testTarget(name: "BenchTests", dependencies: ["Bench"], swiftSettings: swiftSettings),
    .testTarget(
      name: "DemoTests",
      dependencies: ["Demo", "Simulation", "TestScheduling"],
      swiftSettings: swiftSettings
    ),
    .testTarget(
      name: "SimulationTests",
      dependencies: ["EventProtocol", "EventServer", "UpdateMachine", "SampleApps", "Simulation", "TestScheduling"],
      swiftSettings: swiftSettings
    ),
    .testTarget(
      name: "EpisodeQueueTests",
      dependencies: [
        "EventProtocol", "EventServer", "UpdateMachine", "UpdateMachineTesting", "EpisodeQueue", "TestScheduling",
      ],
      swiftSettings: swiftSettings
    ),
    .testTarget(
      name: "EventServerTests",
      dependencies: [
        "EventProtocol", "EventServer", "JSONCoding", "UpdateMachineTesting", "SampleApps", "TestScheduling",
      ],
      swiftSettings: swiftSettings
    ),
  ],
  swiftLanguageModes: [.v6]
)
