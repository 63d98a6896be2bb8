// The state the Session keeps in JS (frozen events, the surface view, the
// derived messages, the request header) is a view or cache of one owner (see
// lib/core/session.js). These tests hold the views to their owner: after any
// mix of appends, rejected appends and reads, in any order, the session
// equals a fresh seed of its own log; and what it derives shares the frozen
// values of the events it handed out (SPEC 6; the reference does the same).

import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { deriveEventMessage, Session, type SessionEvent } from '../index.js'
import { appendAny, catchError, expectEqualsFreshCopies, observe, replaceSomeNodes, USER } from './spec-helpers.js'

const PROV = { provider: 'p', model: 'm' }
const txt = (t: string) => [{ type: 'text', text: t }]

type Step =
  | { k: 'user'; t: string }
  | { k: 'assistant'; t: string; calls: number; empty: boolean }
  | { k: 'result'; t: string }
  | { k: 'chunk'; t: string }
  | { k: 'context'; t: string; raw: boolean }
  | { k: 'header'; model: string; system: string }
  | { k: 'replace'; a: number; b: number }
  | { k: 'bad'; which: number }
  | { k: 'read'; which: number }

const word = fc.string({ maxLength: 6 })
const stepArb: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ k: fc.constant('user' as const), t: word }),
  fc.record({ k: fc.constant('assistant' as const), t: word, calls: fc.nat({ max: 2 }), empty: fc.boolean() }),
  fc.record({ k: fc.constant('result' as const), t: word }),
  fc.record({ k: fc.constant('chunk' as const), t: word }),
  fc.record({ k: fc.constant('context' as const), t: word, raw: fc.boolean() }),
  fc.record({ k: fc.constant('header' as const), model: fc.constantFrom('m1', 'm2'), system: fc.constantFrom('', 'S') }),
  fc.record({ k: fc.constant('replace' as const), a: fc.nat(), b: fc.nat() }),
  fc.record({ k: fc.constant('bad' as const), which: fc.nat({ max: 5 }) }),
  fc.record({ k: fc.constant('read' as const), which: fc.nat({ max: 4 }) }),
)

/** Apply one step; a `bad` step must throw and a `read` step reads a view. */
function apply(s: Session, step: Step): void {
  switch (step.k) {
    case 'user':
      s.append('user/message', { content: txt(step.t) as never, source: USER }, { surfaceOp: 'append' })
      return
    case 'assistant': {
      const content = step.empty
        ? []
        : [...txt(step.t), ...Array.from({ length: step.calls }, (_, i) => ({ type: 'tool-call', id: `c${s.seq}-${i}`, name: 'r', arguments: '{}' }))]
      s.append('assistant/message', { turn: 1, step: 1, content: content as never, provenance: PROV }, { surfaceOp: 'append', sourceEventSeqs: [] })
      return
    }
    case 'result':
      s.append('tool/result', { turn: 1, step: 1, callId: 'c', content: txt(step.t) as never, isError: false }, { surfaceOp: 'append' })
      return
    case 'chunk':
      s.append('assistant/chunk', { turn: 1, step: 1, chunk: { type: 'text-delta', text: step.t } })
      return
    case 'context':
      s.append(
        'context/message',
        { content: txt(step.t) as never, source: { kind: 'plugin' }, ...(step.raw ? { envelope: 'raw' as const } : {}) },
        { surfaceOp: 'append' },
      )
      return
    case 'header':
      s.append('request/header', { header: { config: { provider: 'p', model: step.model }, system: step.system }, reason: 'change' })
      return
    case 'replace':
      replaceSomeNodes(s, step.a, step.b)
      return
    case 'bad': {
      const seq = s.seq
      const attempts: (() => unknown)[] = [
        () => appendAny(s, 'user/message', { content: txt('x'), source: USER }, { surfaceOp: { op: 'replace', start: seq + 5, end: seq + 5 }, sourceEventSeqs: [0] }),
        () => appendAny(s, 'assistant/chunk', { chunk: 1 }, { surfaceOp: 'append' }),
        () => appendAny(s, 'tool/result', { content: [] }),
        () => appendAny(s, 'request/header-delta', { delta: 1 }),
        () => appendAny(s, 'user/message', { content: [NaN], source: USER }, { surfaceOp: 'append' }),
        () => appendAny(s, 'request/header', { header: { config: PROV }, reason: 'fallback' }),
      ]
      const error = catchError(attempts[step.which])
      expect(typeof (error as { code?: unknown }).code).toBe('string')
      expect(s.seq).toBe(seq)
      return
    }
    case 'read':
      if (step.which === 0) s.deriveMessages()
      else if (step.which === 1) s.requestHeader()
      else if (step.which === 2) void s.events
      else if (step.which === 3) s.toJsonl()
      else void s.surface.nodes.length
  }
}


