// PUB 4.1–4.5: construction of the published Session (Session.create,
// Session.fromRestore, new Session), rule by rule, each input run on ours and
// on the reference @deepseek-ai/dsh-session@0.1.1-rc.2 (test-published/): the
// same accept/reject and the same message. Our errors additionally carry a
// stable `code` (/^[A-Z_]+$/); upstream's carry none.
import { describe, expect, it } from 'vitest'
import { type Any, type Outcome, outcome, noTime, ours, ref } from './published-helpers.js'

type Mod = typeof ours

/** Run `fn` on both packages; same accept/reject, same message, TypeError alike; codes as the brief says. */
function both(fn: (m: Mod) => unknown): { o: Outcome; r: Outcome } {
  const o = outcome(() => fn(ours))
  const r = outcome(() => fn(ref))
  if (!r.ok) {
    expect(o.ok, `reference rejected with ${r.error?.message}`).toBe(false)
    if (o.ok) return { o, r }
    expect(o.error.message).toBe(r.error.message)
    expect(o.error instanceof TypeError).toBe(r.error instanceof TypeError)
    expect(r.error.code).toBeUndefined()
    if (!(r.error instanceof TypeError)) {
      expect(o.error).toBeInstanceOf(Error)
      expect(typeof o.error.code).toBe('string')
      expect(o.error.code).toMatch(/^[A-Z_]+$/)
    }
  } else {
    expect(o.ok, o.ok ? '' : `ours rejected with ${(o as Any).error?.message}`).toBe(true)
  }
  return { o, r }
}

function rejects(fn: (m: Mod) => unknown, message: string): Any {
  const { o, r } = both(fn)
  expect(r.ok).toBe(false)
  expect((r as Any).error.message).toBe(message)
  return (o as Any).error
}

function accepts(fn: (m: Mod) => unknown): { o: Any; r: Any } {
  const { o, r } = both(fn)
  expect(r.ok).toBe(true)
  return { o: (o as Any).value, r: (r as Any).value }
}

// ---- seed builders (deep, fresh each call: fromRestore freezes its input) ----
const H = (extra: Any = {}): Any => ({ version: 0, id: 's', createdAt: 5, ...extra })
const userData = (id = 'u1'): Any => ({ id, role: 'user', content: [{ type: 'text', text: 'hi' }], source: { kind: 'user' } })
const assistantMsg = (id = 'a1', content: Any[] = [{ type: 'text', text: 'a' }]): Any => ({
  id, role: 'assistant', content, source: { kind: 'model', provider: 'p', model: 'm' },
})
const toolMsg = (callId = 'c1', id = 't1'): Any => ({
  id, role: 'user', source: { kind: 'tool', callId }, content: [{ type: 'tool-result', toolCallId: callId, content: [{ type: 'text', text: 'r' }] }],
})
const ev = (type: string, seq: number, data: Any, extra: Any = {}): Any => ({ type, seq, time: 0, data, ...extra })
const userEv = (seq: number, data: Any = userData(`u${seq}`), extra: Any = {}) => ev('user/message', seq, data, { surfaceOp: 'append', ...extra })
const asstEv = (seq: number, message: Any = assistantMsg(`a${seq}`), extra: Any = {}) =>
  ev('assistant/message', seq, { turn: 1, step: 1, message }, { surfaceOp: 'append', ...extra })
const toolEv = (seq: number, message: Any = toolMsg(), extra: Any = {}) => ev('tool/result', seq, { turn: 1, step: 1, message }, { surfaceOp: 'append', ...extra })
const headerEv = (seq: number, header: Any, reason = 'initial') => ev('request/header', seq, { header, reason })
const cfg = (extra: Any = {}) => ({ provider: 'p', model: 'm', ...extra })

/** A seed checked by create and by fromRestore: the same message on both paths and both packages. */
function seedRejects(seed: () => Any[], message: string) {
  rejects((m) => m.Session.create('s', seed()), message)
  rejects((m) => m.Session.fromRestore('s', seed(), H()), message)
}
function seedAccepts(seed: () => Any[]) {
  const a = accepts((m) => m.Session.create('s', seed()))
  expect(noTime(a.o.events)).toEqual(noTime(a.r.events))
  const b = accepts((m) => m.Session.fromRestore('s', seed(), H()))
  expect(noTime(b.o.events)).toEqual(noTime(b.r.events))
  return b
}

