// PUB 13.1 (./types), 2.4 (known types), 9 (closer codes), 15 (SessionPreparation),
// 8 and 5 (request headers, legacy messages): the small plain-JS modules.
import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import fc from 'fast-check'
import * as types from '../published/lib/types.js'
import { KNOWN_SESSION_EVENT_TYPES } from '../published/lib/known-event-types.js'
import { TOOL_NOT_STARTED, TOOL_OUTCOME_UNKNOWN } from '../published/lib/constants.js'
import { SessionPreparation } from '../published/lib/preparation.js'
import * as rh from '../published/lib/request-header.js'
// @ts-ignore -- the reference's own declarations import .ts paths
import * as refRh from '../test-published/node_modules/@deepseek-ai/dsh-session/lib/types/request-header.js'
// @ts-ignore
import * as refTypes from '../test-published/node_modules/@deepseek-ai/dsh-session/lib/types/types.js'
// @ts-ignore
import { KNOWN_SESSION_EVENT_TYPES as REF_KNOWN } from '../test-published/node_modules/@deepseek-ai/dsh-session/lib/types/known-event-types.js'
// @ts-ignore
import * as refRepair from '../test-published/node_modules/@deepseek-ai/dsh-session/lib/types/repair.js'
// @ts-ignore
import { SessionPreparation as RefPreparation } from '../test-published/node_modules/@deepseek-ai/dsh-session/lib/types/preparation.js'

const pkg = JSON.parse(readFileSync(new URL('../published/package.json', import.meta.url), 'utf8'))
const rootPkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'))
const refPkg = JSON.parse(readFileSync(new URL('../test-published/node_modules/@deepseek-ai/dsh-session/package.json', import.meta.url), 'utf8'))

describe('PUB 0 package.json', () => {
  it('PUB 0: ESM, the exports map of upstream (minus the dead ./src/*), peers exactly as upstream, engines as the root', () => {
    expect(pkg.name).toBe('dsh-session-native-published')
    expect(pkg.version).toBe('0.1.1-rc.2-native.0')
    expect(pkg.type).toBe('module')
    expect(Object.keys(pkg.exports)).toEqual(['.', './types', './surface', './invariant', './package.json'])
    const refKeys = Object.keys(refPkg.exports).filter(k => k !== './src/*')
    expect(Object.keys(pkg.exports).sort()).toEqual(refKeys.sort())
    for (const [k, v] of Object.entries(pkg.exports)) {
      if (k === './package.json') continue
      expect(Object.keys(v as object)).toEqual(['types', 'default'])
      expect(JSON.stringify(v)).not.toMatch(/require/)
    }
    expect(pkg.exports['.']).toEqual({ types: './lib/index.d.ts', default: './lib/index.js' })
    expect(pkg.peerDependencies).toEqual(refPkg.peerDependencies)
    expect(pkg.dependencies).toBeUndefined()
    expect(pkg.engines).toEqual(rootPkg.engines)
  })
})

describe('PUB 0 exports map resolves (package self-reference)', () => {
  it('PUB 0: each subpath resolves to its file; ./types and ./surface load in a fresh process without touching the addon', async () => {
    const { execFileSync } = await import('node:child_process')
    const script = `
      const r = s => new URL(import.meta.resolve(s)).pathname.replace(process.cwd(), '.')
      const out = { root: r('dsh-session-native-published'), types: r('dsh-session-native-published/types'),
        surface: r('dsh-session-native-published/surface'), invariant: r('dsh-session-native-published/invariant'),
        pkg: r('dsh-session-native-published/package.json') }
      out.typesKeys = Object.keys(await import('dsh-session-native-published/types')).sort()
      out.surfaceKeys = Object.keys(await import('dsh-session-native-published/surface')).sort()
      try { import.meta.resolve('dsh-session-native-published/lib/json.js'); out.deep = 'resolved' } catch (e) { out.deep = e.code }
      console.log(JSON.stringify(out))`
    const out = JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', script], {
      cwd: new URL('../published/', import.meta.url), encoding: 'utf8',
    }))
    expect(out).toEqual({
      root: './lib/index.js', types: './lib/types.js', surface: './lib/surface.js', invariant: './lib/invariant.js', pkg: './package.json',
      typesKeys: ['SESSION_FORMAT_VERSION', 'SessionId'],
      surfaceKeys: ['SurfaceManager', 'deriveEventMessage', 'foldSurface', 'isAppendSurfaceEvent', 'isReplacementSurfaceEvent', 'isSurfaceEligibleType', 'isSurfaceEvent'],
      deep: 'ERR_PACKAGE_PATH_NOT_EXPORTED',
    })
  })
})

