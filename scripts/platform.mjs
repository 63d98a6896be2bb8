// This machine's napi platform name (the npm/<name>/ folder and the
// dsh-session-native-<name> package), as napi's loader picks it.
import { existsSync } from 'node:fs'
import path from 'node:path'

export function hostPlatform() {
  const { platform, arch } = process
  if (platform === 'win32') return `win32-${arch}-msvc`
  if (platform !== 'linux') return `${platform}-${arch}`
  const glibc = process.report?.getReport?.()?.header?.glibcVersionRuntime
  return `linux-${arch}-${glibc ? 'gnu' : 'musl'}`
}

/** The binary `napi build --platform` writes into `root` for this machine. */
export function hostBinary(root) {
  return path.join(root, `dsh-session-native.${hostPlatform()}.node`)
}

/** Whether `root` holds a built addon for this machine (the binary and napi's loader). */
export function isBuilt(root) {
  return existsSync(hostBinary(root)) && existsSync(path.join(root, 'napi-loader.js'))
}

/** The napi platform name of a Rust target triple (`aarch64-unknown-linux-gnu` → `linux-arm64-gnu`), or null. */
export function platformOfTarget(triple) {
  const arch = { x86_64: 'x64', aarch64: 'arm64' }[triple.split('-')[0]]
  if (arch === undefined) return null
  if (/-linux-gnu$/.test(triple)) return `linux-${arch}-gnu`
  if (/-linux-musl$/.test(triple)) return `linux-${arch}-musl`
  if (/-apple-darwin$/.test(triple)) return `darwin-${arch}`
  if (/-pc-windows-msvc$/.test(triple)) return `win32-${arch}-msvc`
  return null
}

/** The Rust target triple of this machine's napi platform name (the inverse of platformOfTarget). */
export function hostTarget() {
  const name = hostPlatform()
  const arch = { x64: 'x86_64', arm64: 'aarch64' }[process.arch]
  if (name.endsWith('-gnu')) return `${arch}-unknown-linux-gnu`
  if (name.endsWith('-musl')) return `${arch}-unknown-linux-musl`
  if (name.startsWith('darwin-')) return `${arch}-apple-darwin`
  return `${arch}-pc-windows-msvc`
}
