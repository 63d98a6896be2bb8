#!/usr/bin/env node
// npm run package [-- --no-build]: build this machine's binary (on Linux
// glibc, against glibc 2.28 with cargo-zigbuild) and write installable
// tarballs of the main package and of this platform's package into dist/.
// The main package's package.json gains the exact-version optionalDependencies
// on every platform package (as `napi prepublish` adds them on publish: they
// stay out of the repository's package.json so `npm ci` works before they are
// published). --no-build packs the binary already built (CI builds once);
// --out DIR writes the tarballs there instead of dist/.
import { spawnSync } from 'node:child_process'
import { copyFileSync, cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { hostBinary, hostPlatform, isBuilt } from './platform.mjs'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const outAt = process.argv.indexOf('--out')
const dist = outAt >= 0 ? path.resolve(process.argv[outAt + 1]) : path.join(root, 'dist')
const shell = process.platform === 'win32'

function run(cmd, args, cwd = root) {
  const r = spawnSync(cmd, args, { cwd, stdio: 'inherit', shell })
  if (r.status !== 0) {
    console.error(`package: ${cmd} ${args.join(' ')} failed`)
    process.exit(1)
  }
}

/** Whether cargo-zigbuild and zig are here to build against an old glibc. */
function canZig() {
  const zigbuild = spawnSync('cargo-zigbuild', ['--version'], { stdio: 'ignore', shell })
  return zigbuild.status === 0
}

const platform = hostPlatform()
if (!process.argv.includes('--no-build')) {
  if (platform === 'linux-x64-gnu' && canZig()) run('npm', ['run', 'build:glibc-2.28'])
  else {
    if (platform.endsWith('-gnu')) console.warn('package: cargo-zigbuild not found; the binary needs the glibc of this machine (pip install ziglang cargo-zigbuild)')
    run('npm', ['run', 'build'])
  }
}
if (!isBuilt(root)) {
  console.error(`package: no ${path.basename(hostBinary(root))}; run without --no-build`)
  process.exit(1)
}

rmSync(dist, { recursive: true, force: true })
const stage = path.join(dist, 'stage')
mkdirSync(stage, { recursive: true })

// The platform package: its package.json, README and the binary.
const platformDir = path.join(stage, platform)
mkdirSync(platformDir)
for (const f of readdirSync(path.join(root, 'npm', platform))) copyFileSync(path.join(root, 'npm', platform, f), path.join(platformDir, f))
copyFileSync(hostBinary(root), path.join(platformDir, path.basename(hostBinary(root))))
copyFileSync(path.join(root, 'LICENSE'), path.join(platformDir, 'LICENSE'))

// The main package: the files it lists, and package.json with the optional dependencies.
const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'))
const mainDir = path.join(stage, 'main')
mkdirSync(mainDir)
for (const entry of [...pkg.files, 'README.md', 'LICENSE']) {
  const from = path.join(root, entry)
  if (existsSync(from)) cpSync(from, path.join(mainDir, entry), { recursive: true })
}
const optionalDependencies = {}
for (const dir of readdirSync(path.join(root, 'npm')).sort()) {
  const p = JSON.parse(readFileSync(path.join(root, 'npm', dir, 'package.json'), 'utf8'))
  if (p.version !== pkg.version) {
    console.error(`package: npm/${dir} is version ${p.version}, the package ${pkg.version}`)
    process.exit(1)
  }
  optionalDependencies[p.name] = pkg.version
}
const { prepack: _prepack, pretest: _pretest, ...scripts } = pkg.scripts ?? {}
writeFileSync(path.join(mainDir, 'package.json'), `${JSON.stringify({ ...pkg, scripts, optionalDependencies }, null, 2)}\n`)

for (const dir of [platformDir, mainDir]) run('npm', ['pack', '--silent', '--ignore-scripts', '--pack-destination', dist], dir)
rmSync(stage, { recursive: true, force: true })
for (const f of readdirSync(dist)) console.log(`package: ${path.join(dist, f)}`)