describe('PUB 13.1 ./types', () => {
  it('PUB 13.1: SessionId is the identity and SESSION_FORMAT_VERSION is 0; no imports', () => {
    expect(Object.keys(types).sort()).toEqual(['SESSION_FORMAT_VERSION', 'SessionId'])
    expect(types.SessionId('abc')).toBe('abc')
    expect(types.SESSION_FORMAT_VERSION).toBe(0)
    expect(Object.keys(refTypes).sort()).toEqual(Object.keys(types).sort())
    const text = readFileSync(new URL('../published/lib/types.js', import.meta.url), 'utf8')
    expect(text).not.toMatch(/\bimport\b|\brequire\s*\(/)
  })
})

describe('PUB 2.4 KNOWN_SESSION_EVENT_TYPES', () => {
  it('PUB 2.4: an ordinary Set of exactly the 48 types, in upstream order', () => {
    expect(KNOWN_SESSION_EVENT_TYPES).toBeInstanceOf(Set)
    expect(KNOWN_SESSION_EVENT_TYPES.size).toBe(48)
    expect([...KNOWN_SESSION_EVENT_TYPES]).toEqual([...REF_KNOWN])
  })
})

describe('PUB 9 closer codes', () => {
  it('PUB 9: the two codes', () => {
    expect(TOOL_NOT_STARTED).toBe('TOOL_NOT_STARTED')
    expect(TOOL_OUTCOME_UNKNOWN).toBe('TOOL_OUTCOME_UNKNOWN')
    expect([TOOL_NOT_STARTED, TOOL_OUTCOME_UNKNOWN]).toEqual([refRepair.TOOL_NOT_STARTED, refRepair.TOOL_OUTCOME_UNKNOWN])
  })
})

describe('PUB 15 SessionPreparation', () => {
  it.each([['ours', SessionPreparation], ['reference', RefPreparation]] as const)('PUB 15: session, release once, idempotent dispose (%s)', (_n, Prep: any) => {
    const session = { id: 's' }
    const calls: unknown[] = []
    const options = { release(this: unknown) { calls.push(this) } }
    const p = Prep.create(session, options)
    expect(p.session).toBe(session)
    expect(calls).toEqual([])
    p[Symbol.dispose]()
    p[Symbol.dispose]()
    expect(calls).toEqual([options])
    expect(() => Prep.create(session)[Symbol.dispose]()).not.toThrow()
    // release is read at dispose time
    const late: { release?: () => void } = {}
    const q = Prep.create(session, late)
    let n = 0
    late.release = () => { n++ }
    q[Symbol.dispose]()
    expect(n).toBe(1)
  })
})

describe('PUB 8 request headers', () => {
  const config = { provider: 'p', model: 'm' }
  it('PUB 8: canonicalHeader key order and drops', () => {
    const h = { tools: [{ name: 't' }], system: 's', adapterDefaults: { maxTokens: true }, config, extra: 1 }
    expect(Object.keys(rh.canonicalHeader(h as any))).toEqual(['config', 'adapterDefaults', 'system', 'tools'])
    expect(rh.canonicalHeader({ config, system: '', tools: [], adapterDefaults: {} } as any)).toEqual({ config })
    expect(rh.canonicalHeader({ config, adapterDefaults: { reasoningEffort: false, maxTokens: 'x' } } as any)).toEqual({ config })
    const c = rh.canonicalHeader(h as any)
    expect(c.config).toBe(config)
    expect(c.adapterDefaults).toBe(h.adapterDefaults)
  })

  it('PUB 8: headerEquals', () => {
    const eq = (a: any, b: any) => rh.headerEquals(a, b)
    expect(eq({ config }, { config: { ...config } })).toBe(true)
    expect(eq({ config: { ...config, stop: ['a'] } }, { config: { ...config, stop: ['a'] } })).toBe(true)
    expect(eq({ config: { ...config, stop: [] } }, { config })).toBe(false)
    expect(eq({ config, tools: [] }, { config })).toBe(true)
    expect(eq({ config, tools: [{ a: 1, b: 2 }] }, { config, tools: [{ b: 2, a: 1 }] })).toBe(false)
    expect(eq({ config, adapterDefaults: { maxTokens: true } }, { config })).toBe(false)
    expect(eq({ config, system: 's' }, { config })).toBe(false)
  })

  it('PUB 8: foldRequestHeader takes the latest canonical header, else from', () => {
    const from = { config }
    expect(rh.foldRequestHeader([], from as any)).toBe(from)
    const events = [{ type: 'request/header', seq: 0, time: 0, data: { header: { config, system: '' }, reason: 'initial' } },
      { type: 'turn/start', seq: 1, time: 0, data: { turn: 1 } }]
    expect(rh.foldRequestHeader(events as any)).toEqual({ config })
    expect(rh.foldRequestHeader([] as any)).toBeUndefined()
  })

  it('PUB 8 differential: canonicalHeader, headerEquals and foldRequestHeader agree with 0.1.1-rc.2', () => {
    const cfg = fc.record({ provider: fc.constantFrom('p', 'q'), model: fc.constantFrom('m'), reasoningEffort: fc.constantFrom('high', 'low'),
      temperature: fc.constantFrom(0, 1), maxTokens: fc.constantFrom(10), stop: fc.array(fc.constantFrom('a', 'b'), { maxLength: 2 }) }, { requiredKeys: ['provider', 'model'] })
    const header = fc.record({ config: cfg, adapterDefaults: fc.record({ reasoningEffort: fc.constantFrom(true, false), maxTokens: fc.constantFrom(true, undefined) }, { requiredKeys: [] }),
      system: fc.constantFrom('', 's', 't'), tools: fc.array(fc.constantFrom({ name: 'a' }, { name: 'b', x: 1 }, { x: 1, name: 'b' }), { maxLength: 2 }) }, { requiredKeys: ['config'] })
    fc.assert(fc.property(header, header, fc.array(fc.tuple(fc.boolean(), header), { maxLength: 4 }), (a, b, evs) => {
      expect(JSON.stringify(rh.canonicalHeader(a as any))).toBe(JSON.stringify(refRh.canonicalHeader(a)))
      const ca = rh.canonicalHeader(a as any)
      const cb = rh.canonicalHeader(b as any)
      expect(rh.headerEquals(ca, cb)).toBe(refRh.headerEquals(ca, cb))
      expect(rh.headerEquals(a as any, b as any)).toBe(refRh.headerEquals(a, b))
      const events = evs.map(([isHeader, h], seq) => isHeader
        ? { type: 'request/header', seq, time: 0, data: { header: h, reason: 'change' } }
        : { type: 'request/context', seq, time: 0, data: { provider: 'p', model: 'm' } })
      expect(JSON.stringify(rh.foldRequestHeader(events as any, ca))).toBe(JSON.stringify(refRh.foldRequestHeader(events, ca)))
    }), { numRuns: 1000 })
  })
})

describe('PUB 5 / PUB 4.2 legacy messages (the native rule, through the Session)', () => {
  const header = (reason: string) => ({ header: { config: { provider: 'p', model: 'm' } }, reason })
  it('PUB 5: append messages', async () => {
    const { Session } = await import('../published/lib/index.js' as string)
    const s = Session.create('legacy')
    expect(() => s.append('request/header-delta', {})).toThrow('session event "request/header-delta" uses unsupported legacy request/header-delta format')
    expect(() => s.append('request/header', header('fallback'))).toThrow('session event "request/header" uses unsupported legacy request/header reason "fallback"')
    expect(() => s.append('x/y', { reason: 'fallback' })).not.toThrow()
    expect(() => s.append('request/header', header('change'))).not.toThrow()
  })
  it('PUB 4.2: seed messages', async () => {
    const { Session } = await import('../published/lib/index.js' as string)
    const ev = (type: string, data: unknown) => ({ type, seq: 0, time: 1, data })
    expect(() => Session.create('legacy', [ev('request/header-delta', {})])).toThrow('seed event at index 0 uses unsupported legacy request/header-delta format')
    expect(() => Session.create('legacy', [ev('request/header', header('fallback'))])).toThrow('seed event at index 0 uses unsupported legacy request/header reason "fallback"')
    expect(Session.create('legacy', [ev('request/header', header('change'))]).events.length).toBe(2)
  })
})
