#!/usr/bin/env bash
# Production lines of the like-for-like core (issue 30's measure): the native
# log, the surface fold, the session binding, the JS session and the service.
# A Rust file counts up to its test module (the first unindented `#[cfg(test)]`;
# a test-only method inside an impl counts); a JS file whole.
# Usage: scripts/core-lines.sh [REV]   (default HEAD; 76d40cf is before issue 30)
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:-HEAD}
total=0
for f in $(git ls-tree -r --name-only "$rev" -- src/log src/surface.rs src/binding/session.rs \
  src/binding/payloads.rs lib/core/session.js lib/core/events.js lib/core/derived.js \
  lib/core/handle.js lib/service.js); do
  n=$(git show "$rev:$f" | awk '/^#\[cfg\(test\)\]/ { done = 1 } !done { n++ } END { print n + 0 }')
  printf '%6d %s\n' "$n" "$f"
  total=$((total + n))
done
echo "total $total"
