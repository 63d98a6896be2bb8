// PUB 12.1–12.6: the published line's SessionStore service (`ctx.sessions`),
// differentially: each world is a Cordis `Context` with that package's
// SessionStore plugin (ours on the root @deepseek-ai/cordis, the reference
// 0.1.1-rc.2 on test-published's cordis). flush → boolean, prepare with
// `seedSource: 'persistence'`, the meta fields and their messages, the typert
// lookup with a fake `typert` service, and the fork rule's cases.
import { describe, expect, it } from 'vitest'
import * as rootCordis from '@deepseek-ai/cordis'
import { type Any, type Outcome, outcomeAsync, sameOutcome, noTime, ours, ref } from './published-helpers.js'
// @ts-ignore -- the reference tree
import * as refCordis from '../test-published/node_modules/@deepseek-ai/cordis/lib/index.js'

interface World { label: string; cordis: Any; mod: Any }
const OURS: World = { label: 'ours', cordis: rootCordis, mod: ours }
const REF: World = { label: 'reference', cordis: refCordis, mod: ref }

async function setup(world: World): Promise<Any> {
  const ctx = new world.cordis.Context()
  ctx.logger.warn = () => {}
  await ctx.plugin(world.mod.SessionStore)
  return ctx
}
/** Run `fn` in a fresh context of each world; the same outcome. */
async function both(fn: (ctx: Any, w: World) => unknown, what = ''): Promise<{ o: Outcome; r: Outcome }> {
  const o = await outcomeAsync(async () => fn(await setup(OURS), OURS))
  const r = await outcomeAsync(async () => fn(await setup(REF), REF))
  sameOutcome(o, r, what)
  return { o, r }
}
async function rejects(fn: (ctx: Any, w: World) => unknown, message: string) {
  const { o, r } = await both(fn, message)
  expect(r.ok).toBe(false)
  expect((r as Any).error.message).toBe(message)
  return { o: (o as Any).error, r: (r as Any).error }
}

const E = (type: string, seq: number, data: Any, extra: Any = {}): Any => ({ type, seq, time: 0, data, ...extra })
const user = (seq: number) => E('user/message', seq, { id: `u${seq}`, role: 'user', content: [{ type: 'text', text: 'hi' }], source: { kind: 'user' } }, { surfaceOp: 'append' })

