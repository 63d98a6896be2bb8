// PUB 6, 7, 13.2: the plain-JS `./surface` of the published line, by rule and
// differentially against the reference 0.1.1-rc.2 module.
import { describe, expect, it } from 'vitest'
import fc from 'fast-check'
import * as ours from '../published/lib/surface.js'
// @ts-ignore -- the reference's own declarations import .ts paths
import * as ref from '../test-published/node_modules/@deepseek-ai/dsh-session/lib/types/surface.js'
import { readFileSync } from 'node:fs'

type Ev = Record<string, any>
const { foldSurface, SurfaceManager } = ours

function user(seq: number, extra: Ev = {}, id = `u${seq}`): Ev {
  return { type: 'user/message', seq, time: 0, data: { id, role: 'user', content: [{ type: 'text', text: 'hi' }], source: { kind: 'user' } }, surfaceOp: 'append', ...extra }
}
function assistant(seq: number, content: unknown[] = [{ type: 'text', text: 'a' }], extra: Ev = {}): Ev {
  return { type: 'assistant/message', seq, time: 0, data: { turn: 1, step: 1, message: { id: `a${seq}`, role: 'assistant', content, source: { kind: 'model', provider: 'p', model: 'm' } } }, surfaceOp: 'append', ...extra }
}
function result(seq: number, callId: string, inner: unknown[] = [{ type: 'text', text: 'r' }], extra: Ev = {}, data: Ev = {}): Ev {
  return {
    type: 'tool/result', seq, time: 0,
    data: { turn: 1, step: 1, message: { id: `t-${callId}`, role: 'user', source: { kind: 'tool', callId }, content: [{ type: 'tool-result', toolCallId: callId, content: inner }] }, ...data },
    surfaceOp: 'append', ...extra,
  }
}
function log(seq: number, type = 'turn/start', extra: Ev = {}): Ev {
  return { type, seq, time: 0, data: { turn: 1 }, ...extra }
}
const replace = (start: number, end: number) => ({ op: 'replace', start, end })
const msgOf = (events: Ev[]) => { try { foldSurface(events as any); return undefined } catch (e) { return (e as Error).message } }

