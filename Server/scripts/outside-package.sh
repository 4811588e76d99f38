#!/usr/bin/env bash
# Builds docs/serving.md's kanban server as an app's own package would: a new package beside a clone of this
# repository, depending on the root and on Server/ by path exactly as the document says, with the
# document's code as its source. Fails when the document's instructions or code no longer build.
# Usage: Server/scripts/outside-package.sh [TIMEOUT_SECONDS]   (default 900)
set -euo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
limit="${1:-900}"
work="$(mktemp -d)"
# A build stopped at its limit may still have a compiler ending in the folder: try again once it has.
trap 'rm -rf "$work" 2>/dev/null || { sleep 5; rm -rf "$work"; }' EXIT

git clone -q "$here" "$work/swift-update-machine"
mkdir -p "$work/kanban/Sources/kanban-server"
cat > "$work/kanban/Package.swift" <<'MANIFEST'
// swift-tools-version:6.1
import PackageDescription

let package = Package(
  name: "kanban",
  platforms: [.macOS(.v15)],
  // As docs/serving.md says: this repository cloned at ../swift-update-machine, both packages by path.
  dependencies: [
    .package(path: "../swift-update-machine"),
    .package(path: "../swift-update-machine/Server"),
    .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
  ],
  targets: [
    .executableTarget(
      name: "kanban-server",
      dependencies: [
        .product(name: "EventHTTPServer", package: "Server"),
        .product(name: "EventServer", package: "swift-update-machine"),
        .product(name: "EventProtocol", package: "swift-update-machine"),
        .product(name: "Logging", package: "swift-log"),
      ]
    )
  ]
)
MANIFEST
# The document's manifest lines must be the ones used here.
for line in '.package(path: "../swift-update-machine"),' '.package(path: "../swift-update-machine/Server"),' \
  '.product(name: "EventHTTPServer", package: "Server"),'; do
  grep -qF "$line" "$here/docs/serving.md" || { echo "docs/serving.md no longer says: $line"; exit 1; }
done
# The server's code, as the document shows it (the first swift block after "## The server").
awk '/^## The server/{on=1} on && /^```swift/{grab=1; next} grab && /^```/{exit} grab{print}' \
  "$here/docs/serving.md" > "$work/kanban/Sources/kanban-server/Kanban.swift"
grep -q "func makeKanbanServer" "$work/kanban/Sources/kanban-server/Kanban.swift" || {
  echo "docs/serving.md: no server code found under '## The server'"; exit 1
}
# The stored board, as the document shows it (the first swift block after "## Your data in your tables").
awk '/^## Your data in your tables/{on=1} on && /^```swift/{grab=1; next} grab && /^```/{exit} grab{print}' \
  "$here/docs/serving.md" > "$work/kanban/Sources/kanban-server/StoredKanban.swift"
grep -q "func makeStoredKanbanServer" "$work/kanban/Sources/kanban-server/StoredKanban.swift" || {
  echo "docs/serving.md: no stored server code found under '## Your data in your tables'"; exit 1
}
sed -i '1i import EventHTTPServer\nimport EventProtocol\nimport EventServer\nimport Foundation\nimport Logging\n' \
  "$work/kanban/Sources/kanban-server/StoredKanban.swift"
cat > "$work/kanban/Sources/kanban-server/main.swift" <<'MAIN'
import Foundation

// Start each on a free loopback port with a temporary data folder, then shut down at once: they build and run.
for stored in [false, true] {
  let folder = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("kanban-\(UUID().uuidString)")
  let name = stored ? "stored-kanban-server" : "kanban-server"
  let running: Task<Void, any Error>
  let shutdown: @Sendable () async -> Void
  if stored {
    let server = try makeStoredKanbanServer(port: 0, dataDirectory: folder)
    running = Task { try await server.run(handleSignals: false) { port in print("\(name) listened on \(port)") } }
    shutdown = { await server.shutdown() }
  } else {
    let server = try makeKanbanServer(port: 0, dataDirectory: folder)
    running = Task { try await server.run(handleSignals: false) { port in print("\(name) listened on \(port)") } }
    shutdown = { await server.shutdown() }
  }
  try await Task.sleep(for: .milliseconds(500))
  await shutdown()
  try await running.value
  try? FileManager.default.removeItem(at: folder)
  print("\(name) stopped")
}
MAIN
cd "$work/kanban"
status=0
timeout "$limit" swift build >"$work/build.log" 2>&1 || status=$?
tail -3 "$work/build.log"
if [ "$status" = 124 ]; then echo "the kanban package's build did not finish within $limit s (a hang guard; raise it on a slower machine)"; fi
if [ "$status" != 0 ]; then exit "$status"; fi
timeout 60 .build/debug/kanban-server
