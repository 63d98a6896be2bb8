#!/usr/bin/env node
// The package as a user installs it (CI runs this after `npm run package`):
// both tarballs of dist/ installed into an empty project, on a PATH with no
// cargo or rustc, then: CommonJS require, ESM named imports (once the
// package has an `exports` map), `npx dsh-session --help`, a
// `tsc --strict --module nodenext` check of a typed append, and (Linux glibc)
// no GLIBC symbol newer than 2.28 in the installed binary.
import { execFileSync, spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { hostPlatform } from './platform.mjs'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const dist = path.join(root, 'dist')
const MAX_GLIBC = [2, 28]
let failed = 0

function check(name, fn) {
  try {
    const note = fn()
    console.log(`check-install: ok   ${name}${note ? ` (${note})` : ''}`)
  } catch (error) {
    failed++
    console.log(`check-install: FAIL ${name}: ${String(error.stderr || error.stdout || error.message).trim().split('\n').slice(0, 12).join('\n  ')}`)
  }
}

const packed = existsSync(dist) ? readdirSync(dist).filter((f) => f.endsWith('.tgz')).map((f) => path.join(dist, f)) : []
const isPublished = (t) => path.basename(t).startsWith('dsh-session-native-published-')
const tarballs = packed.filter((t) => !isPublished(t))
const publishedTarball = packed.find(isPublished)
const platform = hostPlatform()
if (tarballs.length !== 2 || !tarballs.some((t) => path.basename(t).includes(platform)) || publishedTarball === undefined) {
  console.error(`check-install: expected the main, the published line's and the ${platform} tarballs in dist/ (run npm run package); found ${packed.map((t) => path.basename(t)).join(', ') || 'none'}`)
  process.exit(1)
}

// A PATH without the Rust toolchain: every folder holding cargo or rustc is left out.
const exe = process.platform === 'win32' ? '.exe' : ''
const PATH = (process.env.PATH ?? '').split(path.delimiter)
  .filter((dir) => dir !== '' && !existsSync(path.join(dir, `cargo${exe}`)) && !existsSync(path.join(dir, `rustc${exe}`)))
  .join(path.delimiter)
const env = { ...process.env, PATH, CARGO_HOME: '/nonexistent', RUSTUP_HOME: '/nonexistent' }
const shell = process.platform === 'win32'
const sh = (cmd, args, cwd) => execFileSync(cmd, args, { cwd, env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], shell })