describe('one owner: the views equal a fresh seed of the log', () => {
  it('after any mix of appends, rejected appends and reads (live session)', () => {
    fc.assert(
      fc.property(fc.array(stepArb, { maxLength: 60 }), (steps) => {
        const s = new Session('live')
        for (const step of steps) apply(s, step)
        expectEqualsFreshCopies(s)
      }),
      { numRuns: 150 },
    )
  })

  it('after the same on a seeded and on a parsed session, continued', () => {
    fc.assert(
      fc.property(fc.array(stepArb, { maxLength: 30 }), fc.array(stepArb, { maxLength: 30 }), (before, after) => {
        const origin = new Session('origin')
        for (const step of before) apply(origin, step)
        for (const s of [new Session('seeded', origin.events), Session.fromJsonl(origin.toJsonl())]) {
          for (const step of after) apply(s, step)
          expectEqualsFreshCopies(s)
        }
      }),
      { numRuns: 100 },
    )
  })

  it('a long seed (checked on a helper thread, in slices) equals the same log seeded event by event', () => {
    const events: SessionEvent[] = []
    const seedOf = new Session('long')
    seedOf.append('turn/start', { turn: 1, trigger: { kind: 'message', source: USER } })
    for (let i = 0; i < 5000; i++) {
      if (i % 7 === 0) seedOf.append('user/message', { content: txt(`u${i}`) as never, source: USER }, { surfaceOp: 'append' })
      else seedOf.append('assistant/chunk', { turn: 1, step: 1, chunk: { type: 'text-delta', text: `c${i}` } })
    }
    events.push(...seedOf.events)
    const seeded = new Session('long-seeded', events)
    expect(observe(seeded)).toEqual(observe(seedOf))
    // A defect in a late slice is found there, with its index; nothing is constructed.
    const broken = events.map((e) => ({ ...e }))
    broken[4321] = { ...broken[4321], seq: 7 }
    expect(catchError(() => new Session('broken', broken)).message).toBe(
      'seed event at index 4321 has seq 7 (expected 4321); seed must be contiguous from 0',
    )
    const lossy = events.map((e) => ({ ...e }))
    lossy[4500] = { ...lossy[4500], data: { x: NaN } as never }
    lossy[3000] = { ...lossy[3000], seq: 1 }
    // the earlier event's error wins, though it is in an earlier slice than the lossy one
    expect(catchError(() => new Session('lossy', lossy)).message).toMatch(/^seed event at index 3000 has seq 1/)
    // A getter that throws in a later slice while the helper still checks an
    // earlier one: the earlier event's error still wins; without one, the
    // getter's error propagates.
    const throwing = events.map((e) => ({ ...e }))
    Object.defineProperty(throwing[4000], 'data', { enumerable: true, get: () => { throw new Error('getter failed') } })
    expect(catchError(() => new Session('getter', throwing)).message).toBe('getter failed')
    throwing[10] = { ...throwing[10], seq: 3 }
    expect(catchError(() => new Session('getter-late', throwing)).message).toMatch(/^seed event at index 10 has seq 3/)
  })
})