describe('PUB 4.1 constructors', () => {
  it('PUB 4.1: create snapshots the borrowed seed and header; the caller keeps its objects', () => {
    const { o, r } = accepts((m) => {
      const seed = [userEv(0)]
      const header = H()
      const s = m.Session.create('s', seed, header)
      return { s, seed, header }
    })
    for (const x of [o, r]) {
      expect(x.s.events[0]).not.toBe(x.seed[0])
      expect(x.s.events[0]).toEqual(x.seed[0])
      expect(Object.isFrozen(x.seed[0])).toBe(false)
      expect(Object.isFrozen(x.s.events[0])).toBe(true)
      expect(x.s.header).not.toBe(x.header)
      expect(x.s.header).toEqual(x.header)
      expect(Object.isFrozen(x.s.header)).toBe(true)
      expect(Object.isFrozen(x.header)).toBe(false)
    }
  })

  it('PUB 4.1: fromRestore transfers ownership: events[i] === seed[i], frozen in place, header is the caller object, frozen', () => {
    const { o, r } = accepts((m) => {
      const seed = [userEv(0), ev('turn/start', 1, { turn: 1 }), asstEv(2), ev('x/y', 3, { deep: { a: [1, { b: 2 }] } })]
      const header = H({ extra: { k: [1] } })
      const s = m.Session.fromRestore('s', seed, header)
      return { s, seed, header }
    })
    for (const x of [o, r]) {
      for (let i = 0; i < x.seed.length; i++) expect(x.s.events[i]).toBe(x.seed[i])
      expect(Object.isFrozen(x.seed[3])).toBe(true)
      expect(Object.isFrozen(x.seed[3].data.deep.a[1])).toBe(true)
      expect(Object.isFrozen(x.seed[0].data.content[0])).toBe(true)
      expect(x.s.header).toBe(x.header)
      expect(Object.isFrozen(x.header.extra.k)).toBe(true)
      expect(x.s.events).toHaveLength(5)
      expect(x.s.events[4].type).toBe('session/end-seed')
    }
  })

  it('PUB 4.1: fromRestore freezes nested data iteratively (depth 20,000)', () => {
    const { o, r } = accepts((m) => {
      let deep: Any = { leaf: true }
      const inner = deep
      for (let i = 0; i < 20_000; i++) deep = { d: deep }
      const seed = [ev('x/deep', 0, deep)]
      m.Session.fromRestore('s', seed, H())
      return inner
    })
    expect(Object.isFrozen(o)).toBe(true)
    expect(Object.isFrozen(r)).toBe(true)
  })

  it('PUB 4.1: fromRestore validates the header first; create validates the seed first', () => {
    const seed = () => [ev('x', 1, {})]
    rejects((m) => m.Session.fromRestore('s', seed(), H({ version: undefined })), 'session header version must be 0, got undefined')
    rejects((m) => m.Session.create('s', seed(), H({ version: undefined })), 'seed event at index 0 has seq 1 (expected 0); seed must be contiguous from 0')
    rejects((m) => m.Session.fromRestore('s', [ev('x', 0, { a: () => 1 })], H({ id: 'other' })), 'session header id "other" does not match session id "s"')
  })

  it('PUB 4.1: fromRestore accepts non-lossless values as given (undefined, -0); create rejects them', () => {
    for (const data of [{ a: undefined }, { z: -0 }, [1, undefined]]) {
      const { o, r } = accepts((m) => {
        const seed = [ev('x/y', 0, data)]
        return { s: m.Session.fromRestore('s', seed, H()), seed }
      })
      expect(o.s.events[0]).toBe(o.seed[0])
      expect(r.s.events[0]).toBe(r.seed[0])
      rejects((m) => m.Session.create('s', [ev('x/y', 0, data)]), 'seed event at index 0 is not losslessly JSON-serializable')
    }
  })

  it('PUB 4.1: fromRestore requires a header', () => {
    both((m) => m.Session.fromRestore('s', []))
    const { r } = both((m) => m.Session.fromRestore('s', [], undefined))
    expect(r.ok).toBe(false)
  })

  it('PUB 4.1: a header of a foreign prototype: fromRestore says not a plain record, create says not lossless', () => {
    class Box { version = 0; id = 's'; createdAt = 1 }
    rejects((m) => m.Session.fromRestore('s', [], new Box()), 'session header is not a plain JSON record')
    rejects((m) => m.Session.create('s', [], new Box()), 'session header is not losslessly JSON-serializable')
    const nullProto = Object.assign(Object.create(null), { version: 0, id: 's', createdAt: 1 })
    accepts((m) => m.Session.fromRestore('s', [], nullProto))
  })

  it('PUB 4.1: new Session(id, seed?, header?) behaves as Session.create', () => {
    const a = accepts((m) => new (m.Session as Any)('s', [userEv(0)], H()))
    expect(noTime(a.o.events)).toEqual(noTime(a.r.events))
    expect(a.o.firstLiveSeq).toBe(1)
    rejects((m) => new (m.Session as Any)('s', [ev('x', 0, { f: undefined })]), 'seed event at index 0 is not losslessly JSON-serializable')
    const b = accepts((m) => new (m.Session as Any)('s'))
    expect(b.o.events).toEqual([])
  })
})

