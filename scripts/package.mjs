#!/usr/bin/env node
// npm run package [-- --target <rust triple>] [--no-build] [--out DIR]:
// build a platform's binary and write installable tarballs of the main
// package, of the published line's package (published/) and of that
// platform's package into dist/ (the folder holds exactly those three
// afterwards).
// - no --target: this machine's platform (on Linux glibc, built against
//   glibc 2.28 with cargo-zigbuild when it is here).
// - --target <triple>, one of package.json's napi.targets: cross-compiled
//   with `napi build --cross-compile` (cargo-zigbuild and zig: pip install
//   ziglang cargo-zigbuild; `rustup target add <triple>`); a gnu target is
//   linked against glibc 2.28 (`<triple>.2.28`). Darwin and Windows targets
//   build only on their own systems (zig has no macOS SDK or MSVC here).
// Every Linux binary is checked before it is packed (scripts/check-binary.mjs:
// GLIBC ≤ 2.28 for gnu, only musl's libc for musl); only this machine's own
// build without zig may need a newer glibc (packed with a warning).
// The main package's package.json gains the exact-version optionalDependencies
// on every platform package (as `napi prepublish` adds them on publish: they
// stay out of the repository's package.json so `npm ci` works before they are
// published). --no-build packs the binary already built in the repository
// root (CI builds once; the release workflow copies its artifacts there).
import { spawnSync } from 'node:child_process'
import { copyFileSync, cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { checkBinary } from './check-binary.mjs'
import { hostPlatform, hostTarget, platformOfTarget } from './platform.mjs'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const argv = process.argv.slice(2)
const option = (name) => {
  const at = argv.indexOf(name)
  if (at < 0) return undefined
  const value = argv[at + 1]
  if (value === undefined || value.startsWith('--')) fail(`${name} needs a value`, 64)
  return value
}
const dist = path.resolve(option('--out') ?? path.join(root, 'dist'))
const shell = process.platform === 'win32'
const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'))

function fail(message, code = 1) {
  console.error(`package: ${message}`)
  process.exit(code)
}

function run(cmd, args, cwd = root) {
  const r = spawnSync(cmd, args, { cwd, stdio: 'inherit', shell })
  if (r.status !== 0) fail(`${cmd} ${args.join(' ')} failed`)
}

/** Whether cargo-zigbuild and zig are here to build against an old glibc, or for another platform. */
function canZig() {
  const zigbuild = spawnSync('cargo-zigbuild', ['--version'], { stdio: 'ignore', shell })
  return zigbuild.status === 0
}

const target = option('--target') ?? hostTarget()
if (!pkg.napi.targets.includes(target)) fail(`unknown target ${target} (the package's targets: ${pkg.napi.targets.join(', ')})`, 64)
const platform = platformOfTarget(target)
const native = target === hostTarget()
const binaryName = `dsh-session-native.${platform}.node`
const binary = path.join(root, binaryName)

if (!argv.includes('--no-build')) {
  const napi = ['napi', 'build', '--platform', '--release']
  if (native && !(platform === 'linux-x64-gnu' || platform === 'linux-arm64-gnu')) {
    run('npm', ['run', 'build'])
  } else if (native && !canZig()) {
    console.warn('package: cargo-zigbuild not found; the binary needs the glibc of this machine (pip install ziglang cargo-zigbuild)')
    run('npm', ['run', 'build'])
  } else {
    if (!canZig()) fail(`building ${target} on ${hostPlatform()} needs cargo-zigbuild and zig (pip install ziglang cargo-zigbuild) and the Rust target (rustup target add ${target})`)
    // A gnu target names the glibc it links against; the loader and types
    // are the host build's (the same for every platform), left untouched.
    const triple = platform.endsWith('-gnu') ? `${target}.2.28` : target
    const js = native ? ['--js', 'napi-loader.js', '--dts', 'binding.d.ts'] : ['--no-js', '--dts', path.join('target', 'cross.d.ts')]
    run('npx', [...napi, '--target', triple, '--cross-compile', ...js])
  }
}
if (!existsSync(binary)) fail(`no ${binaryName}; run without --no-build`)
if (!existsSync(path.join(root, 'napi-loader.js'))) fail('no napi-loader.js: run `npm run build` once (it writes the loader every platform shares)')
if (platform.startsWith('linux-')) {
  const { needed, newestGlibc, problems } = checkBinary(binary, platform)
  // This machine's own build (`npm run build`, no zig) needs this machine's
  // glibc: packed with a warning, for local use; a release checks it again.
  const local = native && problems.length > 0 && problems.every((p) => /^needs GLIBC_/.test(p))
  if (local) console.warn(`package: warning: ${binaryName} ${problems.join('; ')}: it runs only where glibc is as new as here (the release builds against 2.28 with cargo-zigbuild)`)
  else if (problems.length > 0) fail(`${binaryName} needs more than ${platform} promises: ${problems.join('; ')}`)
  console.log(`package: ${binaryName} needs ${needed.join(', ')}${newestGlibc ? ` (newest ${newestGlibc})` : ''}`)
}

rmSync(dist, { recursive: true, force: true })
const stage = path.join(dist, 'stage')
mkdirSync(stage, { recursive: true })

// The platform package: its package.json, README and the binary.
const platformDir = path.join(stage, platform)
mkdirSync(platformDir)
for (const f of readdirSync(path.join(root, 'npm', platform))) copyFileSync(path.join(root, 'npm', platform, f), path.join(platformDir, f))
copyFileSync(binary, path.join(platformDir, binaryName))
copyFileSync(path.join(root, 'LICENSE'), path.join(platformDir, 'LICENSE'))

// The main package: the files it lists, and package.json with the optional dependencies.
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

// The published line's package (published/): its own entries, and in
// native/ the root's loader and CommonJS lib (the addon's loader, its
// errors, the store service both lines share), the same platform packages.
const publishedDir = path.join(stage, 'published')
const published = JSON.parse(readFileSync(path.join(root, 'published', 'package.json'), 'utf8'))
cpSync(path.join(root, 'published'), publishedDir, { recursive: true })
for (const entry of ['binding.js', 'napi-loader.js', 'lib']) {
  cpSync(path.join(root, entry), path.join(publishedDir, 'native', entry), { recursive: true })
}
writeFileSync(path.join(publishedDir, 'native', 'package.json'), `${JSON.stringify({ type: 'commonjs' }, null, 2)}\n`)
copyFileSync(path.join(root, 'LICENSE'), path.join(publishedDir, 'LICENSE'))
writeFileSync(path.join(publishedDir, 'package.json'), `${JSON.stringify({ ...published, files: [...published.files, 'native'], optionalDependencies }, null, 2)}\n`)

for (const dir of [platformDir, mainDir, publishedDir]) run('npm', ['pack', '--silent', '--ignore-scripts', '--pack-destination', dist], dir)
rmSync(stage, { recursive: true, force: true })
for (const f of readdirSync(dist)) console.log(`package: ${path.join(dist, f)}`)