describe('derived values share the frozen values of the events', () => {
  function agent(s: Session) {
    s.append('turn/start', { turn: 1, trigger: { kind: 'message', source: USER } })
    const user = s.append('user/message', { content: txt('hi') as never, source: USER }, { surfaceOp: 'append' })
    const reply = s.append(
      'assistant/message',
      { turn: 1, step: 1, content: [...txt('ok'), { type: 'tool-call', id: 'c1', name: 'r', arguments: '{}' }] as never, provenance: PROV },
      { surfaceOp: 'append', sourceEventSeqs: [] },
    )
    const result = s.append('tool/result', { turn: 1, step: 1, callId: 'c1', content: txt('done') as never, isError: false }, { surfaceOp: 'append' })
    const header = s.append('request/header', { header: { config: PROV, system: 'S', tools: [] }, reason: 'initial' })
    return { user, reply, result, header }
  }

  it('deriveEventMessage of an event the session handed out reuses its content and provenance', () => {
    const s = new Session('id')
    const { user, reply, result } = agent(s)
    expect(deriveEventMessage(user)!.content).toBe(user.data.content)
    expect(s.deriveEventMessage(user)!.content).toBe(user.data.content)
    const m = deriveEventMessage(reply) as { content: unknown; provenance: unknown }
    expect(m.content).toBe(reply.data.content)
    expect(m.provenance).toBe(reply.data.provenance)
    const r = deriveEventMessage(result) as unknown as { content: [{ content: unknown }] }
    expect(r.content[0].content).toBe(result.data.content)
    expect(Object.isFrozen(r) && Object.isFrozen(r.content) && Object.isFrozen(r.content[0])).toBe(true)
  })

  it('deriveEventMessage of a mutable event copies it, so the message never aliases it', () => {
    const event = { type: 'user/message', seq: 0, time: 1, data: { content: txt('a'), source: USER }, surfaceOp: 'append' }
    const m = deriveEventMessage(event as never)!
    expect(m.content).toEqual(event.data.content)
    expect(m.content).not.toBe(event.data.content)
    event.data.content[0].text = 'changed'
    expect(m.content).toEqual(txt('a'))
    expect(Object.isFrozen(event.data.content)).toBe(false)
  })

  it('deriveMessages shares content with the events, in a live, seeded and parsed session', () => {
    const live = new Session('live')
    const { user, reply } = agent(live)
    const messages = live.deriveMessages()
    expect(messages[0].content).toBe(user.data.content)
    expect(messages[1].content).toBe(reply.data.content)
    expect(live.deriveMessages()[0]).toBe(messages[0])
    expect(live.deriveMessages()).not.toBe(messages)
    for (const copy of [new Session('seeded', live.events), Session.fromJsonl(live.toJsonl())]) {
      const derived = copy.deriveMessages()
      const events = copy.events as readonly { data: { content?: unknown } }[]
      expect(derived[0].content).toBe(events[1].data.content)
      expect(derived[1].content).toBe(events[2].data.content)
      expect(derived[1].content).not.toBe(reply.data.content)
    }
    const parsed = Session.fromJsonl(live.toJsonl())
    const events = parsed.events as readonly { data: { content?: unknown } }[] // read first: the derive then uses these objects
    expect(parsed.deriveMessages()[0].content).toBe(events[1].data.content)
  })

  it('requestHeader is one frozen object until a header event, sharing the payload values', () => {
    const s = new Session('h')
    const { header } = agent(s)
    const h = s.requestHeader()!
    expect(h).toBe(s.requestHeader())
    expect(h).toEqual({ config: PROV, system: 'S' })
    expect(h.config).toBe((header.data as { header: { config: unknown } }).header.config)
    expect(Object.isFrozen(h)).toBe(true)
    s.append('assistant/chunk', { turn: 1, step: 1, chunk: { type: 'text-delta' } as never })
    expect(s.requestHeader()).toBe(h)
    s.append('request/header', { header: { config: { provider: 'p', model: 'm2' } }, reason: 'change' })
    expect(s.requestHeader()).not.toBe(h)
    expect(s.requestHeader()).toEqual({ config: { provider: 'p', model: 'm2' } })
  })
})

describe('lone surrogates in the values the header fold and derivation read (issue 10)', () => {
  it('the live header and messages keep them, and a reload, a seed and a store give the same', async () => {
    const s = new Session('surrogates')
    s.append('turn/start', { turn: 1, trigger: { kind: 'message', source: USER } })
    s.append('request/header', { header: { config: { provider: 'p', model: 'm\ud800' } }, reason: 'initial' })
    s.append('assistant/message', { turn: 1, step: 1, content: txt('x') as never, provenance: { provider: 'p\udc00', model: 'm' } }, {
      surfaceOp: 'append',
      sourceEventSeqs: [],
    })
    s.append('context/message', { content: txt('c') as never, source: { kind: 'k\ud800' } }, { surfaceOp: 'append' })
    expect(s.requestHeader()).toEqual({ config: { provider: 'p', model: 'm\ud800' } })
    const messages = s.deriveMessages()
    expect(messages).toHaveLength(2)
    expect((messages[0] as { provenance: unknown }).provenance).toEqual({ provider: 'p\udc00', model: 'm' })
    expect(messages[1].content[0]).toEqual({ type: 'text', text: '<context source="k\\ud800">' })
    expectEqualsFreshCopies(s)
  })
})

describe('crash repair reads what the scanner reads (issue 10: one reader)', () => {
  it('closes a pending tool call whose id holds a lone surrogate', async () => {
    const { JsonlSessionStore } = await import('../index.js')
    const fs = await import('node:fs')
    const os = await import('node:os')
    const path = await import('node:path')
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'dsh-repair-surrogate-'))
    const store = new JsonlSessionStore({ root })
    try {
      await store.create({ version: 0, id: 'r' as never, createdAt: 1 })
      await store.append('r' as never, [
        { type: 'turn/start', seq: 0, time: 1, data: { turn: 1, trigger: { kind: 'message', source: USER } } },
        {
          type: 'assistant/message', seq: 1, time: 2,
          data: { turn: 1, step: 1, content: [{ type: 'tool-call', id: 'c\ud800', name: 'n', arguments: '{}' }], provenance: PROV },
          surfaceOp: 'append', sourceEventSeqs: [],
        },
        { type: 'tool/call', seq: 2, time: 3, data: { turn: 1, step: 1, callId: 'c\ud800', name: 'n', arguments: '{}' } },
      ] as never)
      const { events } = await store.load('r' as never)
      expect(events.map((e) => e.type)).toEqual(['turn/start', 'assistant/message', 'tool/call', 'tool/result', 'turn/end'])
      expect(events[3]).toMatchObject({ data: { callId: 'c\ud800', isError: true }, sourceEventSeqs: [2] })
    } finally {
      await store.close()
    }
  })
})