const project = mkdtempSync(path.join(os.tmpdir(), 'dsh-install-'))
try {
  writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'install-check', version: '1.0.0', private: true }, null, 2))

  check('no cargo or rustc on the PATH', () => {
    const which = spawnSync(process.platform === 'win32' ? 'where' : 'which', ['cargo'], { env, encoding: 'utf8' })
    if (which.status === 0) throw new Error(`cargo is still found: ${which.stdout}`)
  })

  check('npm install of both tarballs', () => {
    sh('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error', ...tarballs], project)
    const installed = path.join(project, 'node_modules', 'dsh-session-native')
    const local = readdirSync(installed).filter((f) => f.endsWith('.node'))
    if (local.length > 0) throw new Error(`the main package holds a binary: ${local.join(', ')}`)
    const main = JSON.parse(readFileSync(path.join(installed, 'package.json'), 'utf8'))
    const optional = Object.keys(main.optionalDependencies ?? {})
    if (!optional.includes(`dsh-session-native-${platform}`)) throw new Error(`no optionalDependency on dsh-session-native-${platform}`)
    return `${optional.length} platform packages listed`
  })

  check('CommonJS require finds the platform package', () => sh(process.execPath, ['-e', `
    const m = require('dsh-session-native')
    const loaded = Object.keys(require.cache).filter((f) => f.endsWith('.node'))
    if (!loaded.some((f) => f.includes('dsh-session-native-${platform}'))) throw new Error('binary not from the platform package: ' + loaded)
    const s = new m.Session('install-check')
    s.append('turn/start', { turn: 1, trigger: { kind: 'message', source: { kind: 'user' } } })
    s.append('user/message', { content: [{ type: 'text', text: 'hi' }], source: { kind: 'user' } }, { surfaceOp: 'append' })
    if (s.deriveMessages().length !== 1) throw new Error('derive failed')
    if (typeof m.JsonlSessionStore !== 'function') throw new Error('no stores')
    process.stdout.write(loaded.map((f) => require('path').basename(f)).join(','))
  `], project).trim())

  check('ESM named imports give the CommonJS classes', () => {
    const installed = JSON.parse(readFileSync(path.join(project, 'node_modules', 'dsh-session-native', 'package.json'), 'utf8'))
    if (installed.exports === undefined) return 'skipped: package.json has no "exports" map yet (the ESM entry arrives with it)'
    sh(process.execPath, ['--input-type=module', '-e', `
      import { Session, JsonlSessionStore, SqliteSessionStore, foldSurface } from 'dsh-session-native'
      import { createRequire } from 'node:module'
      const cjs = createRequire(process.cwd() + '/')('dsh-session-native')
      if (Session !== cjs.Session || JsonlSessionStore !== cjs.JsonlSessionStore || SqliteSessionStore !== cjs.SqliteSessionStore || foldSurface !== cjs.foldSurface) throw new Error('ESM and CommonJS give different classes')
      new Session('esm').append('turn/start', { turn: 1, trigger: { kind: 'message', source: { kind: 'user' } } })
    `], project)
  })

  check('npx dsh-session --help, and inspect the bundled example', () => {
    const help = sh('npx', ['--no-install', 'dsh-session', '--help'], project)
    if (!help.startsWith('usage: dsh-session')) throw new Error(help)
    const report = sh('npx', ['--no-install', 'dsh-session', 'inspect', path.join('node_modules', 'dsh-session-native', 'examples', 'session.jsonl')], project)
    if (!/^events {5}426 /m.test(report)) throw new Error(report)
  })

  check('tsc --strict --module nodenext of a typed append', () => {
    // The user's own @types/node (the package's types mention Buffer).
    mkdirSync(path.join(project, 'node_modules', '@types'), { recursive: true })
    symlinkSync(path.join(root, 'node_modules', '@types', 'node'), path.join(project, 'node_modules', '@types', 'node'), 'junction')
    writeFileSync(path.join(project, 'typed.ts'), [
      "import { Session, SessionId, type SessionEvent } from 'dsh-session-native'",
      "const session = new Session(SessionId('typed'))",
      "const e: SessionEvent = session.append('turn/start', { turn: 1, trigger: { kind: 'message', source: { kind: 'user' } } })",
      "session.append('user/message', { content: [{ type: 'text', text: 'hi' }], source: { kind: 'user' } }, { surfaceOp: 'append' })",
      '// @ts-expect-error: a surface event needs its intent',
      "session.append('user/message', { content: [{ type: 'text', text: 'hi' }], source: { kind: 'user' } })",
      '// @ts-expect-error: turn/start takes a number turn',
      "session.append('turn/start', { turn: 'one', trigger: { kind: 'message', source: { kind: 'user' } } })",
      'export const seq: number = e.seq',
      '',
    ].join('\n'))
    const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc')
    sh(process.execPath, [tsc, '--strict', '--noEmit', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--target', 'es2022', 'typed.ts'], project)
  })

  check(`no GLIBC symbol newer than ${MAX_GLIBC.join('.')}`, () => {
    if (!platform.endsWith('-gnu')) return `skipped: ${platform} has no glibc`
    const bin = path.join(project, 'node_modules', `dsh-session-native-${platform}`, `dsh-session-native.${platform}.node`)
    const symbols = sh('objdump', ['-T', bin], project)
    const versions = [...symbols.matchAll(/GLIBC_(\d+)\.(\d+)(?:\.(\d+))?/g)].map((m) => [Number(m[1]), Number(m[2])])
    if (versions.length === 0) throw new Error('objdump shows no GLIBC symbol versions')
    const newest = versions.reduce((a, b) => (b[0] > a[0] || (b[0] === a[0] && b[1] > a[1]) ? b : a))
    if (newest[0] > MAX_GLIBC[0] || (newest[0] === MAX_GLIBC[0] && newest[1] > MAX_GLIBC[1])) {
      throw new Error(`needs GLIBC_${newest.join('.')}: ${symbols.split('\n').filter((l) => l.includes(`GLIBC_${newest.join('.')}`)).slice(0, 5).join('; ')}`)
    }
    return `newest GLIBC_${newest.join('.')}`
  })

  check('the published line swapped in: "@deepseek-ai/dsh-session" is dsh-session-native-published, no import changed', () => {
    const swapped = mkdtempSync(path.join(os.tmpdir(), 'dsh-install-published-'))
    try {
      const platformTarball = tarballs.find((t) => path.basename(t).includes(platform))
      writeFileSync(path.join(swapped, 'package.json'), JSON.stringify({
        name: 'install-check-published', version: '1.0.0', private: true, type: 'module',
        dependencies: { '@deepseek-ai/dsh-session': `file:${publishedTarball}`, [`dsh-session-native-${platform}`]: `file:${platformTarball}` },
      }, null, 2))
      sh('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error', '--legacy-peer-deps'], swapped)
      writeFileSync(path.join(swapped, 'check.mjs'), [
        "import { Session, SessionId } from '@deepseek-ai/dsh-session'",
        "import { SESSION_FORMAT_VERSION } from '@deepseek-ai/dsh-session/types'",
        "import { foldSurface } from '@deepseek-ai/dsh-session/surface'",
        "const s = Session.create(SessionId('p'), [])",
        "s.append('turn/start', { turn: 1 })",
        "s.append('user/message', { id: 'u1', role: 'user', content: [{ type: 'text', text: 'hi' }], source: { kind: 'user' } }, { surfaceOp: 'append' })",
        "if (s.deriveMessages()[0] !== s.events[2].data || s.firstLiveSeq !== 0 || SESSION_FORMAT_VERSION !== 0) throw new Error('derive failed')",
        "if (foldSurface(s.events).nodes.join() !== '2') throw new Error('fold failed')",
        "process.stdout.write(s.events.map((e) => e.type).join(','))",
      ].join('\n'))
      return sh(process.execPath, ['check.mjs'], swapped).trim()
    } finally {
      rmSync(swapped, { recursive: true, force: true })
    }
  })
} finally {
  rmSync(project, { recursive: true, force: true })
}

console.log(`check-install: ${failed === 0 ? 'all checks passed' : `${failed} failed`}`)
process.exit(failed === 0 ? 0 : 1)
