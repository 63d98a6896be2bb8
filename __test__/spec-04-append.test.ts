import { describe, expect, it } from 'vitest'
import { Session, type SurfaceIntent } from '../index.js'
import {
  appendAny,
  catchError,
  expectError,
  expectRejectedWithoutChange,
  HEADER,
  isDeepFrozen,
  PROV,
  sessionWithUsers,
  text,
  USER,
} from './spec-helpers.js'

const REENTER = 'session append cannot reenter while another append is being published'

describe('SPEC 4 append: snapshot of data (step 1)', () => {
  it('logs a snapshot: caller mutation after append never reaches the log', () => {
    const s = sessionWithUsers(1)
    const data = { content: text('original'), source: { kind: 'user', tag: 'a' } }
    const e = s.append('user/message', data, { surfaceOp: 'append' })
    expect(e.data).not.toBe(data)
    expect(e.data.content).not.toBe(data.content)
    data.content[0].text = 'mutated'
    data.content.push({ type: 'text', text: 'more' })
    data.source.tag = 'b'
    expect(e.data).toEqual({ content: text('original'), source: { kind: 'user', tag: 'a' } })
    expect(s.events.at(-1)!.data).toEqual({ content: text('original'), source: { kind: 'user', tag: 'a' } })
    expect(s.deriveMessages().at(-1)).toEqual({ role: 'user', content: text('original') })
    expect(s.toJsonl()).toContain('"original"')
    expect(s.toJsonl()).not.toContain('mutated')
  })

  it('does not freeze or alter the caller\'s data', () => {
    const s = new Session('s')
    const data = { todos: [{ content: 'a', status: 'pending' as const }] }
    s.append('todo/write', data)
    expect(Object.isFrozen(data)).toBe(false)
    expect(Object.isFrozen(data.todos)).toBe(false)
    expect(data).toEqual({ todos: [{ content: 'a', status: 'pending' }] })
  })
})

describe('SPEC 4 append: surface metadata from opts (step 3)', () => {
  it('copies surfaceOp and sourceEventSeqs: caller mutation of opts never reaches the log', () => {
    const s = sessionWithUsers(3)
    const opts = { surfaceOp: { op: 'replace' as const, start: 1, end: 2 }, sourceEventSeqs: [1, 2] }
    const e = s.append('context/message', { content: text('summary'), source: { kind: 'compaction' } }, opts)
    opts.surfaceOp.start = 3
    opts.surfaceOp.end = 3
    opts.sourceEventSeqs.push(3)
    opts.sourceEventSeqs[0] = 0
    expect(e.surfaceOp).toEqual({ op: 'replace', start: 1, end: 2 })
    expect(e.sourceEventSeqs).toEqual([1, 2])
    expect(s.events.at(-1)).toBe(e)
    expect(s.surface.nodes).toEqual([4, 3])
    const line = JSON.parse(s.toJsonl().trimEnd().split('\n').at(-1)!)
    expect(line.surfaceOp).toEqual({ op: 'replace', start: 1, end: 2 })
    expect(line.sourceEventSeqs).toEqual([1, 2])
  })

  it('replacing the whole opts object after the call changes nothing', () => {
    const s = sessionWithUsers(1)
    let opts: SurfaceIntent = { surfaceOp: 'append', sourceEventSeqs: [0] }
    const e = s.append('user/message', { content: text('x'), source: USER }, opts)
    opts.surfaceOp = { op: 'replace', start: 0, end: 0 }
    opts = { surfaceOp: 'append' }
    expect(e.surfaceOp).toBe('append')
    expect(e.sourceEventSeqs).toEqual([0])
    expect(Object.isFrozen(e.sourceEventSeqs)).toBe(true)
  })

  it('reads only surfaceOp and sourceEventSeqs from opts', () => {
    const s = sessionWithUsers(1)
    const e = appendAny(s, 'user/message', { content: text('x'), source: USER }, { surfaceOp: 'append', note: 'x' })
    expect(Object.keys(e).sort()).toEqual(['data', 'seq', 'surfaceOp', 'time', 'type'])
  })
})

