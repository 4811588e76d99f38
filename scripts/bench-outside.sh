#!/usr/bin/env bash
# Runs Bench as an app's package would build it: Sources/Bench copied into a new package that depends on
# this repository by path, built with a plain `swift build -c release` (no flag a user would have to set).
# The figures the performance targets are judged by (docs/performance.md, "Current figures").
# Usage: scripts/bench-outside.sh [WORKLOAD…] [--quick]   (default: W3 C1 W4)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/outside-bench/Sources/OutsideBench"
cp "$here"/Sources/Bench/*.swift "$work/outside-bench/Sources/OutsideBench/"
cat > "$work/outside-bench/Package.swift" <<MANIFEST
// swift-tools-version:6.1
import PackageDescription

let package = Package(
  name: "outside-bench",
  platforms: [.macOS(.v15)],
  dependencies: [.package(path: "$here")],
  targets: [
    .executableTarget(
      name: "OutsideBench",
      dependencies: [
        .product(name: "EventProtocol", package: "$(basename "$here")"),
        .product(name: "EventServer", package: "$(basename "$here")"),
        .product(name: "JSONCoding", package: "$(basename "$here")"),
        .product(name: "UpdateMachine", package: "$(basename "$here")"),
        .product(name: "VideoMessaging", package: "$(basename "$here")"),
        .product(name: "Simulation", package: "$(basename "$here")"),
      ]
    )
  ],
  swiftLanguageModes: [.v6]
)
MANIFEST
echo "building Bench from a dependent package (release, no flags)…" >&2
(cd "$work/outside-bench" && swift build -c release >&2)
if [ "$#" -eq 0 ]; then set -- W3 C1 W4; fi
"$work/outside-bench/.build/release/OutsideBench" "$@"
