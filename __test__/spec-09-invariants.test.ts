// SPEC 9: the development checks, through checkSessionInvariants and through
// the opt-in Session mode ({ invariants: true }), over every case of
// fixtures/invariants.json.

import * as fs from 'node:fs'
import * as path from 'node:path'
import { describe, expect, it } from 'vitest'
import { checkSessionInvariants, Session, type SessionEvent } from '../index.js'
import { appendAny, ev, FIXTURES, newSession, text, USER } from './spec-helpers.js'

type Case = { name: string; events: SessionEvent[] | null; error: string | null }

const CASES = JSON.parse(fs.readFileSync(path.join(FIXTURES, 'invariants.json'), 'utf8')) as Case[]

function eventsOf(c: Case): SessionEvent[] {
  if (c.events !== null) return c.events
  const lines = fs.readFileSync(path.join(FIXTURES, 'logs', `${c.name}.jsonl`), 'utf8').split('\n').filter(Boolean)
  return lines.slice(1).map((l) => JSON.parse(l) as SessionEvent)
}

/** The error `fn` throws, as `{ code, message }`, or null. */
function thrown(fn: () => unknown): { code: unknown; message: string } | null {
  try {
    fn()
    return null
  } catch (error) {
    const e = error as { code?: unknown; message: string }
    return { code: e.code, message: e.message }
  }
}

/** The surface intent of a logged event, for replaying it through append. */
function intent(e: SessionEvent): unknown[] {
  const opts: Record<string, unknown> = {}
  const raw = e as { surfaceOp?: unknown; sourceEventSeqs?: unknown }
  if (raw.surfaceOp !== undefined) opts.surfaceOp = raw.surfaceOp
  if (raw.sourceEventSeqs !== undefined) opts.sourceEventSeqs = raw.sourceEventSeqs
  return Object.keys(opts).length > 0 ? [opts] : []
}

/** Index of the event at which the checks first fail (events.length when none). */
function violationIndex(events: SessionEvent[]): number {
  let lo = 0
  let hi = events.length
  // The smallest prefix length that throws, minus one.
  while (lo < hi) {
    const mid = (lo + hi) >> 1
    if (thrown(() => checkSessionInvariants(events.slice(0, mid + 1))) === null) lo = mid + 1
    else hi = mid
  }
  return lo
}

describe('SPEC 9 checkSessionInvariants', () => {
  it('covers every case of invariants.json', () => {
    expect(CASES.length).toBeGreaterThan(15)
    expect(CASES.some((c) => c.error === null)).toBe(true)
    expect(CASES.some((c) => c.error !== null)).toBe(true)
  })

  for (const c of CASES) {
    it(`${c.name}: ${c.error ?? 'passes'}`, () => {
      const events = eventsOf(c)
      const error = thrown(() => checkSessionInvariants(events))
      if (c.error === null) {
        expect(error).toBeNull()
        expect(checkSessionInvariants(events)).toBeUndefined()
      } else {
        expect(error).toEqual({ code: 'INVARIANT', message: c.error })
      }
    })
  }

  it('an empty log passes', () => {
    expect(checkSessionInvariants([])).toBeUndefined()
  })

  it('rejects a non-array', () => {
    expect(thrown(() => checkSessionInvariants('[]' as never))).toEqual({
      code: 'INVALID_ARGUMENT',
      message: 'events must be an array',
    })
  })

  it('reports a seq that does not increase', () => {
    const log = [ev(0, 'turn/start', { turn: 1, trigger: { kind: 'message', source: USER } }), ev(0, 'turn/end', { turn: 1 })]
    expect(thrown(() => checkSessionInvariants(log as SessionEvent[]))?.message).toBe(
      'invariant violated: seq must strictly increase: saw 0 after 0',
    )
  })

  it('reports steps that overlap or belong to another turn', () => {
    const start = ev(0, 'turn/start', { turn: 1, trigger: { kind: 'message', source: USER } })
    const other = [start, ev(1, 'step/start', { turn: 2, step: 1 })]
    expect(thrown(() => checkSessionInvariants(other as SessionEvent[]))?.message).toBe(
      'invariant violated: step/start in turn 2 but open turn is 1',
    )
    const overlap = [start, ev(1, 'step/start', { turn: 1, step: 1 }), ev(2, 'step/start', { turn: 1, step: 2 })]
    expect(thrown(() => checkSessionInvariants(overlap as SessionEvent[]))?.message).toBe(
      'invariant violated: step/start 2 while step 1 is still open',
    )
    const mismatch = [start, ev(1, 'step/start', { turn: 1, step: 1 }), ev(2, 'step/end', { turn: 1, step: 2 })]
    expect(thrown(() => checkSessionInvariants(mismatch as SessionEvent[]))?.message).toBe(
      'invariant violated: step/end names turn 1/step 2 but open is turn 1/step 1',
    )
  })
})

