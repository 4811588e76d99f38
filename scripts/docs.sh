#!/usr/bin/env bash
# Builds the DocC documentation of every root module with a catalog (Sources/<Module>/<Module>.docc) with the
# toolchain's own docc: symbol graphs from `swift package dump-symbol-graph` (the debug build, reused when it
# is there), then `docc convert` with warnings as errors. A public symbol without a doc comment counts as a
# warning too. The archives go to .build/documentation/<Module>.doccarchive. docs/testing.md.
# Usage: scripts/docs.sh [--help]
set -euo pipefail
case "${1:-}" in
  -h | --help)
    sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
  "") ;;
  *)
    echo "scripts/docs.sh: takes no options, got '$1' (see --help)" >&2
    exit 2
    ;;
esac
cd "$(dirname "$0")/.."
log=$(mktemp)
echo "symbol graphs (swift package dump-symbol-graph)…" >&2
swift package dump-symbol-graph --skip-synthesized-members --minimum-access-level public >"$log" 2>&1 || {
  tail -40 "$log"
  exit 1
}
graphs=$(sed -n 's/^Files written to //p' "$log" | tail -1)
if [ -z "$graphs" ] || [ ! -d "$graphs" ]; then
  graphs=$(find .build -maxdepth 2 -type d -name symbolgraph | head -1)
fi
[ -d "$graphs" ] || { cat "$log"; echo "scripts/docs.sh: no symbol graphs written"; exit 1; }
out=.build/documentation
rm -rf "$out"
mkdir -p "$out"
failed=0
for catalog in Sources/*/*.docc; do
  module=$(basename "$catalog" .docc)
  own="$out/$module.symbols"
  mkdir -p "$own"
  cp "$graphs/$module.symbols.json" "$own/"
  cp "$graphs/$module"@*.symbols.json "$own/" 2>/dev/null || true
  # A public declaration with no doc comment of its own: members that implement a documented protocol
  # requirement inherit its comment and are not counted.
  undocumented=$(python3 - "$own/$module.symbols.json" <<'PYTHON'
import json, sys
graph = json.load(open(sys.argv[1]))
implementations = {r["source"] for r in graph.get("relationships", [])
                   if r["kind"] in ("defaultImplementationOf", "requirementOf", "overrides")}
for symbol in graph["symbols"]:
    if symbol.get("accessLevel") not in ("public", "open") or symbol.get("docComment"):
        continue
    if symbol["identifier"]["precise"] in implementations:
        continue
    location = symbol.get("location", {})
    where = location.get("uri", "").split("/Sources/")[-1]
    line = location.get("position", {}).get("line", 0) + 1
    print(f"Sources/{where}:{line}: warning: public {symbol['kind']['displayName'].lower()} "
          f"{'.'.join(symbol['pathComponents'])} has no doc comment")
PYTHON
  )
  if [ -n "$undocumented" ]; then
    echo "$undocumented"
    failed=1
  fi
  if ! docc convert "$catalog" --additional-symbol-graph-dir "$own" --fallback-display-name "$module" \
    --fallback-bundle-identifier "swift-update-machine.$module" --output-path "$out/$module.doccarchive" \
    --warnings-as-errors >"$out/$module.log" 2>&1; then
    cat "$out/$module.log"
    failed=1
  fi
  echo "$module: $(find "$out/$module.doccarchive/data/documentation" -name '*.json' | wc -l) pages" \
    "($(ls "$catalog" | grep -c '\.md$') articles and landing page)"
done
if [ "$failed" -ne 0 ]; then
  echo "documentation: warnings (above)"
  exit 1
fi
echo "documentation: every catalog built, no warnings"