describe('PUB 4.2 seed checks', () => {
  it('PUB 4.2 step 1: create snapshot failure', () => {
    rejects((m) => m.Session.create('s', [ev('x', 0, {}), ev('x', 1, { n: NaN })]), 'seed event at index 1 is not losslessly JSON-serializable')
    rejects((m) => m.Session.create('s', [{ type: 'x', seq: 0, time: 0, data: 1n }]), 'seed event at index 0 is not losslessly JSON-serializable')
  })

  it('PUB 4.2 step 2: request/header-delta before the key check', () => {
    seedRejects(() => [{ type: 'request/header-delta', seq: 9, bogus: 1 }], 'seed event at index 0 uses unsupported legacy request/header-delta format')
  })

  it('PUB 4.2 step 2: every invalid envelope', () => {
    const msg = (i: number) => `seed event at index ${i} has an invalid event envelope`
    const bad: Any[] = [
      { type: 'x', seq: 0, time: 0, data: {}, extra: 1 },
      { type: 1, seq: 0, time: 0, data: {} },
      { type: 'x', seq: -1, time: 0, data: {} },
      { type: 'x', seq: 0.5, time: 0, data: {} },
      { type: 'x', seq: '0', time: 0, data: {} },
      { type: 'x', seq: 0, time: 1.5, data: {} },
      { type: 'x', seq: 0, time: Number.MAX_SAFE_INTEGER + 1, data: {} },
      { type: 'x', seq: 0, time: 0 },
      { type: 'x', seq: 0, data: {} },
      { type: 'x', seq: 0, time: 0, data: {}, ignorable: false },
      { type: 'x', seq: 0, time: 0, data: {}, ignorable: null },
      { type: 'x', seq: 0, time: 0, data: {}, ignorable: 1 },
    ]
    for (const e of bad) seedRejects(() => [ev('ok', 0, {}), { ...e, seq: e.seq === 0 ? 1 : e.seq }], msg(1))
    // an absent-but-undefined data: fromRestore (no snapshot) sees the key
    rejects((m) => m.Session.fromRestore('s', [{ type: 'x', seq: 0, time: 0, data: undefined }], H()), msg(0))
    // primitives give the same message
    for (const p of [1, 'x', true]) seedRejects(() => [p], msg(0))
  })

  it('PUB 4.2 step 2: a null entry throws a TypeError (reading type of null)', () => {
    for (const make of [(m: Mod) => m.Session.create('s', [null]), (m: Mod) => m.Session.fromRestore('s', [null], H())]) {
      const { o, r } = both(make)
      expect(r.ok).toBe(false)
      expect((r as Any).error).toBeInstanceOf(TypeError)
      expect((o as Any).error).toBeInstanceOf(TypeError)
    }
  })

  it('PUB 1 / 4.2: ignorable: true is accepted and kept; a negative time is accepted and kept', () => {
    const b = seedAccepts(() => [ev('x/y', 0, {}, { ignorable: true }), ev('x/z', 1, {}, { time: -5 })])
    expect(b.o.events[0].ignorable).toBe(true)
    expect(b.o.events[1].time).toBe(-5)
    expect(b.r.events[1].time).toBe(-5)
    // seeds keep the caller's key order
    const c = accepts((m) => m.Session.create('s', [{ data: {}, time: 0, ignorable: true, seq: 0, type: 'x' }]))
    expect(Object.keys(c.o.events[0])).toEqual(Object.keys(c.r.events[0]))
    expect(Object.keys(c.o.events[0])).toEqual(['data', 'time', 'ignorable', 'seq', 'type'])
  })

  it('PUB 4.2 step 3: request/header provider/model, reasoningEffort, adapterDefaults', () => {
    const lacks = 'seed request/header at index 0 lacks provider/model'
    seedRejects(() => [ev('request/header', 0, { reason: 'initial' })], lacks)
    for (const header of [null, [], 1, {}, { config: null }, { config: { provider: 'p' } }, { config: { provider: '', model: 'm' } }, { config: { provider: 'p', model: 1 } }]) {
      seedRejects(() => [headerEv(0, header)], lacks)
    }
    seedRejects(() => [ev('request/header', 0, null)], lacks)
    seedRejects(() => [ev('request/header', 0, [])], lacks)
    const effort = 'seed request/header at index 0 has an invalid reasoningEffort'
    for (const re of ['', 1, null, true]) seedRejects(() => [headerEv(0, { config: cfg({ reasoningEffort: re }) })], effort)
    const ad = 'seed request/header at index 0 has invalid adapterDefaults'
    for (const [config, adapterDefaults] of [
      [cfg(), []],
      [cfg(), null],
      [cfg(), 1],
      [cfg({ reasoningEffort: 'high' }), { reasoningEffort: false }],
      [cfg({ reasoningEffort: 'high' }), { reasoningEffort: 'yes' }],
      [cfg(), { reasoningEffort: true }],
      [cfg(), { maxTokens: true }],
      [cfg({ maxTokens: 5 }), { maxTokens: true, temperature: true }],
    ] as Any[]) seedRejects(() => [headerEv(0, { config, adapterDefaults })], ad)
    seedAccepts(() => [headerEv(0, { config: cfg({ reasoningEffort: 'high', maxTokens: 5 }), adapterDefaults: { reasoningEffort: true, maxTokens: true } })])
    seedAccepts(() => [headerEv(0, { config: cfg(), adapterDefaults: {} })])
  })

  it('PUB 4.2 step 4: the legacy fallback reason, after step 3', () => {
    seedRejects(() => [headerEv(0, { config: cfg() }, 'fallback')], 'seed event at index 0 uses unsupported legacy request/header reason "fallback"')
    seedRejects(() => [headerEv(0, { config: {} }, 'fallback')], 'seed request/header at index 0 lacks provider/model')
  })

  it('PUB 4.2 step 5: contiguity', () => {
    seedRejects(() => [ev('x', 0, {}), ev('x', 2, {})], 'seed event at index 1 has seq 2 (expected 1); seed must be contiguous from 0')
  })

  it('PUB 4.2 step 6: a surface failure is rewrapped', () => {
    seedRejects(() => [ev('x', 0, {}, { surfaceOp: 'append' })], 'invalid seed event at index 0: session event "x" is not surface-eligible and cannot carry surfaceOp')
    seedRejects(() => [{ ...userEv(0), surfaceOp: undefined }].map(({ surfaceOp, ...e }) => e), 'invalid seed event at index 0: session event "user/message" is surface-eligible and requires a surfaceOp marker')
    seedRejects(() => [userEv(0), userEv(1, userData('u1'), { surfaceOp: { op: 'replace', start: 5, end: 5 }, sourceEventSeqs: [0] })],
      'invalid seed event at index 1: surface replace: start seq 5 not found in surface')
    seedRejects(() => [userEv(0, userData(), { sourceEventSeqs: [0] })], 'invalid seed event at index 0: sourceEventSeqs must reference earlier events: 0 >= current seq 0')
  })

  it('PUB 4.2: message-shape table, user/message', () => {
    const s = 'seed user/message at index 0'
    const cases: [Any, string][] = [
      [null, 'lacks an identified message'],
      [[], 'lacks an identified message'],
      [{ role: 'user', content: [], source: { kind: 'user' } }, 'lacks an identified message'],
      [{ ...userData(), id: '' }, 'lacks an identified message'],
      [{ ...userData(), id: 1 }, 'lacks an identified message'],
      [{ ...userData(), role: 'assistant' }, 'message must have role "user"'],
      [{ ...userData(), source: null }, 'message has invalid source'],
      [{ ...userData(), source: { kind: '' } }, 'message has invalid source'],
      [{ ...userData(), source: 'user' }, 'message has invalid source'],
      [{ ...userData(), content: 'hi' }, 'message has invalid content'],
      // v0-style
      [{ content: [{ type: 'text', text: 'x' }] }, 'lacks an identified message'],
    ]
    for (const [data, tail] of cases) seedRejects(() => [userEv(0, data)], `${s} ${tail}`)
    seedAccepts(() => [userEv(0, { ...userData(), extra: 1, source: { kind: 'plugin', plugin: 'x' }, content: [{ type: 'weird' }] })])
  })

  it('PUB 4.2: message-shape table, assistant/message', () => {
    const s = 'seed assistant/message at index 0'
    const cases: [Any, string][] = [
      [null, 'lacks an identified message'],
      [{ ...assistantMsg(), id: '' }, 'lacks an identified message'],
      [{ ...assistantMsg(), role: 'user' }, 'message must have role "assistant"'],
      [{ ...assistantMsg(), source: {} }, 'message has invalid source'],
      [{ ...assistantMsg(), content: {} }, 'message has invalid content'],
      [{ ...assistantMsg(), source: { kind: 'user' } }, 'message must have model source'],
      [{ ...assistantMsg(), source: { kind: 'model', provider: 'p' } }, 'message must have model source'],
      [{ ...assistantMsg(), source: { kind: 'model', provider: '', model: 'm' } }, 'message must have model source'],
    ]
    for (const [message, tail] of cases) seedRejects(() => [asstEv(0, message)], `${s} ${tail}`)
    // an old-style assistant/message (v0 provenance) lacks an identified message
    seedRejects(() => [ev('assistant/message', 0, { turn: 1, step: 1, content: [], provenance: { provider: 'p', model: 'm' } }, { surfaceOp: 'append' })], `${s} lacks an identified message`)
    seedAccepts(() => [asstEv(0, assistantMsg('a', []))])
  })

  it('PUB 4.2: message-shape table, tool/result', () => {
    const s = 'seed tool/result at index 0'
    const m = toolMsg
    const cases: [Any, string][] = [
      [(({ id, ...rest }) => rest)(m()), 'lacks an identified message'],
      [{ ...m(), role: 'tool' }, 'message must have role "user"'],
      [{ ...m(), source: { callId: 'c1' } }, 'message has invalid source'],
      [{ ...m(), content: null }, 'message has invalid content'],
      [{ ...m(), source: { kind: 'user', callId: 'c1' } }, 'message must have tool source'],
      [{ ...m(), source: { kind: 'tool', callId: '' } }, 'message must have tool source'],
      [{ ...m(), content: [] }, 'message must contain one tool-result block'],
      [{ ...m(), content: [m().content[0], m().content[0]] }, 'message must contain one tool-result block'],
      [{ ...m(), content: [{ type: 'text', text: 'x' }] }, 'message must contain one tool-result block'],
      [{ ...m(), content: [{ type: 'tool-result', toolCallId: 'c1', content: 'r' }] }, 'message must contain one tool-result block'],
      [{ ...m(), content: [null] }, 'message must contain one tool-result block'],
      [{ ...m(), content: [{ type: 'tool-result', toolCallId: 'c2', content: [] }] }, 'message has mismatched tool call ids'],
    ]
    for (const [message, tail] of cases) seedRejects(() => [toolEv(0, message)], `${s} ${tail}`)
    seedAccepts(() => [toolEv(0, { ...m(), content: [{ type: 'tool-result', toolCallId: 'c1', content: [], isError: 'whatever' }] })])
  })

  it('PUB 4.2: the message checks run at step 3, before contiguity and surface', () => {
    seedRejects(() => [ev('x', 0, {}), { ...userEv(5, { id: '' }), surfaceOp: 7 }], 'seed user/message at index 1 lacks an identified message')
  })
})