describe('PUB 13.2 ./surface loads without the addon and has no imports', () => {
  it('the module text has no import or require at all, and the first comment says why it exists', () => {
    const text = readFileSync(new URL('../published/lib/surface.js', import.meta.url), 'utf8')
    expect(text).not.toMatch(/\bimport\b|\brequire\s*\(/)
    expect(text.slice(0, 400)).toMatch(/browser-safe/)
    expect(Object.keys(ours).sort()).toEqual(['SurfaceManager', 'deriveEventMessage', 'foldSurface', 'isAppendSurfaceEvent',
      'isReplacementSurfaceEvent', 'isSurfaceEligibleType', 'isSurfaceEvent'])
  })
})

describe('PUB 6 eligibility and guards', () => {
  it('PUB 6: exactly three eligible types', () => {
    for (const t of ['user/message', 'assistant/message', 'tool/result']) expect(ours.isSurfaceEligibleType(t)).toBe(true)
    for (const t of ['context/message', 'steering/message', 'turn/start', 'assistant/chunk', '']) expect(ours.isSurfaceEligibleType(t)).toBe(false)
  })
  it('PUB 6: the three guards', () => {
    const a = user(0)
    const r = user(1, { surfaceOp: replace(0, 0), sourceEventSeqs: [0] })
    const bare = { ...user(2), surfaceOp: undefined }
    const logOnly = log(3)
    expect([ours.isSurfaceEvent(a as any), ours.isAppendSurfaceEvent(a as any), ours.isReplacementSurfaceEvent(a as any)]).toEqual([true, true, false])
    expect([ours.isSurfaceEvent(r as any), ours.isAppendSurfaceEvent(r as any), ours.isReplacementSurfaceEvent(r as any)]).toEqual([true, false, true])
    for (const e of [bare, logOnly, { ...logOnly, surfaceOp: 'append' }]) {
      expect([ours.isSurfaceEvent(e as any), ours.isAppendSurfaceEvent(e as any), ours.isReplacementSurfaceEvent(e as any)]).toEqual([false, false, false])
    }
  })
})

describe('PUB 7 deriveEventMessage', () => {
  it('PUB 7: the events own objects, null for empty assistant content and log-only events', () => {
    const u = user(0, {}, 'x')
    u.data.extra = 1
    expect(ours.deriveEventMessage(u as any)).toBe(u.data)
    const a = assistant(1)
    expect(ours.deriveEventMessage(a as any)).toBe(a.data.message)
    expect(ours.deriveEventMessage(assistant(2, []) as any)).toBeNull()
    const t = result(3, 'c')
    expect(ours.deriveEventMessage(t as any)).toBe(t.data.message)
    expect(ours.deriveEventMessage(log(4) as any)).toBeNull()
    expect(ours.deriveEventMessage({ type: 'context/message', seq: 5, time: 0, data: { content: [] } } as any)).toBeNull()
  })
})

describe('PUB 6 foldSurface messages (SPEC 5 unchanged, PUB 6 additions)', () => {
  const cases: [string, Ev[], string | undefined][] = [
    ['not contiguous', [user(1)], 'session event seq 1 is not contiguous; expected 0'],
    ['log-only with surfaceOp', [log(0, 'turn/start', { surfaceOp: 'append' })], 'session event "turn/start" is not surface-eligible and cannot carry surfaceOp'],
    ['log-only with sourceEventSeqs', [log(0, 'x/y', { sourceEventSeqs: [] })], 'session event "x/y" is not surface-eligible and cannot carry sourceEventSeqs'],
    ['context/message is log-only now', [log(0, 'context/message', { surfaceOp: 'append' })], 'session event "context/message" is not surface-eligible and cannot carry surfaceOp'],
    ['eligible without marker', [{ ...user(0), surfaceOp: undefined }], 'session event "user/message" is surface-eligible and requires a surfaceOp marker'],
    ['null surfaceOp', [user(0, { surfaceOp: null })], 'session event "user/message" carries an invalid surfaceOp'],
    ['array surfaceOp', [user(0, { surfaceOp: [] })], 'session event "user/message" carries an invalid surfaceOp'],
    ['string surfaceOp', [user(0, { surfaceOp: 'replace' })], 'session event "user/message" carries an invalid surfaceOp'],
    ['replace extra key', [user(0), user(1, { surfaceOp: { ...replace(0, 0), x: 1 }, sourceEventSeqs: [0] })], 'session event "user/message" carries an invalid replace surfaceOp'],
    ['replace negative', [user(0), user(1, { surfaceOp: replace(-1, 0) })], 'session event "user/message" carries an invalid replace surfaceOp'],
    ['sources not array', [user(0, { sourceEventSeqs: 1 })], 'sourceEventSeqs on event at seq 0 must be an array when present'],
    ['empty sources on user', [user(0, { sourceEventSeqs: [] })], 'sourceEventSeqs must not be empty except on assistant/message'],
    ['empty sources on assistant', [assistant(0, undefined, { sourceEventSeqs: [] })], undefined],
    ['bad element', [log(0), user(1, { sourceEventSeqs: [0, 1.5] })], 'session event "user/message" sourceEventSeqs must densely contain non-negative safe integers'],
    ['element beats late', [log(0), user(1, { sourceEventSeqs: [5, -1] })], 'session event "user/message" sourceEventSeqs must densely contain non-negative safe integers'],
    ['duplicates beat late', [log(0), user(1, { sourceEventSeqs: [7, 0, 0] })], 'sourceEventSeqs must not contain duplicates'],
    ['first late source in array order', [log(0), user(1, { sourceEventSeqs: [0, 9, 1] })], 'sourceEventSeqs must reference earlier events: 9 >= current seq 1'],
    ['start not found', [user(0), user(1, { surfaceOp: replace(5, 0), sourceEventSeqs: [0] })], 'surface replace: start seq 5 not found in surface'],
    ['end not found', [user(0), user(1, { surfaceOp: replace(0, 5), sourceEventSeqs: [0] })], 'surface replace: end seq 5 not found in surface'],
    ['range before sources', [user(0), user(1, { surfaceOp: replace(5, 0), sourceEventSeqs: 'x' })], 'surface replace: start seq 5 not found in surface'],
    ['start after end', [user(0), user(1), user(2, { surfaceOp: replace(1, 0), sourceEventSeqs: [0, 1] })], 'surface replace: start seq 1 (index 1) is after end seq 0 (index 0)'],
    ['coverage', [user(0), user(1), user(2, { surfaceOp: replace(0, 1), sourceEventSeqs: [1] })], 'surface replace: sourceEventSeqs must include every shadowed surface node; missing 0'],
    ['coverage lists all', [user(0), user(1), user(2, { surfaceOp: replace(0, 1) })], 'surface replace: sourceEventSeqs must include every shadowed surface node; missing 0, 1'],
    ['tool/result rewrites two', [result(0, 'c'), result(1, 'd'), result(2, 'c', undefined, { surfaceOp: replace(0, 1), sourceEventSeqs: [0, 1] })], 'tool/result surface replacement must rewrite exactly one current node'],
    ['tool/result over a user node', [user(0), result(1, 'c', undefined, { surfaceOp: replace(0, 0), sourceEventSeqs: [0] })], 'tool/result surface replacement must target a current tool/result'],
    ['tool/result changes content only', [result(0, 'c'), result(1, 'c', [{ type: 'text', text: 'short' }], { surfaceOp: replace(0, 0), sourceEventSeqs: [0] })], undefined],
    ['tool/result changes the id', [result(0, 'c'), { ...result(1, 'c', undefined, { surfaceOp: replace(0, 0), sourceEventSeqs: [0] }), data: { ...result(0, 'c').data, message: { ...result(0, 'c').data.message, id: 'other' } } }], 'tool/result surface replacement may change only content'],
    ['tool/result adds meta', [result(0, 'c'), result(1, 'c', undefined, { surfaceOp: replace(0, 0), sourceEventSeqs: [0] }, { meta: { a: 1 } })], 'tool/result surface replacement may change only content'],
    ['tool/result changes error', [result(0, 'c', undefined, {}, { error: { name: 'E', code: 'A' } }), result(1, 'c', undefined, { surfaceOp: replace(0, 0), sourceEventSeqs: [0] }, { error: { name: 'E', code: 'B' } })], 'tool/result surface replacement may change only content'],
    ['key order ignored', [result(0, 'c', undefined, {}, { meta: { a: 1, b: [1, { c: 2 }] } }), result(1, 'c', undefined, { surfaceOp: replace(0, 0), sourceEventSeqs: [0] }, { meta: { b: [1, { c: 2 }], a: 1 } })], undefined],
    ['user compaction over tool results is unrestricted', [result(0, 'c'), result(1, 'd'), user(2, { surfaceOp: replace(0, 1), sourceEventSeqs: [0, 1] })], undefined],
  ]
  it.each(cases)('PUB 6: %s', (_name, events, message) => {
    expect(msgOf(events)).toBe(message)
    let refMessage: string | undefined
    try { ref.foldSurface(events) } catch (e) { refMessage = (e as Error).message }
    expect(refMessage).toBe(message)
  })

  it('PUB 6: fold result, fresh arrays', () => {
    const events = [user(0), log(1), assistant(2), result(3, 'c'), user(4, { surfaceOp: replace(2, 3), sourceEventSeqs: [2, 3] })]
    const a = foldSurface(events as any)
    expect(a).toEqual({ nodes: [0, 4], replacements: [{ seq: 4, start: 2, end: 3, shadowedSeqs: [2, 3] }] })
    expect(foldSurface(events as any).nodes).not.toBe(a.nodes)
    expect(a).toEqual(ref.foldSurface(events))
  })

  it('PUB 6: malformed tool/result data throws a TypeError during validation', () => {
    const events = [result(0, 'c'), { type: 'tool/result', seq: 1, time: 0, data: { turn: 1 }, surfaceOp: replace(0, 0), sourceEventSeqs: [0] }]
    expect(() => foldSurface(events as any)).toThrow(TypeError)
    expect(() => ref.foldSurface(events)).toThrow(TypeError)
  })
})

describe('PUB 6 SurfaceManager', () => {
  it('PUB 6: lazy getters over a live log; nodes is one live array', () => {
    const events: Ev[] = []
    const m = new SurfaceManager(events as any)
    const nodes = m.nodes
    expect(nodes).toEqual([])
    events.push(user(0), log(1), user(2))
    expect(m.nodes).toBe(nodes)
    expect(nodes).toEqual([0, 2])
    events.push(user(3, { surfaceOp: replace(0, 2), sourceEventSeqs: [0, 2] }))
    expect(m.replaceGeneration).toBe(1)
    expect(nodes).toEqual([3])
  })

  it('PUB 6: getters throw the fold errors, and keep throwing until fixed', () => {
    const events: Ev[] = [user(0), log(1, 'turn/start', { surfaceOp: 'append' })]
    const m = new SurfaceManager(events as any)
    expect(() => m.nodes).toThrow('session event "turn/start" is not surface-eligible and cannot carry surfaceOp')
    expect(() => m.replaceGeneration).toThrow('cannot carry surfaceOp')
    events[1] = log(1)
    expect(m.nodes).toEqual([0])
  })

  it('PUB 6: baseSeq windows; a replace before the window head is not found', () => {
    const window = [user(10), user(11), user(12, { surfaceOp: replace(10, 11), sourceEventSeqs: [10, 11] })]
    const m = new SurfaceManager(window as any, 10)
    expect(m.nodes).toEqual([12])
    expect(m.replaceGeneration).toBe(1)
    const before = new SurfaceManager([user(10, { surfaceOp: replace(3, 3), sourceEventSeqs: [3] })] as any, 10)
    expect(() => before.nodes).toThrow('surface replace: start seq 3 not found in surface')
    const wrongStart = new SurfaceManager([user(0)] as any, 10)
    expect(() => wrongStart.nodes).toThrow('session event seq 0 is not contiguous; expected 10')
  })

  it('PUB 6: tool/result rule in a window reads the window by seq', () => {
    const window = [result(5, 'c'), result(6, 'c', [], { surfaceOp: replace(5, 5), sourceEventSeqs: [5] })]
    expect(new SurfaceManager(window as any, 5).nodes).toEqual([6])
    const bad = [result(5, 'c'), result(6, 'c', [], { surfaceOp: replace(5, 5), sourceEventSeqs: [5] }, { meta: 1 })]
    expect(() => new SurfaceManager(bad as any, 5).nodes).toThrow('tool/result surface replacement may change only content')
  })

  it('PUB 6: validateNext checks without mutating, and its plan is reused for that exact event', () => {
    const events: Ev[] = [user(0)]
    const m = new SurfaceManager(events as any)
    const nodes = m.nodes
    expect(() => m.validateNext(user(2))).toThrow('session event seq 2 is not contiguous; expected 1')
    const next = user(1, { surfaceOp: replace(0, 0), sourceEventSeqs: [0] })
    m.validateNext(next as any)
    expect(nodes).toEqual([0])
    expect(m.replaceGeneration).toBe(0)
    events.push(next)
    // The plan is reused: it was made when node 0 was the target, which it still is.
    expect(m.nodes).toEqual([1])
    expect(m.replaceGeneration).toBe(1)
  })

  it('PUB 6: validateNext plan is reused by identity (a different event at that seq is folded afresh)', () => {
    const events: Ev[] = [user(0)]
    const m = new SurfaceManager(events as any)
    const r = new ref.SurfaceManager(events)
    const candidate = user(1)
    m.validateNext(candidate as any)
    r.validateNext(candidate)
    events.push({ ...candidate, surfaceOp: 'bogus' })
    expect(() => m.nodes).toThrow('session event "user/message" carries an invalid surfaceOp')
    expect(() => r.nodes).toThrow('session event "user/message" carries an invalid surfaceOp')
    // Identity reuse: the same object is not revalidated (a mutation after validateNext is not seen).
    const events2: Ev[] = [user(0)]
    const m2 = new SurfaceManager(events2 as any)
    const r2 = new ref.SurfaceManager(events2)
    const c2 = user(1)
    m2.validateNext(c2 as any)
    r2.validateNext(c2)
    c2.surfaceOp = 'bogus'
    events2.push(c2)
    expect(m2.nodes).toEqual([0, 1])
    expect(r2.nodes).toEqual([0, 1])
  })
})

// ---- differential: random event sequences ----

const TYPES = ['user/message', 'assistant/message', 'tool/result', 'turn/start', 'context/message']
function eventArb(seq: number): fc.Arbitrary<Ev> {
  const seqish = fc.oneof({ weight: 40, arbitrary: fc.integer({ min: Math.max(0, seq - 4), max: Math.max(0, seq) }) },
    { weight: 1, arbitrary: fc.constantFrom(-1, 1.5, '1' as unknown as number, Number.MAX_SAFE_INTEGER + 2) })
  const surfaceOp = fc.oneof(
    { weight: 30, arbitrary: fc.constant('append') },
    { weight: 20, arbitrary: fc.record({ op: fc.constant('replace'), start: seqish, end: seqish }) },
    { weight: 1, arbitrary: fc.constantFrom<unknown>(undefined, null, 'other', [], { op: 'replace', start: 0 }, { op: 'x', start: 0, end: 0 }) },
  )
  const sources = fc.oneof(
    { weight: 4, arbitrary: fc.constant(undefined) },
    { weight: 20, arbitrary: fc.constant(Array.from({ length: seq }, (_, i) => i)) },
    { weight: 4, arbitrary: fc.array(seqish, { maxLength: 5 }) },
    { weight: 1, arbitrary: fc.constantFrom(3, 'x', null) },
  )
  return fc.record({
    type: fc.constantFrom(...TYPES),
    surfaceOp,
    sourceEventSeqs: sources,
    callId: fc.constantFrom('c', 'd'),
    inner: fc.constantFrom('a', 'b'),
    empty: fc.boolean(),
    meta: fc.constantFrom(undefined, 1, { a: [1] }),
    offBy: fc.oneof({ weight: 300, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.constant(1) }),
  }).map(r => {
    let e: Ev
    if (r.type === 'user/message') e = user(seq)
    else if (r.type === 'assistant/message') e = assistant(seq, r.empty ? [] : undefined)
    else if (r.type === 'tool/result') e = result(seq, r.callId, [{ type: 'text', text: r.inner }], {}, r.meta === undefined || r.empty ? {} : { meta: r.meta })
    else e = log(seq, r.type)
    const eligible = TYPES.indexOf(r.type) < 3
    // Log-only events mostly carry no metadata, so the fold goes on.
    if (eligible || r.offBy === 1) e.surfaceOp = r.surfaceOp
    else delete e.surfaceOp
    if (r.sourceEventSeqs !== undefined && (eligible || r.offBy === 1)) e.sourceEventSeqs = r.sourceEventSeqs
    if (e.surfaceOp === undefined) delete e.surfaceOp
    e.seq = seq + r.offBy
    return e
  })
}
const logArb = fc.integer({ min: 0, max: 14 }).chain(n =>
  n === 0 ? fc.constant([] as Ev[]) : fc.tuple(...Array.from({ length: n }, (_, i) => eventArb(i))))

function outcome(run: () => unknown): unknown {
  try { return { ok: JSON.parse(JSON.stringify(run())) } } catch (e) { return { err: (e as Error).message, cls: (e as Error).constructor.name } }
}

describe('PUB 6 differential against 0.1.1-rc.2', () => {
  it('foldSurface: same nodes and replacements, or the same error message', () => {
    let failures = 0
    let replaced = 0
    const messages = new Set<string>()
    fc.assert(fc.property(logArb, events => {
      for (let k = 0; k <= events.length; k++) {
        const prefix = events.slice(0, k)
        const a = outcome(() => foldSurface(prefix as any)) as any
        if ('err' in a) { failures++; messages.add(a.err.replace(/\d+/g, 'N')); break }
        if (a.ok.replacements.length > 0) replaced++
        expect(a).toEqual(outcome(() => ref.foldSurface(prefix)))
      }
      expect(outcome(() => foldSurface(events as any))).toEqual(outcome(() => ref.foldSurface(events)))
    }), {
      numRuns: 3000,
      // Each tool/result rule at least once, whatever the random draw.
      examples: [
        [[result(0, 'c'), result(1, 'd', undefined, { surfaceOp: replace(0, 0), sourceEventSeqs: [0] })]],
        [[result(0, 'c'), result(1, 'c'), result(2, 'c', undefined, { surfaceOp: replace(0, 1), sourceEventSeqs: [0, 1] })]],
        [[user(0), result(1, 'c', undefined, { surfaceOp: replace(0, 0), sourceEventSeqs: [0] })]],
      ],
    })
    expect(failures).toBeGreaterThan(100)
    expect(replaced).toBeGreaterThan(50)
    expect(messages.size).toBeGreaterThan(10)
    for (const m of ['tool/result surface replacement must rewrite exactly one current node',
      'tool/result surface replacement must target a current tool/result',
      'tool/result surface replacement may change only content']) expect(messages).toContain(m)
  })

  it('SurfaceManager over windows, read as the log grows: same nodes and generation, or the same error', () => {
    fc.assert(fc.property(logArb, fc.nat({ max: 6 }), fc.boolean(), (events, cut, useValidate) => {
      const base = Math.min(cut, events.length)
      // A window starts where the surface has nothing before it, so rebase a suffix: seqs shift down by `base`
      // only for the check of windows; here we keep the original seqs and window from `base`.
      const window = events.slice(base)
      const liveA: Ev[] = []
      const liveB: Ev[] = []
      const a = new SurfaceManager(liveA as any, base)
      const b = new ref.SurfaceManager(liveB, base)
      for (const e of window) {
        if (useValidate) {
          expect(outcome(() => { a.validateNext(e as any) })).toEqual(outcome(() => { b.validateNext(e) }))
        }
        liveA.push(e)
        liveB.push(e)
        expect(outcome(() => [[...a.nodes], a.replaceGeneration])).toEqual(outcome(() => [[...b.nodes], b.replaceGeneration]))
      }
    }), { numRuns: 2000 })
  })
})
