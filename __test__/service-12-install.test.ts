// The package as a user installs it: `npm pack`, then `npm install` of the
// tarball into a fresh project (not a relative path), with the published
// peers, without them, and with cordis under its monorepo name.

import { execFileSync, spawnSync } from 'node:child_process'
import { cpSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

const root = path.resolve(__dirname, '..')
const tsc = path.join(root, 'node_modules/typescript/bin/tsc')
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'
const work = mkdtempSync(path.join(tmpdir(), 'dsh-install-'))
const INSTALL_TIMEOUT = 240_000

let tarball = ''
let platformTarball = ''
let files: string[] = []

function project(name: string, pkg: Record<string, unknown> = {}): string {
  const dir = path.join(work, name)
  mkdirSync(dir, { recursive: true })
  writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name, private: true, type: 'module', ...pkg }))
  return dir
}

function install(dir: string, specs: string[]): void {
  execFileSync(npm, ['install', '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error', ...specs], {
    cwd: dir,
    stdio: 'pipe',
  })
}

function run(dir: string, file: string, source: string): unknown {
  writeFileSync(path.join(dir, file), source)
  const result = spawnSync(process.execPath, [file], { cwd: dir, encoding: 'utf8' })
  expect(result.stderr).toBe('')
  expect(result.status).toBe(0)
  return JSON.parse(result.stdout)
}

/** Type-check `source` as the consumer's own TypeScript (skipLibCheck, as `tsc --init` sets). */
function typecheck(dir: string, source: string): string {
  writeFileSync(path.join(dir, 'consumer.ts'), source)
  writeFileSync(
    path.join(dir, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, noEmit: true, skipLibCheck: true, types: [] },
      files: ['consumer.ts'],
    }),
  )
  const result = spawnSync(process.execPath, [tsc, '-p', dir], { cwd: dir, encoding: 'utf8' })
  return `${result.stdout}${result.stderr}`.trim()
}

/** An agent-like run through the installed package, printed as JSON. */
const agentRun = (cordis: string) => `
import SessionStore, { Session, SessionForkError } from 'dsh-session-native'
import { Context, Service } from '${cordis}'
import { createScope } from '@deepseek-ai/dsh-scope'

const ctx = new Context()
await ctx.plugin(SessionStore)
const agent = {}
let scoped
await ctx.plugin({ inject: ['sessions'], apply(inner) { scoped = createScope(inner, agent) } })
const heard = []
scoped.ctx.on('session/created', (s) => heard.push('agent created ' + s.id))
scoped.ctx.on('session/event', (s, e) => heard.push('agent event ' + e.seq + ' ' + e.type))
scoped.ctx.on('session/flush', async (s) => heard.push('agent flush ' + s.id))
ctx.on('session/disposed', (s) => heard.push('disposed ' + s.id))
const session = scoped.ctx.sessions.create()
session.append('turn/start', { turn: 1, trigger: { kind: 'message', source: { kind: 'user' } } })
session.append('turn/end', { turn: 1, reason: { kind: 'completed' } })
await ctx.sessions.flush(session)
const child = ctx.sessions.fork(session)
let forkError
try { ctx.sessions.fork('nobody') } catch (e) { forkError = [e instanceof SessionForkError, e.code] }
await scoped.dispose()
console.log(JSON.stringify({
  isService: ctx.sessions instanceof Service,
  isSession: session instanceof Session,
  heard,
  child: [child.id, child.header.parentSession, child.events.length],
  forkError,
  left: ctx.sessions.list().map((s) => s.id),
}))
`

const expectedRun = {
  isService: true,
  isSession: true,
  heard: ['agent created session-1', 'agent event 0 turn/start', 'agent event 1 turn/end', 'agent flush session-1', 'disposed session-1'],
  child: ['session-2', 'session-1', 2],
  forkError: [true, 'SESSION_NOT_FOUND'],
  left: ['session-2'],
}