describe('PUB 4.3 firstLiveSeq and session/end-seed', () => {
  it('PUB 4.3: create(id) appends nothing; create(id, []) gives [end-seed@0], firstLiveSeq 0', () => {
    const a = accepts((m) => m.Session.create('s'))
    expect(a.o.events).toEqual([])
    expect(a.o.firstLiveSeq).toBe(0)
    expect(a.r.firstLiveSeq).toBe(0)
    const b = accepts((m) => m.Session.create('s', []))
    for (const s of [b.o, b.r]) {
      expect(noTime(s.events)).toEqual([{ type: 'session/end-seed', seq: 0, data: {} }])
      expect(s.firstLiveSeq).toBe(0)
      expect(Number.isSafeInteger(s.events[0].time)).toBe(true)
      expect(Math.abs(s.events[0].time - Date.now())).toBeLessThan(60_000)
    }
    // re-creating from those events: firstLiveSeq 1, the same events
    const c = accepts((m) => m.Session.create('s', JSON.parse(JSON.stringify(b.o.events))))
    for (const s of [c.o, c.r]) {
      expect(s.firstLiveSeq).toBe(1)
      expect(s.events).toEqual(b.o.events)
    }
    const d = accepts((m) => m.Session.fromRestore('s', JSON.parse(JSON.stringify(b.o.events)), H()))
    expect(d.o.firstLiveSeq).toBe(1)
    expect(d.o.events).toHaveLength(1)
  })

  it('PUB 4.3: a seed not ending in end-seed is marked at seq firstLiveSeq; one ending in it is not', () => {
    const a = accepts((m) => m.Session.create('s', [ev('session/end-seed', 0, {}), ev('x', 1, {})]))
    for (const s of [a.o, a.r]) {
      expect(s.firstLiveSeq).toBe(2)
      expect(s.events).toHaveLength(3)
      expect(s.events[2]).toMatchObject({ type: 'session/end-seed', seq: 2, data: {} })
      expect(Object.keys(s.events[2])).toEqual(['type', 'seq', 'time', 'data'])
      expect(s.seq).toBe(3)
    }
    const b = accepts((m) => m.Session.fromRestore('s', [ev('x', 0, {}), ev('session/end-seed', 1, { any: 'json' })], H()))
    for (const s of [b.o, b.r]) {
      expect(s.firstLiveSeq).toBe(2)
      expect(s.events).toHaveLength(2)
    }
  })

  it('PUB 2.2: an append of session/end-seed is an ordinary append', () => {
    const a = accepts((m) => {
      const s = m.Session.create('s')
      s.append('session/end-seed', { x: 1 })
      return s
    })
    expect(noTime(a.o.events)).toEqual(noTime(a.r.events))
    expect(a.o.firstLiveSeq).toBe(0)
  })
})