describe('SPEC 4 append: the logged event (steps 5, 7)', () => {
  it('builds seq = log length and time = Date.now()', () => {
    const s = sessionWithUsers(2)
    const before = Date.now()
    const e = s.append('step/start', { turn: 1, step: 1 })
    const after = Date.now()
    expect(e.seq).toBe(3)
    expect(e.time).toBeGreaterThanOrEqual(before)
    expect(e.time).toBeLessThanOrEqual(after)
    expect(Number.isSafeInteger(e.time)).toBe(true)
    expect(e.type).toBe('step/start')
  })

  it('increments seq by one per append', () => {
    const s = new Session('s')
    for (let i = 0; i < 5; i++) {
      expect(s.seq).toBe(i)
      const e = appendAny(s, 'plugin/tick', { i })
      expect(e.seq).toBe(i)
      expect(s.seq).toBe(i + 1)
    }
  })

  it('returns the frozen logged event, the same object the log holds', () => {
    const s = sessionWithUsers(1)
    const e = s.append('user/message', { content: text('x'), source: USER }, { surfaceOp: 'append' })
    expect(Object.isFrozen(e)).toBe(true)
    expect(isDeepFrozen(e)).toBe(true)
    expect(s.events.at(-1)).toBe(e)
    expect(s.events).toHaveLength(e.seq + 1)
  })

  it('returns the event with its data as the snapshot', () => {
    const s = sessionWithUsers(1)
    const data = { turn: 1, step: 1, content: text('a'), provenance: PROV, usage: { inputTokens: 3 } }
    const e = s.append('assistant/message', data, { surfaceOp: 'append', sourceEventSeqs: [] })
    expect(e.data).toEqual(data)
    expect(e.data).not.toBe(data)
    expect(e.sourceEventSeqs).toEqual([])
  })

  it('appends events of any type, including plugin types, without touching the surface', () => {
    const s = sessionWithUsers(1)
    const nodes = [...s.surface.nodes]
    const e = appendAny(s, 'plugin/ping', { n: 1 })
    expect(e.type).toBe('plugin/ping')
    expect(s.surface.nodes).toEqual(nodes)
    expect(s.deriveMessages()).toHaveLength(1)
  })
})