beforeAll(() => {
  // As a release packs it: the main package and this platform's binary package.
  const packed = path.join(work, 'dist')
  execFileSync(process.execPath, [path.join(root, 'scripts/package.mjs'), '--no-build', '--out', packed], { cwd: root, stdio: 'ignore' })
  const tgz = readdirSync(packed).filter((f) => f.endsWith('.tgz'))
  const main = tgz.find((f) => /^dsh-session-native-\d/.test(f))
  const binary = tgz.find((f) => f !== main && !f.startsWith('dsh-session-native-published-'))
  if (main === undefined || binary === undefined) throw new Error(`package.mjs wrote ${tgz.join(', ')}`)
  tarball = path.join(packed, main)
  platformTarball = path.join(packed, binary)
  const list = execFileSync('tar', ['-tzf', tarball], { encoding: 'utf8' })
  files = list.split('\n').filter(Boolean).map((f) => f.replace(/^package\//, ''))
}, INSTALL_TIMEOUT)

afterAll(() => {
  rmSync(work, { recursive: true, force: true })
})

describe('the packed package', () => {
  it('holds both entries and the types; the addon comes in its platform package', () => {
    expect(files).toEqual(expect.arrayContaining(['index.js', 'index.mjs', 'index.d.ts', 'lib/service.js', 'lib/peers.js']))
    expect(files.some((f) => f.endsWith('.node'))).toBe(false)
  })
})

describe('installed with the published peers', () => {
  let dir = ''
  beforeAll(() => {
    dir = project('published')
    install(dir, [tarball, platformTarball, '@deepseek-ai/dsh-scope@0.1.0-rc.8', '@deepseek-ai/cordis@4.0.4'])
  }, INSTALL_TIMEOUT)

  it('an ESM consumer plugs `import SessionStore, { Session }` into its Context', () => {
    expect(run(dir, 'agent.mjs', agentRun('@deepseek-ai/cordis'))).toEqual(expectedRun)
  })

  it('a CommonJS consumer gets the same service by name', () => {
    const result = run(
      dir,
      'agent.cjs',
      `
      const { SessionStore, Session } = require('dsh-session-native')
      import('@deepseek-ai/cordis').then(async ({ Context }) => {
        const ctx = new Context()
        await ctx.plugin(SessionStore)
        const esm = await import('dsh-session-native')
        console.log(JSON.stringify({ same: esm.default === SessionStore && esm.Session === Session, id: ctx.sessions.create('c').id }))
      })
      `,
    )
    expect(result).toEqual({ same: true, id: 'c' })
  })

  it("the consumer's TypeScript sees ctx.sessions and the session events", () => {
    const output = typecheck(
      dir,
      `
      import { Context } from '@deepseek-ai/cordis'
      import SessionStore, { type Session, type SessionEvent } from 'dsh-session-native'
      const ctx = new Context()
      ctx.plugin(SessionStore)
      const store: SessionStore = ctx.sessions
      const session: Session = store.create()
      ctx.on('session/event', (s, e) => {
        const both: [Session, SessionEvent] = [s, e]
        // @ts-expect-error an event is not a number
        const wrong: number = e
      })
      // @ts-expect-error ctx.sessions is typed, not any
      const notAny: number = ctx.sessions
      export { session }
      `,
    )
    expect(output).toBe('')
  })
})

describe('installed without peers', () => {
  let dir = ''
  beforeAll(() => {
    dir = project('no-peers')
    install(dir, [tarball, platformTarball])
  }, INSTALL_TIMEOUT)

  it('require and import work; only constructing the service asks for the peers', () => {
    const result = run(
      dir,
      'plain.mjs',
      `
      import { createRequire } from 'node:module'
      import { Session } from 'dsh-session-native'
      const cjs = createRequire(import.meta.url)('dsh-session-native')
      const s = new cjs.Session('plain')
      s.append('turn/start', { turn: 1, trigger: { kind: 'message', source: { kind: 'user' } } })
      let error
      try { new cjs.SessionStore({}) } catch (e) { error = [e.code, e.message.startsWith('SessionStore needs the peer dependency @deepseek-ai/dsh-scope')] }
      console.log(JSON.stringify({ same: Session === cjs.Session, seq: s.seq, error }))
      `,
    )
    expect(result).toEqual({ same: true, seq: 1, error: ['PEER_MISSING', true] })
  })

  it("the consumer's TypeScript (skipLibCheck) types the session core without the peers' types", () => {
    const output = typecheck(
      dir,
      `
      import { Session, type SessionEvent } from 'dsh-session-native'
      const session = new Session('typed')
      const event: SessionEvent = session.append('turn/start', { turn: 1, trigger: { kind: 'message', source: { kind: 'user' } } })
      // @ts-expect-error the overloads still hold
      session.append('user/message', { content: [], source: { kind: 'user' } })
      export { event }
      `,
    )
    expect(output).toBe('')
  })
})

describe('installed with cordis under its monorepo name', () => {
  let dir = ''
  beforeAll(() => {
    // The published packages, renamed as the monorepo names them: cordis as
    // `cordis` (a version of its own, so TypeScript cannot merge it with the
    // published one), and a dsh-scope that imports `cordis`.
    const published = path.join(work, 'published', 'node_modules')
    dir = project('monorepo')
    const modules = path.join(dir, 'node_modules')
    cpSync(published, modules, { recursive: true })
    cpSync(path.join(modules, '@deepseek-ai/cordis'), path.join(modules, 'cordis'), { recursive: true })
    rmSync(path.join(modules, '@deepseek-ai/cordis'), { recursive: true })
    const cordisManifest = path.join(modules, 'cordis/package.json')
    writeFileSync(cordisManifest, JSON.stringify({ ...JSON.parse(readFileSync(cordisManifest, 'utf8')), name: 'cordis', version: '4.0.0-rc.7' }))
    const scopeDir = path.join(modules, '@deepseek-ai/dsh-scope')
    const rename = (file: string) => writeFileSync(file, readFileSync(file, 'utf8').replaceAll('@deepseek-ai/cordis', 'cordis'))
    rename(path.join(scopeDir, 'package.json'))
    for (const file of readdirSync(path.join(scopeDir, 'lib'), { recursive: true }) as string[]) {
      if (/\.(js|ts)$/.test(file)) rename(path.join(scopeDir, 'lib', file))
    }
  }, INSTALL_TIMEOUT)

  it('resolves cordis from dsh-scope under the name it uses', () => {
    expect(run(dir, 'agent.mjs', agentRun('cordis'))).toEqual(expectedRun)
  })

  it("the consumer's TypeScript sees the `cordis` augmentation", () => {
    const output = typecheck(
      dir,
      `
      import { Context } from 'cordis'
      import SessionStore, { type Session, type SessionEvent } from 'dsh-session-native'
      const ctx = new Context()
      const store: SessionStore = ctx.sessions
      ctx.on('session/event', (s, e) => {
        const both: [Session, SessionEvent] = [s, e]
        // @ts-expect-error an event is not a number
        const wrong: number = e
      })
      // @ts-expect-error ctx.sessions is typed, not any
      const notAny: number = ctx.sessions
      export { store }
      `,
    )
    expect(output).toBe('')
  })
})
