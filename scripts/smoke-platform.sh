#!/bin/sh
# Unpack the two tarballs of `npm run package` for one platform into a fresh
# project (node_modules/dsh-session-native and its platform package, as npm
# installs them, without npm's os/cpu checks) and run the smoke test there
# (scripts/smoke.mjs) with the given Node command (POSIX sh: it runs in
# Alpine too):
#   sh scripts/smoke-platform.sh <dist dir> <platform> [node command...]
# e.g. sh scripts/smoke-platform.sh /tmp/dist-arm64 linux-arm64-gnu \
#        qemu-aarch64-static -L /usr/aarch64-linux-gnu /path/to/arm64/node
# Prints the smoke test's JSON line; exits non-zero when it fails.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dist=$1
platform=$2
shift 2
[ "$#" -gt 0 ] || set -- node
main=$(ls "$dist"/dsh-session-native-[0-9]*.tgz)
binary=$(ls "$dist"/dsh-session-native-"$platform"-[0-9]*.tgz)
project=$(mktemp -d "${TMPDIR:-/tmp}/dsh-smoke-project-XXXXXX")
trap 'rm -rf "$project"' EXIT
mkdir -p "$project/node_modules/dsh-session-native" "$project/node_modules/dsh-session-native-$platform"
tar -xzf "$main" -C "$project/node_modules/dsh-session-native" --strip-components=1
tar -xzf "$binary" -C "$project/node_modules/dsh-session-native-$platform" --strip-components=1
echo '{"name":"smoke","private":true}' > "$project/package.json"
"$@" "$here/smoke.mjs" "$project"