describe('SPEC 4 append: a rejected append changes nothing (step 6)', () => {
  /** Users u0..u3 at seqs 1..4, a request header at 5, and a summary at 6 replacing seq 1: nodes [6, 2, 3, 4]. */
  function busySession(): Session {
    const s = sessionWithUsers(4)
    s.append('request/header', { header: HEADER, reason: 'initial' })
    s.append('context/message', { content: text('summary'), source: { kind: 'compaction' } }, {
      surfaceOp: { op: 'replace', start: 1, end: 1 },
      sourceEventSeqs: [1],
    })
    return s
  }

  const cases: [string, (s: Session) => unknown, string][] = [
    ['non-lossless data', (s) => appendAny(s, 'plugin/x', { a: NaN }), 'session event "plugin/x" carries non-JSON-serializable data'],
    [
      'non-lossless surface metadata',
      (s) => appendAny(s, 'user/message', { content: text('x'), source: USER }, { surfaceOp: 'append', sourceEventSeqs: [Infinity] }),
      'session event "user/message" carries non-JSON-serializable surface metadata',
    ],
    [
      'legacy request/header-delta',
      (s) => appendAny(s, 'request/header-delta', { config: {} }),
      'session event "request/header-delta" uses unsupported legacy request/header-delta format',
    ],
    [
      'legacy fallback reason',
      (s) => appendAny(s, 'request/header', { header: HEADER, reason: 'fallback' }),
      'session event "request/header" uses unsupported legacy request/header reason "fallback"',
    ],
    [
      'a missing surfaceOp',
      (s) => appendAny(s, 'user/message', { content: text('x'), source: USER }),
      'session event "user/message" is surface-eligible and requires a surfaceOp marker',
    ],
    [
      'a surfaceOp on a log-only type',
      (s) => appendAny(s, 'step/start', { turn: 1, step: 1 }, { surfaceOp: 'append' }),
      'session event "step/start" is not surface-eligible and cannot carry surfaceOp',
    ],
    [
      'a replace starting at a shadowed seq',
      (s) =>
        s.append('context/message', { content: text('s'), source: USER }, {
          surfaceOp: { op: 'replace', start: 1, end: 3 },
          sourceEventSeqs: [1, 2, 3],
        }),
      'surface replace: start seq 1 not found in surface',
    ],
    [
      'a replace missing coverage',
      (s) =>
        s.append('context/message', { content: text('s'), source: USER }, {
          surfaceOp: { op: 'replace', start: 2, end: 4 },
          sourceEventSeqs: [2, 4],
        }),
      'surface replace: sourceEventSeqs must include every shadowed surface node; missing 3',
    ],
    [
      'a future source',
      (s) => s.append('user/message', { content: text('x'), source: USER }, { surfaceOp: 'append', sourceEventSeqs: [9] }),
      'sourceEventSeqs must reference earlier events: 9 >= current seq 7',
    ],
  ]

  it.each(cases)('after %s: same events, seq, surface, nodes, generation, messages and header', (_name, act, message) => {
    const s = busySession()
    expect(s.surface.nodes).toEqual([6, 2, 3, 4])
    expect(s.surface.replaceGeneration).toBe(1)
    const messages = s.deriveMessages()
    const header = s.requestHeader()
    expect(header).toBeDefined()
    expectRejectedWithoutChange(s, () => act(s), message)
    expect(s.seq).toBe(7)
    expect(s.surface.nodes).toEqual([6, 2, 3, 4])
    expect(s.surface.replaceGeneration).toBe(1)
    const after = s.deriveMessages()
    expect(after).toEqual(messages)
    after.forEach((m, i) => expect(m).toBe(messages[i]))
    expect(s.requestHeader()).toBe(header)
  })

  it('accepts the next valid append after a rejected one, at the same seq', () => {
    const s = sessionWithUsers(1)
    catchError(() => appendAny(s, 'user/message', { content: text('x'), source: USER }))
    const e = s.append('user/message', { content: text('x'), source: USER }, { surfaceOp: 'append' })
    expect(e.seq).toBe(2)
    expect(s.surface.nodes).toEqual([1, 2])
  })
})

describe('SPEC 4 append: order of the checks', () => {
  it('checks data (1) before legacy vocabulary (2)', () => {
    const s = new Session('s')
    expectError(
      () => appendAny(s, 'request/header-delta', { a: NaN }),
      'session event "request/header-delta" carries non-JSON-serializable data',
      'NOT_LOSSLESS_JSON',
    )
  })

  it('checks legacy vocabulary (2) before surface metadata (3)', () => {
    const s = new Session('s')
    expectError(
      () => appendAny(s, 'request/header-delta', {}, { surfaceOp: 'append', sourceEventSeqs: [NaN] }),
      'session event "request/header-delta" uses unsupported legacy request/header-delta format',
      'LEGACY_VOCABULARY',
    )
  })

  it('checks surface metadata (3) before the surface transition (6)', () => {
    const s = new Session('s')
    expectError(
      () => appendAny(s, 'turn/start', { turn: 1 }, { surfaceOp: 'append', sourceEventSeqs: [NaN] }),
      'session event "turn/start" carries non-JSON-serializable surface metadata',
      'NOT_LOSSLESS_JSON',
    )
  })

  it('checks data (1) before re-entry (4)', () => {
    const s = new Session('s')
    const errors: unknown[] = []
    s.attach({
      afterCommit: () => {
        try {
          appendAny(s, 'plugin/x', { bad: undefined })
        } catch (error) {
          errors.push(error)
        }
      },
    })
    s.append('turn/start', { turn: 1, trigger: { kind: 'message', source: USER } })
    expect(errors).toHaveLength(1)
    expect((errors[0] as Error).message).toBe('session event "plugin/x" carries non-JSON-serializable data')
  })

  it('checks legacy vocabulary (2) before re-entry (4)', () => {
    const s = new Session('s')
    const errors: unknown[] = []
    s.attach({
      beforeCommit: () => {
        try {
          appendAny(s, 'request/header', { header: HEADER, reason: 'fallback' })
        } catch (error) {
          errors.push(error)
        }
      },
    })
    s.append('turn/start', { turn: 1, trigger: { kind: 'message', source: USER } })
    expect(errors).toHaveLength(1)
    expect((errors[0] as Error).message).toBe(
      'session event "request/header" uses unsupported legacy request/header reason "fallback"',
    )
  })
})

