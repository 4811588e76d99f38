// swift-tools-version:6.1
// Coverage-guided fuzz targets for the root package's decoders and state machines (libFuzzer). Built and run
// by `Fuzz/run`; the root package never depends on this one.

import PackageDescription

let package = Package(
  name: "swift-update-machine-fuzz",
  platforms: [.macOS(.v15)],
  dependencies: [.package(name: "swift-update-machine", path: "..")],
  targets: [
    .executableTarget(
      name: "FuzzTargets",
      dependencies: [
        .product(name: "EventProtocol", package: "swift-update-machine"),
        .product(name: "EventServer", package: "swift-update-machine"),
        .product(name: "UpdateMachine", package: "swift-update-machine"),
        .product(name: "UpdateMachineTesting", package: "swift-update-machine"),
      ],
      swiftSettings: [.unsafeFlags(["-parse-as-library"])]
    )
  ],
  swiftLanguageModes: [.v6]
)
