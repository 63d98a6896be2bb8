#!/usr/bin/env bash
# .ci/run's binaries beyond linux-x64-gnu (Linux x64 hosts), after it packed
# this machine's tarballs into dist/:
# - aarch64-unknown-linux-gnu: cross-compiled (cargo-zigbuild, glibc 2.28),
#   packed, and smoke-tested under QEMU with an arm64 Node; its results must
#   equal the x64 package's (the same smoke test, run natively);
# - x86_64-unknown-linux-musl: cross-compiled and packed; its binary must
#   need only musl's libc (no musl Node here to run it: the release workflow
#   runs it in Alpine).
# Needs: rustup targets, zig + cargo-zigbuild, qemu-user-static and the
# arm64 C/C++ runtime (libc6/libstdc++6/libgcc-s1-arm64-cross), and the
# Node cache of scripts/fetch-nodes.sh (DSH_NODE_CACHE).
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${DSH_NODE_CACHE:?run scripts/fetch-nodes.sh first}"
arm_node="$cache/node_modules/node22-arm64/bin/node"
out=$(mktemp -d "${TMPDIR:-/tmp}/dsh-platforms-XXXXXX")
trap 'rm -rf "$out"' EXIT

echo "-- linux-x64-gnu: smoke test of dist/ (native)"
x64=$(sh scripts/smoke-platform.sh dist linux-x64-gnu node)
echo "$x64"

echo "-- linux-arm64-gnu: npm run package -- --target aarch64-unknown-linux-gnu"
start=$SECONDS
node scripts/package.mjs --target aarch64-unknown-linux-gnu --out "$out/arm64"
echo "   built and packed in $((SECONDS - start)) s"
echo "-- linux-arm64-gnu: smoke test under QEMU"
arm64=$(sh scripts/smoke-platform.sh "$out/arm64" linux-arm64-gnu qemu-aarch64-static -L /usr/aarch64-linux-gnu "$arm_node")
echo "$arm64"
node -e '
  const [x64, arm64] = process.argv.slice(1).map((l) => JSON.parse(l))
  const keys = ["events", "messages", "derive", "surface", "jsonl"]
  const differ = keys.filter((k) => x64[k] !== arm64[k])
  if (arm64.platform !== "linux-arm64" || differ.length > 0) {
    console.error(`arm64 differs from x64 in ${differ.join(", ") || "platform " + arm64.platform}`)
    process.exit(1)
  }
  console.log(`   arm64 equals x64: ${keys.join(", ")}`)
' "$x64" "$arm64"

echo "-- linux-x64-musl: npm run package -- --target x86_64-unknown-linux-musl"
start=$SECONDS
node scripts/package.mjs --target x86_64-unknown-linux-musl --out "$out/musl"
echo "   built and packed in $((SECONDS - start)) s"
node scripts/check-binary.mjs dsh-session-native.linux-x64-musl.node linux-x64-musl