describe('SPEC 4 append: re-entry from an observer (step 4)', () => {
  it('rejects an append from afterCommit; the observer error is reported and the outer append stands', () => {
    const s = sessionWithUsers(1)
    const reported: unknown[] = []
    s.attach({
      afterCommit: (event) => {
        if (event.type === 'user/message') s.append('step/start', { turn: 1, step: 1 })
      },
      onObserverError: (error) => reported.push(error),
    })
    const e = s.append('user/message', { content: text('x'), source: USER }, { surfaceOp: 'append' })
    expect(s.events.at(-1)).toBe(e)
    expect(s.seq).toBe(3)
    expect(reported).toHaveLength(1)
    const error = reported[0] as Error & { code?: unknown }
    expect(error).toBeInstanceOf(Error)
    expect(error.message).toBe(REENTER)
    expect(error.code).toBe('REENTRANT_APPEND')
  })

  it('rejects an append from beforeCommit; letting it propagate vetoes the outer append', () => {
    const s = sessionWithUsers(1)
    s.attach({
      beforeCommit: () => {
        s.append('step/start', { turn: 1, step: 1 })
      },
    })
    expectRejectedWithoutChange(
      s,
      () => s.append('user/message', { content: text('x'), source: USER }, { surfaceOp: 'append' }),
      REENTER,
      'REENTRANT_APPEND',
    )
  })

  it('rejects a re-entrant append that would otherwise be valid, even when caught', () => {
    const s = sessionWithUsers(1)
    let inner: unknown
    s.attach({
      beforeCommit: () => {
        try {
          s.append('step/start', { turn: 1, step: 1 })
        } catch (error) {
          inner = error
        }
      },
    })
    const e = s.append('user/message', { content: text('x'), source: USER }, { surfaceOp: 'append' })
    expect((inner as Error).message).toBe(REENTER)
    expect(s.events.map((x) => x.type)).toEqual(['turn/start', 'user/message', 'user/message'])
    expect(s.events.at(-1)).toBe(e)
  })

  it('allows appending again once the publication is over', () => {
    const s = sessionWithUsers(1)
    let calls = 0
    s.attach({
      afterCommit: () => {
        calls += 1
        throw new Error('observer failed')
      },
      onObserverError: () => {},
    })
    s.append('step/start', { turn: 1, step: 1 })
    s.append('step/end', { turn: 1, step: 1 })
    expect(calls).toBe(2)
    expect(s.seq).toBe(4)
  })

  it('allows appending again after a veto', () => {
    const s = sessionWithUsers(1)
    let veto = true
    s.attach({
      beforeCommit: () => {
        if (veto) throw new Error('no')
      },
    })
    catchError(() => s.append('step/start', { turn: 1, step: 1 }))
    veto = false
    const e = s.append('step/start', { turn: 1, step: 1 })
    expect(e.seq).toBe(2)
  })

  it('lets an observer append to a different session', () => {
    const a = sessionWithUsers(1, 'a')
    const b = new Session('b')
    a.attach({
      afterCommit: (event) => {
        appendAny(b, 'plugin/mirror', { seq: event.seq })
      },
    })
    a.append('step/start', { turn: 1, step: 1 })
    expect(b.events.map((e) => e.data)).toEqual([{ seq: 2 }])
  })
})