describe('PUB 12.3 prepare', () => {
  it('PUB 12.3: the built header key order and createdAt default; other meta keys ignored', async () => {
    const { o, r } = await both((ctx) => {
      const s = ctx.sessions.prepare('a', { meta: { agentPreset: 'p', delegationDepth: 2, origin: 'subagent', seedLength: 0, parentSession: 'x', cwd: '/w', createdAt: 7, other: 1 } })
      const t = ctx.sessions.prepare('b')
      return { h: s.header, t: t.header, inStore: ctx.sessions.get('a') }
    })
    const ho = (o as Any).value
    const hr = (r as Any).value
    expect(ho.h).toEqual(hr.h)
    expect(Object.keys(ho.h)).toEqual(['version', 'id', 'createdAt', 'cwd', 'parentSession', 'seedLength', 'origin', 'delegationDepth', 'agentPreset'])
    expect(ho.inStore).toBeUndefined()
    expect(Object.keys(ho.t)).toEqual(['version', 'id', 'createdAt'])
    expect(Math.abs(ho.t.createdAt - Date.now())).toBeLessThan(60_000)
  })

  it('PUB 12.3: a null meta value reaches validation; undefined is dropped', async () => {
    await rejects((ctx) => ctx.sessions.prepare('a', { meta: { cwd: null } }), 'session header cwd must be a string')
    await rejects((ctx) => ctx.sessions.prepare('a', { meta: { cwd: 'rel' } }), 'session header cwd must be an absolute path, got "rel"')
    await rejects((ctx) => ctx.sessions.prepare('a', { meta: { parentSession: 1 } }), 'session header parentSession must be a string')
    await rejects((ctx) => ctx.sessions.prepare('a', { meta: { seedLength: -1 } }), 'session header seedLength must be a non-negative safe integer')
    const { o } = await both((ctx) => Object.keys(ctx.sessions.prepare('a', { meta: { cwd: undefined, origin: undefined } }).header))
    expect((o as Any).value).toEqual(['version', 'id', 'createdAt'])
  })

  it('PUB 12.3: seed first, then header, then end-seed', async () => {
    await rejects((ctx) => ctx.sessions.prepare('a', { seed: [E('x', 1, {})], meta: { cwd: 'rel' } }), 'seed event at index 0 has seq 1 (expected 0); seed must be contiguous from 0')
    const { o, r } = await both((ctx) => ctx.sessions.prepare('a', { seed: [user(0)], meta: { createdAt: 1 } }))
    for (const s of [(o as Any).value, (r as Any).value]) {
      expect(s.firstLiveSeq).toBe(1)
      expect(s.events.map((e: Any) => e.type)).toEqual(['user/message', 'session/end-seed'])
    }
  })

  it('PUB 12.3: already exists, minted ids', async () => {
    await rejects((ctx) => {
      ctx.sessions.create('a')
      ctx.sessions.prepare('a')
    }, 'session "a" already exists')
    const { o, r } = await both((ctx) => {
      ctx.sessions.create('session-1')
      return [ctx.sessions.prepare().id, ctx.sessions.create().id, ctx.sessions.prepare().id]
    })
    expect((o as Any).value).toEqual((r as Any).value)
  })

  it('PUB 12.3: seedSource persistence is Session.fromRestore: the whole header, ownership transfer, end-seed', async () => {
    const { o, r } = await both((ctx) => {
      const seed = [user(0), E('turn/start', 1, { turn: 1 }), E('turn/end', 2, { turn: 1, reason: { kind: 'completed' } })]
      const meta = { version: 0, id: 'p', createdAt: 3, cwd: '/w', zed: [1] }
      const s = ctx.sessions.prepare('p', { seed, meta, seedSource: 'persistence' })
      return { s, seed, meta }
    })
    for (const x of [(o as Any).value, (r as Any).value]) {
      expect(x.s.header).toBe(x.meta)
      expect(Object.isFrozen(x.meta.zed)).toBe(true)
      expect(x.s.events[0]).toBe(x.seed[0])
      expect(Object.isFrozen(x.seed[0].data)).toBe(true)
      expect(x.s.firstLiveSeq).toBe(3)
      expect(x.s.events[3].type).toBe('session/end-seed')
    }
    expect(noTime((o as Any).value.s.events)).toEqual(noTime((r as Any).value.s.events))
    // header first; a minted id must match the meta id
    await rejects((ctx) => ctx.sessions.prepare(undefined, { seed: [E('x', 5, {})], meta: { version: 0, id: 'p', createdAt: 0 }, seedSource: 'persistence' }),
      'session header id "p" does not match session id "session-1"')
    await rejects((ctx) => ctx.sessions.prepare('p', { seed: [E('x', 5, {})], meta: { version: 0, id: 'p', createdAt: 0 }, seedSource: 'persistence' }),
      'seed event at index 0 has seq 5 (expected 0); seed must be contiguous from 0')
    await rejects((ctx) => ctx.sessions.prepare('p', { seed: [], meta: { version: 0, id: 'p', createdAt: 0, origin: 'fork' }, seedSource: 'persistence' }),
      'session header origin must be "subagent"')
    // not lossless is accepted as given
    await both((ctx) => ctx.sessions.prepare('p', { seed: [E('x', 0, { u: undefined })], meta: { version: 0, id: 'p', createdAt: 0 }, seedSource: 'persistence' }))
    // other seedSource values take the create path
    await rejects((ctx) => ctx.sessions.prepare('p', { seed: [E('x', 0, { u: undefined })], meta: { version: 0, id: 'p', createdAt: 0 }, seedSource: 'other' }),
      'seed event at index 0 is not losslessly JSON-serializable')
  })
})

