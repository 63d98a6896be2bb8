// Property tests: random valid logs replay to the same state; the surface
// fold agrees with a small reference fold written here; random invalid
// operations throw and change nothing.

import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { foldSurface, Session, type SessionEvent } from '../index.js'
import { appendAny, catchError, stateOf, USER } from './spec-helpers.js'

const RUNS = { numRuns: 100 }

// ---------------------------------------------------------------- operations

type Json = null | boolean | number | string | Json[] | { [k: string]: Json }

const word = fc.string({ maxLength: 8 })
const smallJson: fc.Arbitrary<Json> = fc.oneof(
  fc.integer(),
  word,
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.integer(), { maxLength: 3 }),
  fc.dictionary(fc.constantFrom('a', 'b', 'c'), fc.integer(), { maxKeys: 3 }),
)

type Op =
  | { k: 'user'; t: string }
  | { k: 'context'; t: string; kind: string; envelope: 'raw' | 'context' | undefined; meta: Json | undefined }
  | { k: 'steering'; t: string; kind: string }
  | { k: 'assistant'; texts: string[]; calls: number; reasoning: boolean }
  | { k: 'toolResult'; t: string; isError: boolean; withSource: boolean }
  | { k: 'replace'; a: number; b: number; as: number; extra: number[]; t: string }
  | { k: 'header'; model: string; system: string; tools: number }
  | { k: 'log'; type: 'turn/start' | 'step/start' | 'todo/write' | 'plugin/x' | 'prompt/blocked' | 'tool/call'; n: number }

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ k: fc.constant('user' as const), t: word }),
  fc.record({
    k: fc.constant('context' as const),
    t: word,
    kind: fc.constantFrom('plugin', 'cron', 'a"b', 'x\\y', ''),
    envelope: fc.constantFrom('raw' as const, 'context' as const, undefined),
    meta: fc.option(smallJson, { nil: undefined }),
  }),
  fc.record({ k: fc.constant('steering' as const), t: word, kind: fc.constantFrom('user', 'plugin') }),
  fc.record({
    k: fc.constant('assistant' as const),
    texts: fc.array(word, { maxLength: 2 }),
    calls: fc.nat({ max: 2 }),
    reasoning: fc.boolean(),
  }),
  fc.record({ k: fc.constant('toolResult' as const), t: word, isError: fc.boolean(), withSource: fc.boolean() }),
  fc.record({
    k: fc.constant('replace' as const),
    a: fc.nat(),
    b: fc.nat(),
    as: fc.nat({ max: 4 }),
    extra: fc.array(fc.nat(), { maxLength: 3 }),
    t: word,
  }),
  fc.record({ k: fc.constant('header' as const), model: fc.constantFrom('m1', 'm2'), system: fc.constantFrom('', 'S'), tools: fc.nat({ max: 2 }) }),
  fc.record({
    k: fc.constant('log' as const),
    type: fc.constantFrom('turn/start' as const, 'step/start' as const, 'todo/write' as const, 'plugin/x' as const, 'prompt/blocked' as const, 'tool/call' as const),
    n: fc.nat({ max: 9 }),
  }),
)

const SURFACE_TYPES = ['user/message', 'assistant/message', 'tool/result', 'context/message', 'steering/message'] as const
const PROV = { provider: 'p', model: 'm' }
const txt = (t: string) => [{ type: 'text', text: t }]

function surfaceData(type: (typeof SURFACE_TYPES)[number], t: string): unknown {
  switch (type) {
    case 'user/message':
      return { content: txt(t), source: USER }
    case 'assistant/message':
      return { turn: 1, step: 1, content: txt(t), provenance: PROV }
    case 'tool/result':
      return { turn: 1, step: 1, callId: `c-${t}`, content: txt(t), isError: false }
    case 'context/message':
      return { content: txt(t), source: { kind: 'compaction' } }
    case 'steering/message':
      return { turn: 1, content: txt(t), source: USER }
  }
}