describe('PUB 4.4 header', () => {
  it('PUB 4.4: omitted gives {version: 0, id, createdAt: Date.now()}', () => {
    const a = accepts((m) => m.Session.create('s'))
    for (const s of [a.o, a.r]) {
      expect(Object.keys(s.header)).toEqual(['version', 'id', 'createdAt'])
      expect(s.header.version).toBe(0)
      expect(s.header.id).toBe('s')
      expect(Math.abs(s.header.createdAt - Date.now())).toBeLessThan(60_000)
      expect(Object.isFrozen(s.header)).toBe(true)
    }
  })

  it('PUB 4.4: the create snapshot message', () => {
    rejects((m) => m.Session.create('s', undefined, { ...H(), x: undefined }), 'session header is not losslessly JSON-serializable')
    rejects((m) => m.Session.create('s', undefined, { ...H(), x: Infinity }), 'session header is not losslessly JSON-serializable')
  })

  // Each row fails its field while every later field fails too: the first in table order wins.
  const bad = { version: 1, id: 'x', createdAt: -1, cwd: 'rel', parentSession: 1, seedLength: -1, origin: 'fork', delegationDepth: 0.5, agentPreset: 1 }
  const good = { version: 0, id: 's', createdAt: 0, cwd: '/abs', parentSession: 'p', seedLength: 0, origin: 'subagent', delegationDepth: 0, agentPreset: 'a' }
  const order = Object.keys(bad) as (keyof typeof bad)[]
  const messages: Record<string, string> = {
    version: 'session header version must be 0, got 1',
    id: 'session header id "x" does not match session id "s"',
    createdAt: 'session header createdAt must be a non-negative safe integer',
    cwd: 'session header cwd must be an absolute path, got "rel"',
    parentSession: 'session header parentSession must be a string',
    seedLength: 'session header seedLength must be a non-negative safe integer',
    origin: 'session header origin must be "subagent"',
    delegationDepth: 'session header delegationDepth must be a non-negative safe integer',
    agentPreset: 'session header agentPreset must be a string',
  }
  for (let k = 0; k < order.length; k++) {
    it(`PUB 4.4: ${order[k]} is checked in table order (create and fromRestore)`, () => {
      const header: Any = {}
      for (let j = 0; j < order.length; j++) header[order[j]] = j < k ? good[order[j]] : bad[order[j]]
      rejects((m) => m.Session.create('s', undefined, { ...header }), messages[order[k]])
      rejects((m) => m.Session.fromRestore('s', [], { ...header }), messages[order[k]])
    })
  }

  it('PUB 4.4: the record check and per-field variants', () => {
    for (const h of [null, [], 1, 'h']) {
      rejects((m) => m.Session.fromRestore('s', [], h), 'session header is not a plain JSON record')
      both((m) => m.Session.create('s', undefined, h))
    }
    rejects((m) => m.Session.create('s', undefined, []), 'session header is not a plain JSON record')
    rejects((m) => m.Session.create('s', undefined, H({ version: '0' })), 'session header version must be 0, got 0')
    rejects((m) => m.Session.create('s', undefined, { id: 's', createdAt: 0 }), 'session header version must be 0, got undefined')
    rejects((m) => m.Session.create('s', undefined, H({ version: null })), 'session header version must be 0, got null')
    for (const c of ['123', 1.5, -1, Number.MAX_SAFE_INTEGER + 1, null]) {
      rejects((m) => m.Session.fromRestore('s', [], H({ createdAt: c })), 'session header createdAt must be a non-negative safe integer')
    }
    rejects((m) => m.Session.create('s', undefined, H({ cwd: null })), 'session header cwd must be a string')
    rejects((m) => m.Session.create('s', undefined, H({ cwd: 1 })), 'session header cwd must be a string')
    rejects((m) => m.Session.create('s', undefined, H({ cwd: '' })), 'session header cwd must be an absolute path, got ""')
    rejects((m) => m.Session.create('s', undefined, H({ parentSession: null })), 'session header parentSession must be a string')
    for (const v of ['1', 0.5, -1, null]) {
      rejects((m) => m.Session.create('s', undefined, H({ seedLength: v })), 'session header seedLength must be a non-negative safe integer')
      rejects((m) => m.Session.create('s', undefined, H({ delegationDepth: v })), 'session header delegationDepth must be a non-negative safe integer')
    }
    for (const v of ['fork', null, 'Subagent']) rejects((m) => m.Session.create('s', undefined, H({ origin: v })), 'session header origin must be "subagent"')
    rejects((m) => m.Session.create('s', undefined, H({ agentPreset: null })), 'session header agentPreset must be a string')
  })

  it('PUB 4.4: undefined optional fields count as absent (fromRestore); unknown keys kept in caller order; session.id is header.id', () => {
    const a = accepts((m) => m.Session.fromRestore('s', [], { zed: 1, version: 0, cwd: undefined, id: 's', createdAt: 0, origin: undefined, alpha: [1] }))
    for (const s of [a.o, a.r]) {
      expect(Object.keys(s.header)).toEqual(['zed', 'version', 'cwd', 'id', 'createdAt', 'origin', 'alpha'])
      expect(s.id).toBe('s')
      expect(Object.isFrozen(s.header.alpha)).toBe(true)
    }
    const b = accepts((m) => m.Session.create('s', undefined, { ...good, zed: { q: 1 } }))
    expect(b.o.header).toEqual(b.r.header)
    expect(Object.keys(b.o.header)).toEqual(Object.keys(b.r.header))
  })
})