describe('PUB 12.6 meta fields and their messages', () => {
  it('PUB 12.6: origin, delegationDepth, agentPreset, createdAt', async () => {
    await rejects((ctx) => ctx.sessions.create('a', { meta: { origin: 'fork' } }), 'session header origin must be "subagent"')
    for (const d of ['1', 0.5, -1]) await rejects((ctx) => ctx.sessions.create('a', { meta: { delegationDepth: d } }), 'session header delegationDepth must be a non-negative safe integer')
    await rejects((ctx) => ctx.sessions.create('a', { meta: { agentPreset: 1 } }), 'session header agentPreset must be a string')
    for (const c of ['123', 1.5, -1, Number.MAX_SAFE_INTEGER + 1]) {
      await rejects((ctx) => ctx.sessions.create('a', { meta: { createdAt: c } }), 'session header createdAt must be a non-negative safe integer')
    }
    // a failed create leaves nothing in the store
    const { o } = await both((ctx) => {
      try { ctx.sessions.create('a', { meta: { agentPreset: 1 } }) } catch {}
      return ctx.sessions.list().length
    })
    expect((o as Any).value).toBe(0)
  })

  it('PUB 12.6: origin and delegationDepth are copied into the header', async () => {
    const { o, r } = await both((ctx) => ctx.sessions.create('a', { meta: { origin: 'subagent', delegationDepth: 1, agentPreset: 'x', createdAt: 0 } }).header)
    expect((o as Any).value).toEqual({ version: 0, id: 'a', createdAt: 0, origin: 'subagent', delegationDepth: 1, agentPreset: 'x' })
    expect((o as Any).value).toEqual((r as Any).value)
  })
})

describe('PUB 12.4 flush', () => {
  it('PUB 12.4 / 12.6: no listeners → false; a successful listener → true; never a count', async () => {
    for (const w of [OURS, REF]) {
      const ctx = await setup(w)
      const s = ctx.sessions.create('a')
      expect(await ctx.sessions.flush(s)).toBe(false)
      let calls = 0
      ctx.on('session/flush', async (x: Any) => { calls++; expect(x).toBe(s) })
      ctx.on('session/flush', () => { calls++ })
      expect(await ctx.sessions.flush(s)).toBe(true)
      expect(calls).toBe(2)
    }
  })

  it('PUB 12.4: the first failing listener in registration order; not live', async () => {
    // the raw reason of the first failing listener, as thrown (no code of ours)
    const raws: Any[] = []
    for (const w of [OURS, REF]) {
      const ctx = await setup(w)
      const s = ctx.sessions.create('a')
      const first = new Error('first')
      ctx.on('session/flush', async () => { await new Promise((res) => setTimeout(res, 5)); throw first })
      ctx.on('session/flush', async () => { throw new Error('second') })
      const out = await outcomeAsync(() => ctx.sessions.flush(s))
      expect(out.ok).toBe(false)
      expect((out as Any).error).toBe(first)
      raws.push(out)
    }
    await rejects(async (ctx) => {
      const s = ctx.sessions.prepare('a')
      await ctx.sessions.flush(s)
    }, 'session "a" is not live in this store')
  })
})

// A fake `typert` service: lookups.register(key, provider) lives as an effect of the caller's fiber.
function fakeTypert(cordis: Any) {
  const providers = new Map<string, Any>()
  class Typert extends cordis.Service {
    constructor(ctx: Any) { super(ctx, 'typert') }
    get lookups() {
      const ctx = (this as Any).ctx
      return {
        register: (key: string, provider: Any) => ctx.effect(function* () {
          providers.set(key, provider)
          yield () => { if (providers.get(key) === provider) providers.delete(key) }
        }, `fake typert.lookups.register(${key})`),
        get: (key: string) => providers.get(key),
      }
    }
  }
  return { Typert, providers }
}