/** Apply one valid operation to `s`. */
function apply(s: Session, op: Op): void {
  switch (op.k) {
    case 'user':
      s.append('user/message', { content: txt(op.t) as never, source: USER }, { surfaceOp: 'append' })
      return
    case 'context':
      s.append(
        'context/message',
        {
          content: txt(op.t) as never,
          source: { kind: op.kind },
          ...(op.envelope ? { envelope: op.envelope } : {}),
          ...(op.meta !== undefined ? { meta: op.meta } : {}),
        },
        { surfaceOp: 'append' },
      )
      return
    case 'steering':
      s.append('steering/message', { turn: 1, content: txt(op.t) as never, source: { kind: op.kind } }, { surfaceOp: 'append' })
      return
    case 'assistant': {
      const content = [
        ...(op.reasoning ? [{ type: 'reasoning', text: 'hmm' }] : []),
        ...op.texts.map((t) => ({ type: 'text', text: t })),
        ...Array.from({ length: op.calls }, (_, k) => ({ type: 'tool-call', id: `call-${s.seq}-${k}`, name: 'read', arguments: '{}' })),
      ]
      s.append('assistant/message', { turn: 1, step: 1, content: content as never, provenance: PROV, usage: { inputTokens: 1 } }, {
        surfaceOp: 'append',
        sourceEventSeqs: [],
      })
      return
    }
    case 'toolResult':
      s.append(
        'tool/result',
        { turn: 1, step: 1, callId: `call-${s.seq - 1}-0`, content: txt(op.t) as never, isError: op.isError },
        op.withSource && s.seq > 0 ? { surfaceOp: 'append', sourceEventSeqs: [s.seq - 1] } : { surfaceOp: 'append' },
      )
      return
    case 'replace': {
      const nodes = s.surface.nodes
      if (nodes.length === 0) {
        s.append('user/message', { content: txt(op.t) as never, source: USER }, { surfaceOp: 'append' })
        return
      }
      const i = op.a % nodes.length
      const j = i + (op.b % (nodes.length - i))
      const shadowed = nodes.slice(i, j + 1)
      const sources = [...new Set([...shadowed, ...op.extra.map((x) => x % s.seq)])]
      const type = SURFACE_TYPES[op.as]
      appendAny(s, type, surfaceData(type, op.t), {
        surfaceOp: { op: 'replace', start: nodes[i], end: nodes[j] },
        sourceEventSeqs: sources,
      })
      return
    }
    case 'header':
      s.append(
        'request/header',
        {
          header: {
            config: { provider: 'p', model: op.model },
            system: op.system,
            tools: Array.from({ length: op.tools }, (_, k) => ({ name: `t${k}` })),
          },
          reason: 'change',
        },
      )
      return
    case 'log': {
      const data: Record<string, unknown> = {
        'turn/start': { turn: op.n, trigger: { kind: 'message', source: USER } },
        'step/start': { turn: 1, step: op.n },
        'todo/write': { todos: [{ content: `t${op.n}`, status: 'pending' }] },
        'plugin/x': { n: op.n },
        'prompt/blocked': { content: txt('no'), source: USER, reason: 'policy' },
        'tool/call': { turn: 1, step: 1, callId: `call-${s.seq - 1}-0`, name: 'read', arguments: '{}' },
      }
      appendAny(s, op.type, data[op.type])
      return
    }
  }
}

function build(ops: Op[], id = 'prop'): Session {
  const s = new Session(id)
  for (const op of ops) apply(s, op)
  return s
}

// ---------------------------------------------------------------- reference model

interface RefReplacement {
  seq: number
  start: number
  end: number
  shadowedSeqs: number[]
}

