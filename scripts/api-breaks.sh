#!/usr/bin/env bash
# Fails on a break of the root package's public API that CHANGELOG.md does not list. Compares every library
# product with the commit named in .api-baseline (`swift package diagnose-api-breaking-changes`, which builds
# both); each break the changelog lists is a line of it holding the digester's exact message in backticks,
# `API breakage: …`, and is allowed. docs/versioning.md, "How a change is checked".
# Usage: scripts/api-breaks.sh [--help]
set -euo pipefail
case "${1:-}" in
  -h | --help)
    sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
  "") ;;
  *)
    echo "scripts/api-breaks.sh: takes no options, got '$1' (see --help)" >&2
    exit 2
    ;;
esac
cd "$(dirname "$0")/.."
baseline=$(grep -v '^#' .api-baseline | grep -m1 -E '[0-9a-f]{7,40}' | tr -d '[:space:]') || {
  echo "scripts/api-breaks.sh: .api-baseline names no commit" >&2
  exit 2
}
git cat-file -e "$baseline^{commit}" 2>/dev/null || {
  echo "scripts/api-breaks.sh: the baseline $baseline is not a commit of this clone (a shallow clone? fetch it)" >&2
  exit 2
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The breaks the changelog lists, one exact message a line, as the digester's allowlist reads them.
grep -o '`API breakage: [^`]*`' CHANGELOG.md | tr -d '`' >"$work/allowed" || true
echo "comparing the public API with $baseline ($(wc -l <"$work/allowed") breaks listed in CHANGELOG.md)…" >&2
status=0
swift package diagnose-api-breaking-changes "$baseline" --breakage-allowlist-path "$work/allowed" \
  >"$work/report" 2>&1 || status=$?
if [ "$status" -ne 0 ]; then
  grep -E "API breakage|breaking change|error:" "$work/report" || tail -40 "$work/report"
  echo "public API: a break since $baseline that CHANGELOG.md does not list (add its message, in backticks, to"
  echo "the changelog's Unreleased section and its replacement to docs/upgrading.md)"
  exit 1
fi
grep -E "No breaking changes|breaking change" "$work/report" || true
echo "public API: no break since $baseline beyond those CHANGELOG.md lists"