describe('PUB 12.2 typert lookup', () => {
  for (const w of [OURS, REF]) {
    for (const order of ['store first', 'typert first'] as const) {
      it(`PUB 12.2: the session lookup is registered in either load order (${w.label}, ${order}); disposing the store removes it`, async () => {
        const ctx = new w.cordis.Context()
        ctx.logger.warn = () => {}
        const { Typert, providers } = fakeTypert(w.cordis)
        let storeFiber: Any
        if (order === 'store first') {
          storeFiber = await ctx.plugin(w.mod.SessionStore)
          await ctx.plugin(Typert)
        } else {
          await ctx.plugin(Typert)
          storeFiber = await ctx.plugin(w.mod.SessionStore)
        }
        await new Promise((res) => setTimeout(res, 0))
        const lookup = ctx.typert.lookups.get('session')
        expect(lookup).toBeDefined()
        const { resolve, ...rest } = lookup
        expect(rest).toEqual({
          parameter: 'session', wire: 'sessionId',
          hostTypeSymbol: '@deepseek-ai/dsh-session#Session',
          wireTypeSymbol: '@deepseek-ai/dsh-session/types#SessionId',
        })
        expect(Object.keys(lookup)).toEqual(['parameter', 'wire', 'hostTypeSymbol', 'wireTypeSymbol', 'resolve'])
        const s = ctx.sessions.create('a')
        expect(resolve('a')).toBe(s)
        expect(resolve('zz')).toBeUndefined()
        await storeFiber.dispose()
        await new Promise((res) => setTimeout(res, 0))
        expect(providers.get('session')).toBeUndefined()
      })
    }
    it(`PUB 12.2: without a typert service nothing happens (${w.label})`, async () => {
      const ctx = await setup(w)
      expect(ctx.sessions.create('a').id).toBe('a')
    })
  }
})