/** SPEC 5, the simplest way: a pure fold over the whole log. */
function referenceFold(events: readonly SessionEvent[]): { nodes: number[]; replacements: RefReplacement[] } {
  const nodes: number[] = []
  const replacements: RefReplacement[] = []
  for (const e of events as readonly (SessionEvent & { surfaceOp?: unknown })[]) {
    const op = e.surfaceOp as undefined | 'append' | { op: 'replace'; start: number; end: number }
    if (op === undefined) continue
    if (op === 'append') {
      nodes.push(e.seq)
      continue
    }
    const i = nodes.indexOf(op.start)
    const j = nodes.indexOf(op.end)
    const shadowedSeqs = nodes.splice(i, j - i + 1, e.seq)
    replacements.push({ seq: e.seq, start: op.start, end: op.end, shadowedSeqs })
  }
  return { nodes, replacements }
}

type Block = Record<string, unknown>

/** SPEC 6, written out. */
function referenceMessage(e: SessionEvent): unknown {
  const d = e.data as Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any
  const wrap = (tag: string) => [
    { type: 'text', text: `<${tag} source=${JSON.stringify(d.source.kind)}>` },
    ...(d.content as Block[]),
    { type: 'text', text: `</${tag}>` },
  ]
  switch (e.type) {
    case 'user/message':
      return { role: 'user', content: d.content }
    case 'assistant/message':
      return d.content.length === 0 ? null : { role: 'assistant', content: d.content, provenance: d.provenance }
    case 'tool/result':
      return { role: 'user', content: [{ type: 'tool-result', toolCallId: d.callId, content: d.content, isError: d.isError }] }
    case 'context/message':
      return { role: 'user', content: d.envelope === 'raw' ? d.content : wrap('context') }
    case 'steering/message':
      return { role: 'user', content: wrap('steering') }
    default:
      return null
  }
}

function referenceMessages(events: readonly SessionEvent[]): unknown[] {
  return referenceFold(events)
    .nodes.map((seq) => referenceMessage(events[seq]))
    .filter((m) => m !== null)
}

function referenceHeader(events: readonly SessionEvent[]): unknown {
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i]
    if (e.type !== 'request/header') continue
    const h = { ...(e.data as unknown as { header: Record<string, unknown> }).header }
    for (const k of ['system', 'tools', 'messagePrefix']) {
      const v = h[k]
      if (v === '' || (Array.isArray(v) && v.length === 0)) delete h[k]
    }
    return h
  }
  return undefined
}

// ---------------------------------------------------------------- properties

describe('property: replay', () => {
  it('seeding the events and parsing toJsonl() give the live state', () => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 40 }), (ops) => {
        const s = build(ops)
        const live = stateOf(s)
        const seeded = new Session(s.id, s.events, s.header)
        expect(stateOf(seeded)).toEqual(live)
        const parsed = Session.fromJsonl(s.toJsonl())
        expect(stateOf(parsed)).toEqual(live)
        expect(foldSurface(s.events).nodes).toEqual(live.nodes)
      }),
      RUNS,
    )
  })

  it('live derivation between appends matches a seeded copy at every prefix', () => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 25 }), (ops) => {
        const s = new Session('prop')
        for (const op of ops) {
          apply(s, op)
          const copy = new Session('copy', s.events)
          expect(s.deriveMessages()).toEqual(copy.deriveMessages())
          expect(s.surface.nodes).toEqual(copy.surface.nodes)
        }
      }),
      { numRuns: 50 },
    )
  })
})

/** The observable state without append times (two sessions appending the same ops differ only there). */
function timeless(s: Session) {
  const state = stateOf(s)
  for (const e of state.events) delete e.time
  // the header line names the session: compare the event lines only
  state.jsonl = state.jsonl.slice(state.jsonl.indexOf('\n') + 1).replace(/"time":\d+/g, '"time":0')
  delete state.id
  delete state.header
  return state
}

describe('property: replay then continue', () => {
  it('a seeded or parsed copy continued with the same operations stays equal to the original', () => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 25 }), fc.array(opArb, { maxLength: 15 }), (before, after) => {
        const s = build(before)
        const seeded = new Session('seeded', s.events)
        const parsed = Session.fromJsonl(s.toJsonl())
        // read nothing from the copies before continuing them
        for (const op of after) {
          apply(s, op)
          apply(seeded, op)
          apply(parsed, op)
        }
        const expected = timeless(s)
        expect(timeless(seeded)).toEqual(expected)
        expect(timeless(parsed)).toEqual(expected)
        expect(parsed.events.slice(0, before.length)).toEqual(s.events.slice(0, before.length))
      }),
      RUNS,
    )
  })
})