describe('PUB 4.5 properties', () => {
  it('PUB 4.5: id, header, seq, events, surface, firstLiveSeq, deriveEventMessage', () => {
    const a = accepts((m) => m.Session.create('s', [userEv(0), ev('turn/start', 1, { turn: 1 }), asstEv(2), asstEv(3, assistantMsg('e', []))], H({ cwd: '/w' })))
    for (const s of [a.o, a.r]) {
      expect(s.id).toBe('s')
      expect(s.seq).toBe(5)
      expect(s.firstLiveSeq).toBe(4)
      expect([...s.surface.nodes]).toEqual([0, 2, 3])
      expect(s.surface.replaceGeneration).toBe(0)
      expect(s.surface).toBe(s.surface)
      expect(s.surface.nodes).toBe(s.surface.nodes)
      expect(s.deriveEventMessage(s.events[0])).toBe(s.events[0].data)
      expect(s.deriveEventMessage(s.events[2])).toBe(s.events[2].data.message)
      expect(s.deriveEventMessage(s.events[3])).toBeNull()
      expect(s.deriveEventMessage(s.events[1])).toBeNull()
      expect(Object.isFrozen(s.events)).toBe(Object.isFrozen(a.r.events))
    }
    expect(noTime(a.o.events)).toEqual(noTime(a.r.events))
    expect(a.o.header).toEqual(a.r.header)
  })
})

