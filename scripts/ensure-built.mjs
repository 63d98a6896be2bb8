#!/usr/bin/env node
// `npm test` (pretest) on a checkout whose addon is not built: build it
// first (`npm run build`, a release build, 1-3 min), or say in one line how
// to when there is no Rust toolchain to build it with; and install the
// published line's reference into test-published/ when it is not there.
import { spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const require = createRequire(import.meta.url)

function loads() {
  try {
    require(path.join(root, 'binding.js'))
    return true
  } catch {
    return false
  }
}

/** The published line's reference (test-published/: 0.1.1-rc.2 and its peers, installed apart from the root; its tests diff against it). */
function ensureReference() {
  const dir = path.join(root, 'test-published')
  if (!existsSync(path.join(dir, 'package.json')) || existsSync(path.join(dir, 'node_modules', '@deepseek-ai', 'dsh-session'))) return
  console.error('dsh-session-native: installing the published line\'s reference into test-published/ (npm ci there)')
  const ci = spawnSync('npm', ['ci', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: dir, stdio: 'inherit', shell: process.platform === 'win32' })
  if (ci.status !== 0) {
    console.error('dsh-session-native: `npm ci` in test-published/ failed; see its output above')
    process.exit(1)
  }
}

if (loads()) {
  ensureReference()
  process.exit(0)
}

const cargo = spawnSync('cargo', ['--version'], { stdio: 'ignore', shell: process.platform === 'win32' })
if (cargo.status !== 0) {
  console.error('dsh-session-native: the native addon is not built and cargo is not on PATH: install Rust (https://rustup.rs), then run `npm run build`')
  process.exit(1)
}
console.error('dsh-session-native: the native addon is not built; building it first (npm run build)')
const build = spawnSync('npm', ['run', 'build'], { cwd: root, stdio: 'inherit', shell: process.platform === 'win32' })
if (build.status !== 0 || !loads()) {
  console.error('dsh-session-native: `npm run build` failed; see its output above')
  process.exit(1)
}
ensureReference()