describe('PUB 12.5 / 12.6 fork', () => {
  const closed = () => [E('turn/start', 0, { turn: 1 }), user(1), E('turn/end', 2, { turn: 1, reason: { kind: 'completed' } })]
  async function forkBoth(events: Any[], boundary: Any, opts: { seeded?: boolean; meta?: Any } = {}) {
    return both((ctx) => {
      const src = opts.seeded
        ? ctx.sessions.create('src', { seed: JSON.parse(JSON.stringify(events)), meta: opts.meta })
        : ctx.sessions.create('src', { meta: opts.meta })
      if (!opts.seeded) for (const e of events) src.append(e.type, e.data, e.surfaceOp ? { surfaceOp: e.surfaceOp } : undefined)
      const child = ctx.sessions.fork(src, boundary)
      return { src, child }
    }, `fork at ${String(boundary)}`)
  }
  function sameChild(o: Outcome, r: Outcome) {
    const co = (o as Any).value.child
    const cr = (r as Any).value.child
    expect(noTime(co.events)).toEqual(noTime(cr.events))
    const { createdAt: _a, ...ho } = co.header
    const { createdAt: _b, ...hr } = cr.header
    expect(ho).toEqual(hr)
    expect(Object.keys(co.header)).toEqual(Object.keys(cr.header))
    expect(co.firstLiveSeq).toBe(cr.firstLiveSeq)
    return co
  }

  it('PUB 12.5: the child is the seed plus end-seed; meta cwd, parentSession, seedLength; origin etc. not inherited', async () => {
    const { o, r } = await forkBoth(closed(), 2, { meta: { cwd: '/w', origin: 'subagent', delegationDepth: 2, agentPreset: 'x' } })
    const child = sameChild(o, r)
    expect(child.events.map((e: Any) => e.type)).toEqual(['turn/start', 'user/message', 'turn/end', 'session/end-seed'])
    expect(child.firstLiveSeq).toBe(3)
    expect(Object.keys(child.header)).toEqual(['version', 'id', 'createdAt', 'cwd', 'parentSession', 'seedLength'])
    expect(child.header.parentSession).toBe('src')
    expect(child.header.seedLength).toBe(3)
    expect(child.id).toBe('session-1')
  })

  it('PUB 12.6: a stable log-only event after a closed turn is inherited; a log with no turn forks anywhere', async () => {
    const a = await forkBoth([...closed(), E('x/note', 3, {})], 3)
    expect(sameChild(a.o, a.r).events).toHaveLength(5)
    for (const b of [0, 1, undefined]) {
      const x = await forkBoth([user(0), E('x/y', 1, {})], b)
      sameChild(x.o, x.r)
    }
  })

  it('PUB 12.6: a parent bracket event ends up before the child end-seed; the parent log has no end-seed', async () => {
    const { o, r } = await forkBoth([...closed(), E('x/open', 3, {})], undefined)
    const child = sameChild(o, r)
    expect(child.firstLiveSeq).toBe(4)
    expect(child.events[3].type).toBe('x/open')
    expect(child.events[4].type).toBe('session/end-seed')
    expect((o as Any).value.src.events.some((e: Any) => e.type === 'session/end-seed')).toBe(false)
  })

  it('PUB 12.6: boundaries inside an open turn give OPEN_TURN', async () => {
    const events = [
      ...closed(),
      E('turn/start', 3, { turn: 2 }),
      E('step/start', 4, { turn: 2, step: 1 }),
      user(5),
      E('assistant/message', 6, { turn: 2, step: 1, message: { id: 'a', role: 'assistant', content: [{ type: 'tool-call', id: 'c', name: 'f', arguments: '{}' }], source: { kind: 'model', provider: 'p', model: 'm' } } }, { surfaceOp: 'append' }),
      E('tool/call', 7, { turn: 2, step: 1, callId: 'c', name: 'f', arguments: '{}' }),
    ]
    for (const b of [3, 4, 5, 6, 7]) {
      const { o, r } = await forkBoth(events, b)
      expect((r as Any).error.message).toBe(`fork boundary ${b} in session "src" ends inside open turn 2`)
      expect((r as Any).error.code).toBe('OPEN_TURN')
      expect((o as Any).error).toBeInstanceOf(ours.SessionForkError)
    }
    const ok = await forkBoth(events, 2)
    sameChild(ok.o, ok.r)
  })

  it('PUB 12.6: all six turn/end reasons are accepted', async () => {
    const reasons = [{ kind: 'completed' }, { kind: 'aborted', reason: { kind: 'user' } }, { kind: 'blocked' }, { kind: 'error', error: { message: 'm', code: 'c' } }, { kind: 'max-tokens' }, { kind: 'interrupted' }]
    for (const reason of reasons) {
      const { o, r } = await forkBoth([E('turn/start', 0, { turn: 1 }), E('turn/end', 1, { turn: 1, reason })], 1)
      sameChild(o, r)
    }
  })

  it('PUB 12.5: an empty source with the boundary omitted gives [end-seed@0], seedLength 0', async () => {
    const { o, r } = await forkBoth([], undefined)
    const child = sameChild(o, r)
    expect(noTime(child.events)).toEqual([{ type: 'session/end-seed', seq: 0, data: {} }])
    expect(child.header.seedLength).toBe(0)
    expect(child.firstLiveSeq).toBe(0)
  })

  it('PUB 12.5: a session/end-seed inside a seeded open turn is inside that turn', async () => {
    const seed = [...closed(), E('turn/start', 3, { turn: 2 })]
    for (const b of [3, 4]) {
      const { r } = await forkBoth(seed, b, { seeded: true })
      expect((r as Any).error.message).toBe(`fork boundary ${b} in session "src" ends inside open turn 2`)
    }
    const ok = await forkBoth(seed, 2, { seeded: true })
    sameChild(ok.o, ok.r)
  })

  it('PUB 12.5 / SPEC 12.6: INVALID_BOUNDARY, SESSION_NOT_FOUND, SESSION_NOT_LIVE, SESSION_ALREADY_EXISTS', async () => {
    for (const b of [-1, 1.5, NaN, '1', null, 3, 99]) {
      const { r } = await forkBoth(closed(), b)
      expect((r as Any).error.code).toBe('INVALID_BOUNDARY')
    }
    await both((ctx) => ctx.sessions.fork('nope'))
    await both((ctx) => {
      const s = ctx.sessions.create('src')
      const other = ctx.sessions.prepare('x')
      ctx.sessions.fork({ ...s, id: 'src' })
      return other
    })
    await both((ctx) => ctx.sessions.fork(ctx.sessions.prepare('src')))
    await both((ctx) => {
      ctx.sessions.create('src')
      ctx.sessions.create('kid')
      ctx.sessions.fork('src', undefined, 'kid')
    })
    const { o, r } = await both((ctx) => {
      ctx.sessions.create('src')
      return ctx.sessions.fork('src', undefined, 'kid').id
    })
    expect((o as Any).value).toBe('kid')
    expect((r as Any).value).toBe('kid')
  })

  it('SPEC 12.7 / PUB 12.6: a corrupted source (a child seed the seed checks refuse) fails as the reference does', async () => {
    // appends run no payload checks (PUB 5), so a source may hold an event a seed refuses
    await both((ctx) => {
      const s = ctx.sessions.create('src')
      s.append('request/header', { header: { config: {} }, reason: 'initial' })
      ctx.sessions.fork(s, 0)
    }, 'corrupted source')
    const { o } = await both((ctx) => {
      const s = ctx.sessions.create('src')
      s.append('user/message', { no: 'id' }, { surfaceOp: 'append' })
      try { ctx.sessions.fork(s, 0) } catch (e) { return [(e as Error).message, ctx.sessions.list().length] }
    })
    expect((o as Any).value).toEqual(['seed user/message at index 0 lacks an identified message', 1])
  })
})