describe('property: surface fold and derivation against a reference model', () => {
  it('nodes, replacements, messages and header match the reference', () => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 40 }), (ops) => {
        const s = build(ops)
        const ref = referenceFold(s.events)
        expect(s.surface.nodes).toEqual(ref.nodes)
        expect(s.surface.replaceGeneration).toBe(ref.replacements.length)
        expect(foldSurface(s.events)).toEqual(ref)
        expect(s.deriveMessages()).toEqual(referenceMessages(s.events))
        expect(s.requestHeader()).toEqual(referenceHeader(s.events))
      }),
      RUNS,
    )
  })

  it('a replace over any range of the surface splices exactly that range', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 12 }), fc.nat(), fc.nat(), fc.constantFrom(...SURFACE_TYPES), (n, a, b, type) => {
        const s = new Session('r')
        for (let k = 0; k < n; k++) s.append('user/message', { content: txt(`u${k}`) as never, source: USER }, { surfaceOp: 'append' })
        const i = a % n
        const j = i + (b % (n - i))
        const nodes = [...s.surface.nodes]
        const e = appendAny(s, type, surfaceData(type, 'r'), {
          surfaceOp: { op: 'replace', start: nodes[i], end: nodes[j] },
          sourceEventSeqs: nodes.slice(i, j + 1),
        })
        expect(s.surface.nodes).toEqual([...nodes.slice(0, i), e.seq, ...nodes.slice(j + 1)])
        expect(foldSurface(s.events).replacements).toEqual([
          { seq: e.seq, start: nodes[i], end: nodes[j], shadowedSeqs: nodes.slice(i, j + 1) },
        ])
        expect(s.deriveMessages()).toEqual(referenceMessages(s.events))
      }),
      RUNS,
    )
  })
})

// ---------------------------------------------------------------- invalid operations

type Bad =
  | { k: 'badSurfaceOp'; v: number }
  | { k: 'opOnLogOnly'; type: string; which: 'surfaceOp' | 'sourceEventSeqs' }
  | { k: 'missingOp'; as: number }
  | { k: 'unknownStart'; off: number; a: number }
  | { k: 'unknownEnd'; off: number; a: number }
  | { k: 'reversed'; a: number; b: number }
  | { k: 'missingCoverage'; a: number; b: number; drop: number }
  | { k: 'future'; off: number }
  | { k: 'duplicate'; a: number }
  | { k: 'emptySources'; as: number }
  | { k: 'notArray'; v: number }
  | { k: 'nonLossless'; v: number; meta: boolean }
  | { k: 'legacy'; delta: boolean }

const badArb: fc.Arbitrary<Bad> = fc.oneof(
  fc.record({ k: fc.constant('badSurfaceOp' as const), v: fc.nat({ max: 7 }) }),
  fc.record({
    k: fc.constant('opOnLogOnly' as const),
    type: fc.constantFrom('turn/start', 'step/end', 'tool/call', 'request/header', 'plugin/x'),
    which: fc.constantFrom('surfaceOp' as const, 'sourceEventSeqs' as const),
  }),
  fc.record({ k: fc.constant('missingOp' as const), as: fc.nat({ max: 4 }) }),
  fc.record({ k: fc.constant('unknownStart' as const), off: fc.nat({ max: 5 }), a: fc.nat() }),
  fc.record({ k: fc.constant('unknownEnd' as const), off: fc.nat({ max: 5 }), a: fc.nat() }),
  fc.record({ k: fc.constant('reversed' as const), a: fc.nat(), b: fc.nat() }),
  fc.record({ k: fc.constant('missingCoverage' as const), a: fc.nat(), b: fc.nat(), drop: fc.nat() }),
  fc.record({ k: fc.constant('future' as const), off: fc.nat({ max: 5 }) }),
  fc.record({ k: fc.constant('duplicate' as const), a: fc.nat() }),
  fc.record({ k: fc.constant('emptySources' as const), as: fc.nat({ max: 3 }) }),
  fc.record({ k: fc.constant('notArray' as const), v: fc.nat({ max: 2 }) }),
  fc.record({ k: fc.constant('nonLossless' as const), v: fc.nat({ max: 5 }), meta: fc.boolean() }),
  fc.record({ k: fc.constant('legacy' as const), delta: fc.boolean() }),
)

