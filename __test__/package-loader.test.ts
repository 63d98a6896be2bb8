// Installing without Rust: the loader finds this platform's binary, and on a
// machine where none is installed it throws one clear error naming the
// platform and what to do; a checkout whose addon is not built is not packed.
// (scripts/check-install.mjs, run by .ci/run, installs the real tarballs.)

import { spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import * as os from 'node:os'
import * as path from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'

const ROOT = path.resolve(__dirname, '..')
const dirs: string[] = []
afterAll(() => {
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true })
})

/** A copy of the package's JS files, without any binary or platform package. */
function packageWithoutBinary(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dsh-loader-'))
  dirs.push(dir)
  for (const f of ['binding.js', 'napi-loader.js', 'package.json']) fs.copyFileSync(path.join(ROOT, f), path.join(dir, f))
  // binding.js makes its error with the package's SessionError.
  fs.mkdirSync(path.join(dir, 'lib'))
  fs.copyFileSync(path.join(ROOT, 'lib', 'errors.js'), path.join(dir, 'lib', 'errors.js'))
  fs.mkdirSync(path.join(dir, 'scripts'))
  for (const f of ['prepack-guard.mjs', 'platform.mjs']) fs.copyFileSync(path.join(ROOT, 'scripts', f), path.join(dir, 'scripts', f))
  return dir
}

function platformName(): string {
  if (process.platform === 'win32') return `win32-${process.arch}-msvc`
  if (process.platform !== 'linux') return `${process.platform}-${process.arch}`
  const report = process.report.getReport() as { header?: { glibcVersionRuntime?: string } }
  return `linux-${process.arch}-${report.header?.glibcVersionRuntime ? 'gnu' : 'musl'}`
}

describe('the native addon loader', () => {
  it('loads the binary napi built for this platform', () => {
    const binding = require('../binding.js') as { NativeSession?: unknown }
    expect(typeof binding.NativeSession).toBe('function')
  })

  it('throws one clear error naming the platform and the missing package when no binary fits', () => {
    const dir = packageWithoutBinary()
    const run = spawnSync(process.execPath, ['-e', `
      try { require(${JSON.stringify(path.join(dir, 'binding.js'))}) } catch (e) {
        process.stdout.write(JSON.stringify({ code: e.code, message: e.message, cause: String(e.cause && e.cause.message) }))
      }`], { encoding: 'utf8', env: { ...process.env, NAPI_RS_NATIVE_LIBRARY_PATH: '' } })
    const error = JSON.parse(run.stdout) as { code: string; message: string; cause: string }
    expect(error.code).toBe('NATIVE_BINDING_MISSING')
    expect(error.message).toContain(`cannot load its native addon on ${process.platform}/${process.arch}`)
    expect(error.message).toContain(`dsh-session-native-${platformName()}`)
    expect(error.message).toContain('--omit=optional')
    // An installed package has no sources and no napi CLI: no advice to build in it.
    expect(error.message).not.toContain('npm run build')
    expect(error.message).toContain('docs/INSTALL.md')
    expect(error.message).not.toContain('npm has a bug')
    expect(error.message.split('\n')).toHaveLength(1)
    // napi's own report stays reachable as the cause.
    expect(error.cause).toMatch(/Cannot find native binding/)
  })

  it('in a source checkout (Cargo.toml beside it), says to build there', () => {
    const dir = packageWithoutBinary()
    fs.copyFileSync(path.join(ROOT, 'Cargo.toml'), path.join(dir, 'Cargo.toml'))
    const run = spawnSync(process.execPath, ['-e', `
      try { require(${JSON.stringify(path.join(dir, 'binding.js'))}) } catch (e) { process.stdout.write(JSON.stringify({ code: e.code, message: e.message })) }`],
    { encoding: 'utf8', env: { ...process.env, NAPI_RS_NATIVE_LIBRARY_PATH: '' } })
    const error = JSON.parse(run.stdout) as { code: string; message: string }
    expect(error.code).toBe('NATIVE_BINDING_MISSING')
    expect(error.message).toContain('this source checkout has no built addon for it. Run `npm run build` here')
    expect(error.message).not.toContain('--omit=optional')
  })

  it('npm pack at the repository root refuses, built or not, and names the release path', () => {
    const dir = packageWithoutBinary()
    const run = spawnSync(process.execPath, [path.join(dir, 'scripts', 'prepack-guard.mjs')], { encoding: 'utf8' })
    expect(run.status).toBe(1)
    expect(run.stderr).toMatch(/refusing to pack the repository root/)
    // The built checkout too, through npm itself: nothing is written.
    const out = fs.mkdtempSync(path.join(os.tmpdir(), 'dsh-pack-'))
    dirs.push(out)
    const npm = spawnSync('npm', ['pack', '--pack-destination', out], { cwd: ROOT, encoding: 'utf8', shell: process.platform === 'win32' })
    expect(npm.status).not.toBe(0)
    expect(npm.stderr).toContain('Run `npm run package`')
    expect(fs.readdirSync(out)).toEqual([])
  })
})

describe('npm test on an unbuilt checkout', () => {
  it('says in one line how to build when there is no cargo to build with', () => {
    const dir = packageWithoutBinary()
    fs.copyFileSync(path.join(ROOT, 'scripts', 'ensure-built.mjs'), path.join(dir, 'scripts', 'ensure-built.mjs'))
    const exe = process.platform === 'win32' ? '.exe' : ''
    const PATH = (process.env.PATH ?? '').split(path.delimiter).filter((d) => !fs.existsSync(path.join(d, `cargo${exe}`))).join(path.delimiter)
    const run = spawnSync(process.execPath, [path.join(dir, 'scripts', 'ensure-built.mjs')], { encoding: 'utf8', env: { ...process.env, PATH } })
    expect(run.status).toBe(1)
    expect(run.stderr.trimEnd().split('\n')).toHaveLength(1)
    expect(run.stderr).toMatch(/not built and cargo is not on PATH: install Rust .*then run `npm run build`/)
  })

  it('does nothing when the addon loads', () => {
    const run = spawnSync(process.execPath, [path.join(ROOT, 'scripts', 'ensure-built.mjs')], { encoding: 'utf8' })
    expect(run.status).toBe(0)
    expect(run.stderr).toBe('')
  })
})

describe('the platform packages', () => {
  const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string; napi: { targets: string[] } }
  const dirsOf = fs.readdirSync(path.join(ROOT, 'npm')).sort()

  it('cover linux x64/arm64 gnu and musl, darwin x64/arm64 and win32 x64, one per napi target', () => {
    expect(dirsOf).toEqual(['darwin-arm64', 'darwin-x64', 'linux-arm64-gnu', 'linux-arm64-musl', 'linux-x64-gnu', 'linux-x64-musl', 'win32-x64-msvc'])
    expect(pkg.napi.targets).toHaveLength(dirsOf.length)
  })

  for (const dir of dirsOf) {
    it(`${dir}: os, cpu, libc, main and files name its binary, at the package's version`, () => {
      const p = JSON.parse(fs.readFileSync(path.join(ROOT, 'npm', dir, 'package.json'), 'utf8')) as Record<string, unknown>
      const [os_, cpu, abi] = dir.split('-') as [string, string, string | undefined]
      const node = `dsh-session-native.${dir}.node`
      expect(p).toMatchObject({ name: `dsh-session-native-${dir}`, version: pkg.version, os: [os_], cpu: [cpu], main: node, files: [node], license: 'MIT' })
      if (os_ === 'linux') expect(p.libc).toEqual([abi === 'gnu' ? 'glibc' : 'musl'])
      else expect(p.libc).toBeUndefined()
    })
  }
})