describe('PUB 12 (SPEC 10 seam): publication through the store', () => {
  it('SPEC 4 step 4: an append from a session/event observer is refused; the observer sees each committed event once', async () => {
    const { o, r } = await both((ctx) => {
      const seen: Any[] = []
      const errors: string[] = []
      const s = ctx.sessions.create('a')
      ctx.on('session/event', (session: Any, event: Any) => {
        seen.push([session.id, event.type, event.seq])
        if (event.type === 'x/one') {
          try { session.append('x/two', {}) } catch (e) { errors.push((e as Error).message) }
        }
      })
      s.append('x/one', {})
      s.append('x/three', {})
      return { seen, errors, types: s.events.map((e: Any) => e.type) }
    })
    expect((o as Any).value).toEqual((r as Any).value)
    expect((r as Any).value.errors).toEqual(['session append cannot reenter while another append is being published'])
  })

  it('PUB 12.3: create announces (session/created) and disposal removes the session (session/disposed)', async () => {
    const { o, r } = await both(async (ctx) => {
      const log: string[] = []
      ctx.on('session/created', (s: Any) => { log.push(`created ${s.id}`) })
      ctx.on('session/disposed', (s: Any) => { log.push(`disposed ${s.id}`) })
      const fiber = await ctx.plugin({ name: 'owner', inject: ['sessions'], apply: (c: Any) => { c.sessions.create('a'); c.sessions.create('b', { seed: [] }) } })
      const before = ctx.sessions.list().map((s: Any) => s.id)
      await fiber.dispose()
      return { log, before, after: ctx.sessions.list().length }
    })
    expect((o as Any).value).toEqual((r as Any).value)
    expect((r as Any).value.before).toEqual(['a', 'b'])
  })
})