describe('PUB 4.1 fromRestore takes the input as given: agreements', () => {
  const u = () => userData('u')
  const tool = (x: Any = {}, mx: Any = {}) => ({ turn: 1, step: 1, message: { ...toolMsg('c', 't'), content: [{ type: 'tool-result', toolCallId: 'c', content: [] }], ...mx }, ...x })
  const cases: [string, () => Any[]][] = [
    ['-0 turn in a tool/result replacement', () => [toolEv(0, undefined, { data: tool({ turn: 0 }) }), { ...toolEv(1), data: tool({ turn: -0 }), surfaceOp: { op: 'replace', start: 0, end: 0 }, sourceEventSeqs: [0] }]],
    ['-0 in sourceEventSeqs', () => [userEv(0, u()), userEv(1, u(), { sourceEventSeqs: [-0] })]],
    ['-0 replace start', () => [userEv(0, u()), userEv(1, u(), { surfaceOp: { op: 'replace', start: -0, end: 0 }, sourceEventSeqs: [0] })]],
    ['-0 time', () => [ev('x', 0, {}, { time: -0 })]],
    ['an undefined extra key in a message', () => [userEv(0, { ...u(), extra: undefined })]],
    ['undefined inside result content', () => [toolEv(0, undefined, { data: tool({}, { content: [{ type: 'tool-result', toolCallId: 'c', content: [undefined] }] }) })]],
    ['a null-prototype event', () => [Object.assign(Object.create(null), ev('x', 0, {}))]],
    ['inherited keys on data', () => [ev('x', 0, Object.create({ a: 1 }))]],
  ]
  for (const [name, seed] of cases) {
    it(`PUB 4.1: fromRestore with ${name}`, () => {
      const { o, r } = both((m) => m.Session.fromRestore('s', seed(), H()))
      if (o.ok && r.ok) {
        expect([...o.value.surface.nodes]).toEqual([...r.value.surface.nodes])
        expect(o.value.surface.replaceGeneration).toBe(r.value.surface.replaceGeneration)
      }
    })
  }
  it('PUB 4.2: a hole or undefined entry in a create seed is not lossless', () => {
    const sparse = () => { const a: Any[] = [ev('x', 0, {})]; a.length = 2; return a }
    rejects((m) => m.Session.create('s', sparse()), 'seed event at index 1 is not losslessly JSON-serializable')
    rejects((m) => m.Session.create('s', [undefined]), 'seed event at index 0 is not losslessly JSON-serializable')
  })
  it('PUB 4.4: cwd is absolute by POSIX path.isAbsolute (agreements)', () => {
    for (const cwd of ['/', '//x', '/a/../b']) accepts((m) => m.Session.create('s', undefined, H({ cwd })))
    for (const cwd of ['\\x', 'c:', '~/x', ' /x', '.']) rejects((m) => m.Session.create('s', undefined, H({ cwd })), `session header cwd must be an absolute path, got "${cwd}"`)
  })
})