const BAD_SURFACE_OPS: [unknown, 'invalid' | 'replace'][] = [
  ['prepend', 'invalid'],
  [7, 'invalid'],
  [true, 'invalid'],
  ['', 'invalid'],
  [{ op: 'replace', start: 0 }, 'replace'],
  [{ op: 'splice', start: 0, end: 0 }, 'replace'],
  [{ op: 'replace', start: -1, end: 0 }, 'replace'],
  [{ op: 'replace', start: 0, end: 0, x: 1 }, 'replace'],
]

const NON_LOSSLESS: (() => unknown)[] = [
  () => NaN,
  () => undefined,
  () => new Map(),
  () => 2n,
  () => {
    const o: Record<string, unknown> = {}
    o.o = o
    return o
  },
  () => -0,
]

/** An invalid operation on `s` and the exact message it must fail with; null when the state cannot host it. */
function invalid(s: Session, bad: Bad): { act: () => unknown; message: string } | null {
  const nodes = [...s.surface.nodes]
  const n = nodes.length
  const seq = s.seq
  const user = { content: txt('bad'), source: USER }
  const replace = (start: number, end: number, sources?: number[]) => () =>
    s.append('context/message', user as never, {
      surfaceOp: { op: 'replace', start, end },
      ...(sources ? { sourceEventSeqs: sources } : {}),
    })
  const notOnSurface = (off: number, a: number) => {
    const candidates = [...Array(seq).keys()].filter((x) => !nodes.includes(x))
    return candidates.length > 0 && off % 2 === 0 ? candidates[a % candidates.length] : seq + off
  }
  switch (bad.k) {
    case 'badSurfaceOp': {
      const [v, kind] = BAD_SURFACE_OPS[bad.v]
      return {
        act: () => appendAny(s, 'user/message', user, { surfaceOp: v }),
        message: `session event "user/message" carries an ${kind === 'invalid' ? 'invalid surfaceOp' : 'invalid replace surfaceOp'}`,
      }
    }
    case 'opOnLogOnly':
      return {
        act: () => appendAny(s, bad.type, { turn: 1 }, bad.which === 'surfaceOp' ? { surfaceOp: 'append' } : { sourceEventSeqs: [0] }),
        message: `session event "${bad.type}" is not surface-eligible and cannot carry ${bad.which}`,
      }
    case 'missingOp': {
      const type = SURFACE_TYPES[bad.as]
      return {
        act: () => appendAny(s, type, surfaceData(type, 'x')),
        message: `session event "${type}" is surface-eligible and requires a surfaceOp marker`,
      }
    }
    case 'unknownStart': {
      if (n === 0) return null
      const start = notOnSurface(bad.off, bad.a)
      const end = nodes[bad.a % n]
      return { act: replace(start, end, nodes.slice()), message: `surface replace: start seq ${start} not found in surface` }
    }
    case 'unknownEnd': {
      if (n === 0) return null
      const start = nodes[bad.a % n]
      const end = notOnSurface(bad.off, bad.a)
      return { act: replace(start, end, nodes.slice()), message: `surface replace: end seq ${end} not found in surface` }
    }
    case 'reversed': {
      if (n < 2) return null
      const i = bad.a % (n - 1)
      const j = i + 1 + (bad.b % (n - 1 - i))
      return {
        act: replace(nodes[j], nodes[i], nodes.slice(i, j + 1)),
        message: `surface replace: start seq ${nodes[j]} (index ${j}) is after end seq ${nodes[i]} (index ${i})`,
      }
    }
    case 'missingCoverage': {
      if (n === 0) return null
      const i = bad.a % n
      const j = i + (bad.b % (n - i))
      const shadowed = nodes.slice(i, j + 1)
      const dropped = shadowed[bad.drop % shadowed.length]
      const sources = shadowed.filter((x) => x !== dropped)
      return {
        act: replace(nodes[i], nodes[j], sources.length > 0 ? sources : undefined),
        message: `surface replace: sourceEventSeqs must include every shadowed surface node; missing ${sources.length > 0 ? dropped : shadowed.join(', ')}`,
      }
    }
    case 'future': {
      const future = seq + bad.off
      return {
        act: () => s.append('user/message', user as never, { surfaceOp: 'append', sourceEventSeqs: [future] }),
        message: `sourceEventSeqs must reference earlier events: ${future} >= current seq ${seq}`,
      }
    }
    case 'duplicate': {
      if (seq === 0) return null
      const x = bad.a % seq
      return {
        act: () => s.append('user/message', user as never, { surfaceOp: 'append', sourceEventSeqs: [x, x] }),
        message: 'sourceEventSeqs must not contain duplicates',
      }
    }
    case 'emptySources': {
      const type = (['user/message', 'tool/result', 'context/message', 'steering/message'] as const)[bad.as]
      return {
        act: () => appendAny(s, type, surfaceData(type, 'x'), { surfaceOp: 'append', sourceEventSeqs: [] }),
        message: 'sourceEventSeqs must not be empty except on assistant/message',
      }
    }
    case 'notArray':
      return {
        act: () => appendAny(s, 'user/message', user, { surfaceOp: 'append', sourceEventSeqs: [1, '1', { 0: 0 }][bad.v] }),
        message: `sourceEventSeqs on event at seq ${seq} must be an array when present`,
      }
    case 'nonLossless': {
      const v = NON_LOSSLESS[bad.v]()
      return bad.meta
        ? {
            act: () => appendAny(s, 'user/message', user, { surfaceOp: 'append', sourceEventSeqs: [v] }),
            message: 'session event "user/message" carries non-JSON-serializable surface metadata',
          }
        : {
            act: () => appendAny(s, 'user/message', { ...user, extra: v }, { surfaceOp: 'append' }),
            message: 'session event "user/message" carries non-JSON-serializable data',
          }
    }
    case 'legacy':
      return bad.delta
        ? {
            act: () => appendAny(s, 'request/header-delta', { set: { system: 'x' } }),
            message: 'session event "request/header-delta" uses unsupported legacy request/header-delta format',
          }
        : {
            act: () => appendAny(s, 'request/header', { header: { config: PROV }, reason: 'fallback' }),
            message: 'session event "request/header" uses unsupported legacy request/header reason "fallback"',
          }
  }
}

describe('property: invalid operations', () => {
  it('throw the exact message and leave events, nodes, generation and messages unchanged', () => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 25 }), fc.array(badArb, { minLength: 1, maxLength: 4 }), (ops, bads) => {
        const s = build(ops)
        for (const bad of bads) {
          const attempt = invalid(s, bad)
          if (attempt === null) continue
          const before = stateOf(s)
          const events = s.events
          const nodes = s.surface.nodes
          const messages = s.deriveMessages()
          const error = catchError(attempt.act)
          expect(error.message).toBe(attempt.message)
          expect(typeof error.code).toBe('string')
          expect(s.events).toBe(events)
          expect(s.surface.nodes).toBe(nodes)
          expect(stateOf(s)).toEqual(before)
          s.deriveMessages().forEach((m, i) => expect(m).toBe(messages[i]))
        }
        // the session still works afterwards
        const e = s.append('user/message', { content: txt('after') as never, source: USER }, { surfaceOp: 'append' })
        expect(e.seq).toBe(ops.length)
        expect(s.surface.nodes.at(-1)).toBe(e.seq)
      }),
      RUNS,
    )
  })
})
