// npm run package -- --target <rust triple>: every target of package.json
// maps to its npm/<platform>/ package, an unknown one is a usage error, and
// the binary check (scripts/check-binary.mjs) refuses a binary that needs
// more than its platform promises. (.ci/run builds aarch64-unknown-linux-gnu
// and x86_64-unknown-linux-musl for real: scripts/ci-platforms.sh.)

import { spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import * as path from 'node:path'
import { pathToFileURL } from 'node:url'
import { describe, expect, it } from 'vitest'

const ROOT = path.resolve(__dirname, '..')
const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { napi: { targets: string[] } }
const load = async <T>(file: string): Promise<T> => (await import(pathToFileURL(path.join(ROOT, 'scripts', file)).href)) as T

describe('npm run package -- --target', () => {
  it('maps every target to its platform package', async () => {
    const { platformOfTarget } = await load<{ platformOfTarget: (t: string) => string | null }>('platform.mjs')
    const platforms = pkg.napi.targets.map((t) => platformOfTarget(t))
    expect(platforms).toEqual(['linux-x64-gnu', 'linux-arm64-gnu', 'linux-x64-musl', 'linux-arm64-musl', 'darwin-x64', 'darwin-arm64', 'win32-x64-msvc'])
    for (const p of platforms) {
      const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'npm', p!, 'package.json'), 'utf8')) as { name: string; main: string }
      expect(manifest.name).toBe(`dsh-session-native-${p}`)
      expect(manifest.main).toBe(`dsh-session-native.${p}.node`)
    }
    expect(platformOfTarget('riscv64gc-unknown-linux-gnu')).toBeNull()
  })

  it('refuses a target the package does not build, as a usage error', () => {
    const run = spawnSync(process.execPath, [path.join(ROOT, 'scripts', 'package.mjs'), '--target', 'riscv64gc-unknown-linux-gnu', '--no-build'], { cwd: ROOT, encoding: 'utf8' })
    expect(run.status).toBe(64)
    expect(run.stderr).toContain('unknown target riscv64gc-unknown-linux-gnu (the package\'s targets: x86_64-unknown-linux-gnu,')
  })

  it.runIf(process.platform === 'linux')('checks what a Linux binary needs: this glibc binary is not a musl one', async () => {
    const { checkBinary } = await load<{ checkBinary: (f: string, p: string) => { needed: string[]; newestGlibc: string | null; problems: string[] } }>('check-binary.mjs')
    const binary = fs.readdirSync(ROOT).find((f) => /^dsh-session-native\.linux-x64-gnu\.node$/.test(f))
    expect(binary).toBeDefined()
    const asMusl = checkBinary(path.join(ROOT, binary!), 'linux-x64-musl')
    expect(asMusl.problems).toContain('does not link musl\'s libc.so')
    expect(asMusl.problems.some((p) => /^needs GLIBC_2\.\d+: a glibc binary, not musl$/.test(p))).toBe(true)
    const asGnu = checkBinary(path.join(ROOT, binary!), 'linux-x64-gnu')
    expect(asGnu.needed).toContain('libc.so.6')
    expect(asGnu.problems.filter((p) => !/^needs GLIBC_/.test(p))).toEqual([])
  })
})