// KNOWN GAPS, the reference wins. Ours serializes a fromRestore seed to JSON before the checks,
// so a key whose value is `undefined` vanishes and a non-array seed is read as an iterable.
// REF_ONLY=1 runs these as plain tests of the reference side alone (checks that each gap is real).
const REF_ONLY = !!process.env.REF_ONLY
const itGap = REF_ONLY ? it : it.fails
describe('PUB 4.1 / 4.2 / 4.4 discrepancies with the reference (it.fails until fixed)', () => {
  const tool = (x: Any = {}, mx: Any = {}) => ({ turn: 1, step: 1, message: { ...toolMsg('c', 't'), content: [{ type: 'tool-result', toolCallId: 'c', content: [] }], ...mx }, ...x })
  const rep = (data: Any) => ({ type: 'tool/result', seq: 1, time: 0, data, surfaceOp: { op: 'replace', start: 0, end: 0 }, sourceEventSeqs: [0] })
  const base = () => ({ type: 'tool/result', seq: 0, time: 0, data: tool(), surfaceOp: 'append' })
  const gaps: [string, () => Any, string][] = [
    // PUB 6 rule 3 (structural equality, key sets): ours accepts, reference rejects
    ['a tool/result replacement adding meta: undefined', () => [base(), rep(tool({ meta: undefined }))], 'invalid seed event at index 1: tool/result surface replacement may change only content'],
    ['a tool/result replacement adding message.x: undefined', () => [base(), rep(tool({}, { x: undefined }))], 'invalid seed event at index 1: tool/result surface replacement may change only content'],
    ['a tool/result replacement adding isError: undefined', () => [base(), rep(tool({}, { content: [{ type: 'tool-result', toolCallId: 'c', content: [1], isError: undefined }] }))], 'invalid seed event at index 1: tool/result surface replacement may change only content'],
    // SPEC 5 (exactly {op, start, end}): ours accepts, reference rejects
    ['a replace surfaceOp with an extra undefined key', () => [userEv(0), userEv(1, userData('u1'), { surfaceOp: { op: 'replace', start: 0, end: 0, x: undefined }, sourceEventSeqs: [0] })], 'invalid seed event at index 1: session event "user/message" carries an invalid replace surfaceOp'],
    // PUB 4.2 (adapterDefaults values exactly true): ours accepts, reference rejects
    ['adapterDefaults {reasoningEffort: true, maxTokens: undefined}', () => [headerEv(0, { config: cfg({ reasoningEffort: 'x' }), adapterDefaults: { reasoningEffort: true, maxTokens: undefined } })], 'seed request/header at index 0 has invalid adapterDefaults'],
    ['adapterDefaults {foo: undefined}', () => [headerEv(0, { config: cfg(), adapterDefaults: { foo: undefined } })], 'seed request/header at index 0 has invalid adapterDefaults'],
    // PUB 4.2 envelope (inherited enumerable keys count): ours accepts, reference rejects
    ['an event whose prototype carries an enumerable key', () => [Object.assign(Object.create({ inherited: 1 }), ev('x', 0, {}))], 'seed event at index 0 has an invalid event envelope'],
  ]
  for (const [name, seed, message] of gaps) {
    itGap(`PUB 4.1: fromRestore with ${name} gives "${message}" as the reference does`, () => {
      expect(() => ref.Session.fromRestore('s', seed(), H())).toThrow(message)
      if (REF_ONLY) return
      rejects((m) => m.Session.fromRestore('s', seed(), H()), message)
    })
  }
  // The reference reports a hole or an undefined entry as not lossless even in fromRestore (PUB 4.2
  // says the snapshot step is create only: the reference contradicts the page, and wins).
  for (const [name, seed, message] of [
    ['an undefined entry', () => [undefined], 'seed event at index 0 is not losslessly JSON-serializable'],
    ['a hole', () => { const a: Any[] = [ev('x', 0, {})]; a.length = 2; return a }, 'seed event at index 1 is not losslessly JSON-serializable'],
  ] as [string, () => Any, string][]) {
    it(`PUB 4.1: fromRestore with ${name} gives "${message}" as the reference does`, () => {
      expect(() => ref.Session.fromRestore('s', seed(), H())).toThrow(message)
      rejects((m) => m.Session.fromRestore('s', seed(), H()), message)
    })
  }
  // Non-array seeds: both read seed.entries() (a TypeError for {}, 5 and a string).
  for (const [name, seed] of [['{}', () => ({})], ['5', () => 5], ['a string', () => 'x']] as [string, () => Any][]) {
    it(`PUB 4.1: fromRestore with a non-array seed (${name}) is a TypeError as with the reference`, () => {
      const r = outcome(() => ref.Session.fromRestore('s', seed(), H()))
      const o = outcome(() => ours.Session.fromRestore('s', seed(), H()))
      expect((r as Any).error).toBeInstanceOf(TypeError)
      expect((o as Any).error).toBeInstanceOf(TypeError)
    })
  }
  // A Set: the reference's entries() gives [value, value] pairs and it reports
  // "seed event at index [object Object] has seq 0 (expected [object Object])"; ours reads its values.
  for (const [name, seed] of [['a Set', () => new Set([ev('x', 0, {})])]] as [string, () => Any][]) {
    itGap(`PUB 4.1: fromRestore with a non-array seed (${name}) fails as the reference does`, () => {
      const r = outcome(() => ref.Session.fromRestore('s', seed(), H()))
      expect(r.ok).toBe(false)
      if (REF_ONLY) return
      const o = outcome(() => ours.Session.fromRestore('s', seed(), H()))
      expect(o.ok).toBe(false)
      expect((o as Any).error instanceof TypeError).toBe((r as Any).error instanceof TypeError)
    })
  }
  it('PUB 4.1: create with a non-array seed: both throw a TypeError', () => {
    for (const seed of [{}, 5, null]) {
      const o = outcome(() => ours.Session.create('s', seed as Any))
      const r = outcome(() => ref.Session.create('s', seed as Any))
      expect((o as Any).error).toBeInstanceOf(TypeError)
      expect((r as Any).error).toBeInstanceOf(TypeError)
    }
  })
  // PUB 4.4 (`path.isAbsolute`, POSIX on this platform): ours accepts Windows-style absolute paths
  for (const cwd of ['C:\\x', 'C:/x', '\\\\srv\\share']) {
    itGap(`PUB 4.4: cwd ${JSON.stringify(cwd)} is not absolute (reference)`, () => {
      expect(() => ref.Session.create('s', undefined, H({ cwd }))).toThrow(`session header cwd must be an absolute path, got "${cwd}"`)
      if (REF_ONLY) return
      rejects((m) => m.Session.create('s', undefined, H({ cwd })), `session header cwd must be an absolute path, got "${cwd}"`)
    })
  }
})
