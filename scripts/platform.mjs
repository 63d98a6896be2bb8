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