describe('SPEC 9 opt-in Session mode ({ invariants: true })', () => {
  for (const c of CASES) {
    it(`${c.name}: every append is checked before commit`, () => {
      const events = eventsOf(c)
      const s = new Session(`inv-${c.name}`, [], undefined, { invariants: true })
      let error: ReturnType<typeof thrown> = null
      let at = -1
      for (let i = 0; i < events.length && error === null; i++) {
        const e = events[i]!
        error = thrown(() => appendAny(s, e.type, e.data, ...intent(e)))
        if (error !== null) at = i
      }
      if (c.error === null) {
        expect(error).toBeNull()
        expect(s.seq).toBe(events.length)
      } else {
        expect(error).toEqual({ code: 'INVARIANT', message: c.error })
        // The violating append changed nothing.
        expect(s.seq).toBe(at)
        expect(s.events).toHaveLength(at)
      }
    })

    it(`${c.name}: the seed is checked`, () => {
      const events = eventsOf(c)
      const k = violationIndex(events)
      if (c.error === null) {
        expect(k).toBe(events.length)
        const s = new Session(`seed-${c.name}`, events, undefined, { invariants: true })
        expect(s.seq).toBe(events.length)
        return
      }
      // The seed up to and including the first violating event (later
      // events may break other rules, which the seed checks first).
      const seed = events.slice(0, k + 1)
      expect(thrown(() => new Session(`seed-${c.name}`, seed, undefined, { invariants: true }))).toEqual({
        code: 'INVARIANT',
        message: c.error,
      })
      // Without the option the same seed is accepted.
      expect(new Session(`plain-${c.name}`, seed).seq).toBe(seed.length)
    })
  }

  function opened(): Session {
    const s = new Session('inv-live', [], undefined, { invariants: true })
    s.append('turn/start', { turn: 1, trigger: { kind: 'message', source: USER } })
    s.append('user/message', { content: text('hi'), source: USER }, { surfaceOp: 'append' })
    return s
  }

  it('a rejected append changes nothing and the next one is judged against the same state', () => {
    const s = opened()
    const events = s.events
    const nodes = [...s.surface.nodes]
    const messages = s.deriveMessages()
    expect(thrown(() => s.append('turn/start', { turn: 2, trigger: { kind: 'message', source: USER } }))).toEqual({
      code: 'INVARIANT',
      message: 'invariant violated: turn/start 2 while turn 1 is still open',
    })
    expect(s.seq).toBe(2)
    expect(s.events).toBe(events)
    expect([...s.surface.nodes]).toEqual(nodes)
    expect(s.deriveMessages()).toEqual(messages)
    // Had the rejected turn/start been committed, this would be "does not match open turn 2".
    expect(s.append('turn/end', { turn: 1, reason: { kind: 'completed' } }).seq).toBe(2)
    expect(s.append('turn/start', { turn: 2, trigger: { kind: 'message', source: USER } }).seq).toBe(3)
  })

  it('an append vetoed by an attachment does not advance the checks', () => {
    const s = opened()
    let veto = true
    s.attach({
      beforeCommit(event) {
        if (veto && event.type === 'step/start') throw new Error('vetoed')
      },
    })
    expect(() => s.append('step/start', { turn: 1, step: 1 })).toThrow('vetoed')
    veto = false
    // Had the vetoed step/start been committed, this would be "while step 1 is still open".
    expect(s.append('step/start', { turn: 1, step: 1 }).seq).toBe(2)
  })

  it('an append the surface rejects does not advance the checks', () => {
    const s = opened()
    s.append('step/start', { turn: 1, step: 1 })
    expect(() => appendAny(s, 'tool/call', { turn: 1, step: 1, callId: 'c1', name: 'read', arguments: '{}' }, { surfaceOp: 'append' })).toThrow(
      'is not surface-eligible',
    )
    expect(thrown(() => s.append('tool/result', { turn: 1, step: 1, callId: 'c1', content: text('r'), isError: false }, { surfaceOp: 'append' }))).toEqual({
      code: 'INVARIANT',
      message: 'invariant violated: tool/result for c1 with no prior tool/call in this step',
    })
  })

  it('accepts a synthetic interrupted result without its call', () => {
    const s = opened()
    s.append('step/start', { turn: 1, step: 1 })
    const data = {
      turn: 1,
      step: 1,
      callId: 'lost',
      content: text('Tool call interrupted by a crash; no result was recorded.'),
      isError: true,
      error: { name: 'InterruptedError', code: 'interrupted' },
    }
    expect(s.append('tool/result', data, { surfaceOp: 'append' }).seq).toBe(3)
  })

  it('is off by default', () => {
    const s = new Session('plain', [])
    expect(s.append('todo/write', { todos: [] }).seq).toBe(0)
    const off = newSession('off', [], undefined, { invariants: false }) as Session
    expect(off.append('todo/write', { todos: [] }).seq).toBe(0)
  })

  it('reads a payload nested 1,000 levels, as every reader does, and refuses a deeper one', () => {
    /** `levels` arrays and objects (alternating) around 1. */
    const nest = (levels: number): unknown => {
      let v: unknown = 1
      for (let i = 0; i < levels; i++) v = i % 2 ? [v] : { k: v }
      return v
    }
    const s = opened()
    expect(appendAny(s, 'plugin/deep', nest(1000)).seq).toBe(2)
    expect(thrown(() => s.append('turn/start', { turn: 2, trigger: { kind: 'message', source: USER } }))?.code).toBe('INVARIANT')
    const log = [ev(0, 'turn/start', { turn: 1, trigger: { kind: 'message', source: USER } }), ev(1, 'plugin/deep', nest(1000))]
    expect(checkSessionInvariants(log as SessionEvent[])).toBeUndefined()
    log.push(ev(2, 'plugin/deep', nest(1001)))
    expect(thrown(() => checkSessionInvariants(log as SessionEvent[]))).toEqual({
      code: 'NOT_LOSSLESS_JSON',
      message: 'seed event at index 2 is not losslessly JSON-serializable',
    })
  })

  it('a seed that breaks the checks constructs nothing', () => {
    const seed = [ev(0, 'todo/write', { todos: [] })] as SessionEvent[]
    expect(thrown(() => new Session('bad-seed', seed, undefined, { invariants: true }))).toEqual({
      code: 'INVARIANT',
      message: 'invariant violated: todo/write appended outside any open turn (every event must be turn-enclosed)',
    })
  })
})
