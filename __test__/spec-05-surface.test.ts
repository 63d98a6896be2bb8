import { describe, expect, it } from 'vitest'
import { foldSurface, isSurfaceEligibleType, isSurfaceEvent, Session, type SessionEvent } from '../index.js'
import {
  appendAny,
  basicLog,
  ev,
  expectError,
  expectRejectedWithoutChange,
  newSession,
  PROV,
  sessionWithUsers,
  text,
  USER,
} from './spec-helpers.js'

const SURFACE_TYPES = ['user/message', 'assistant/message', 'tool/result', 'context/message', 'steering/message']
const LOG_ONLY_TYPES = [
  'turn/start',
  'turn/end',
  'step/start',
  'step/end',
  'prompt/blocked',
  'assistant/chunk',
  'tool/call',
  'todo/write',
  'request/header',
  'plugin/ping',
]

const user = (t: string) => ({ content: text(t), source: USER })
const summary = (t = 'summary') => ({ content: text(t), source: { kind: 'compaction' } })

describe('SPEC 5 eligibility', () => {
  it.each(SURFACE_TYPES)('%s is surface-eligible', (type) => {
    expect(isSurfaceEligibleType(type)).toBe(true)
  })

  it.each([...LOG_ONLY_TYPES, '', 'User/Message', 'user/message '])('%j is not surface-eligible', (type) => {
    expect(isSurfaceEligibleType(type)).toBe(false)
  })

  it('isSurfaceEvent needs an eligible type and a surfaceOp', () => {
    const base = { seq: 0, time: 0 }
    expect(isSurfaceEvent({ ...base, type: 'user/message', data: user('x'), surfaceOp: 'append' } as SessionEvent)).toBe(true)
    expect(
      isSurfaceEvent({ ...base, type: 'tool/result', data: {}, surfaceOp: { op: 'replace', start: 0, end: 0 } } as never),
    ).toBe(true)
    expect(isSurfaceEvent({ ...base, type: 'user/message', data: user('x') } as SessionEvent)).toBe(false)
    expect(isSurfaceEvent({ ...base, type: 'turn/start', data: {}, surfaceOp: 'append' } as never)).toBe(false)
    expect(isSurfaceEvent({ ...base, type: 'plugin/x', data: {}, surfaceOp: 'append' } as never)).toBe(false)
  })

  it('isSurfaceEvent agrees with the log', () => {
    const s = newSession('s', basicLog())
    expect(s.events.filter(isSurfaceEvent).map((e) => e.seq)).toEqual([1, 4, 6, 9, 13])
  })
})

describe('SPEC 5 log-only events', () => {
  it.each(LOG_ONLY_TYPES)('rejects a surfaceOp on %s', (type) => {
    const s = sessionWithUsers(1)
    expectRejectedWithoutChange(
      s,
      () => appendAny(s, type, {}, { surfaceOp: 'append' }),
      `session event "${type}" is not surface-eligible and cannot carry surfaceOp`,
      'INVALID_SURFACE',
    )
  })

  it.each(LOG_ONLY_TYPES)('rejects sourceEventSeqs on %s', (type) => {
    const s = sessionWithUsers(1)
    expectRejectedWithoutChange(
      s,
      () => appendAny(s, type, {}, { sourceEventSeqs: [0] }),
      `session event "${type}" is not surface-eligible and cannot carry sourceEventSeqs`,
      'INVALID_SURFACE',
    )
  })

  it('names surfaceOp first when both are present', () => {
    const s = sessionWithUsers(1)
    expectError(
      () => appendAny(s, 'tool/call', {}, { surfaceOp: 'append', sourceEventSeqs: [0] }),
      'session event "tool/call" is not surface-eligible and cannot carry surfaceOp',
    )
  })

  it('treats a null surfaceOp as present on a log-only type', () => {
    const s = sessionWithUsers(1)
    expectRejectedWithoutChange(
      s,
      () => appendAny(s, 'step/start', { turn: 1, step: 1 }, { surfaceOp: null }),
      'session event "step/start" is not surface-eligible and cannot carry surfaceOp',
      'INVALID_SURFACE',
    )
  })

  it('accepts an empty intent object on a log-only type and leaves the surface alone', () => {
    const s = sessionWithUsers(1)
    const e = appendAny(s, 'step/start', { turn: 1, step: 1 }, {})
    expect(Object.keys(e).sort()).toEqual(['data', 'seq', 'time', 'type'])
    expect(s.surface.nodes).toEqual([1])
  })

  it('rejects the same in a seed, wrapped', () => {
    expectError(
      () => newSession('s', [ev(0, 'todo/write', { todos: [] }, { sourceEventSeqs: [0] })]),
      'invalid seed event at index 0: session event "todo/write" is not surface-eligible and cannot carry sourceEventSeqs',
      'INVALID_SURFACE',
    )
  })
})

describe('SPEC 5 surface events need a surfaceOp', () => {
  it.each(SURFACE_TYPES)('rejects %s without a surfaceOp', (type) => {
    const s = sessionWithUsers(1)
    expectRejectedWithoutChange(
      s,
      () => appendAny(s, type, user('x')),
      `session event "${type}" is surface-eligible and requires a surfaceOp marker`,
      'INVALID_SURFACE',
    )
  })

  it('rejects an intent with only sourceEventSeqs', () => {
    const s = sessionWithUsers(1)
    expectRejectedWithoutChange(
      s,
      () => appendAny(s, 'tool/result', {}, { sourceEventSeqs: [0] }),
      'session event "tool/result" is surface-eligible and requires a surfaceOp marker',
      'INVALID_SURFACE',
    )
  })

  it.each([
    ['an unknown string', 'prepend'],
    ['"replace" as a string', 'replace'],
    ['a number', 1],
    ['true', true],
  ])('rejects a surfaceOp that is %s', (_name, surfaceOp) => {
    const s = sessionWithUsers(1)
    expectRejectedWithoutChange(
      s,
      () => appendAny(s, 'user/message', user('x'), { surfaceOp }),
      'session event "user/message" carries an invalid surfaceOp',
      'INVALID_SURFACE',
    )
  })

  it.each([
    ['a missing end', { op: 'replace', start: 1 }],
    ['a missing start', { op: 'replace', end: 1 }],
    ['a missing op', { start: 1, end: 1 }],
    ['another op', { op: 'splice', start: 1, end: 1 }],
    ['an extra key', { op: 'replace', start: 1, end: 1, note: 'x' }],
    ['a negative start', { op: 'replace', start: -1, end: 1 }],
    ['a fractional end', { op: 'replace', start: 1, end: 1.5 }],
    ['a string start', { op: 'replace', start: '1', end: 1 }],
    ['an unsafe end', { op: 'replace', start: 1, end: 2 ** 53 }],
    ['null bounds', { op: 'replace', start: null, end: null }],
    ['an empty object', {}],
  ])('rejects a replace surfaceOp with %s', (_name, surfaceOp) => {
    const s = sessionWithUsers(2)
    expectRejectedWithoutChange(
      s,
      () => appendAny(s, 'context/message', summary(), { surfaceOp, sourceEventSeqs: [1] }),
      'session event "context/message" carries an invalid replace surfaceOp',
      'INVALID_SURFACE',
    )
  })
})

describe('SPEC 5 sourceEventSeqs', () => {
  it.each([
    ['a number', 1],
    ['a string', '1'],
    ['an object', { 0: 1 }],
    ['null', null],
  ])('rejects sourceEventSeqs that is %s', (_name, sourceEventSeqs) => {
    const s = sessionWithUsers(2)
    expectRejectedWithoutChange(
      s,
      () => appendAny(s, 'user/message', user('x'), { surfaceOp: 'append', sourceEventSeqs }),
      'sourceEventSeqs on event at seq 3 must be an array when present',
      'INVALID_SURFACE',
    )
  })

  it.each(['user/message', 'tool/result', 'context/message', 'steering/message'])('rejects empty sourceEventSeqs on %s', (type) => {
    const s = sessionWithUsers(1)
    expectRejectedWithoutChange(
      s,
      () => appendAny(s, type, user('x'), { surfaceOp: 'append', sourceEventSeqs: [] }),
      'sourceEventSeqs must not be empty except on assistant/message',
      'INVALID_SURFACE',
    )
  })

  it('accepts empty sourceEventSeqs on assistant/message', () => {
    const s = sessionWithUsers(1)
    const e = s.append('assistant/message', { turn: 1, step: 1, content: text('a'), provenance: PROV }, {
      surfaceOp: 'append',
      sourceEventSeqs: [],
    })
    expect(e.sourceEventSeqs).toEqual([])
    expect(s.surface.nodes).toEqual([1, 2])
  })

  it.each([
    ['a negative seq', [-1]],
    ['a fractional seq', [0.5]],
    ['a string seq', ['0']],
    ['null', [null]],
    ['a nested array', [[0]]],
    ['an unsafe integer', [2 ** 53]],
  ])('rejects %s among the sources', (_name, sourceEventSeqs) => {
    const s = sessionWithUsers(2)
    expectRejectedWithoutChange(
      s,
      () => appendAny(s, 'tool/result', user('x'), { surfaceOp: 'append', sourceEventSeqs }),
      'session event "tool/result" sourceEventSeqs must densely contain non-negative safe integers',
      'INVALID_SURFACE',
    )
  })

  it('rejects duplicates', () => {
    const s = sessionWithUsers(2)
    expectRejectedWithoutChange(
      s,
      () => s.append('user/message', user('x'), { surfaceOp: 'append', sourceEventSeqs: [1, 0, 1] }),
      'sourceEventSeqs must not contain duplicates',
      'INVALID_SURFACE',
    )
  })

  it('rejects a source that is not earlier than the event', () => {
    const s = sessionWithUsers(2)
    expectRejectedWithoutChange(
      s,
      () => s.append('user/message', user('x'), { surfaceOp: 'append', sourceEventSeqs: [0, 7] }),
      'sourceEventSeqs must reference earlier events: 7 >= current seq 3',
      'INVALID_SURFACE',
    )
  })

  it('rejects the event itself as its source', () => {
    const s = sessionWithUsers(2)
    expectRejectedWithoutChange(
      s,
      () => s.append('user/message', user('x'), { surfaceOp: 'append', sourceEventSeqs: [3] }),
      'sourceEventSeqs must reference earlier events: 3 >= current seq 3',
      'INVALID_SURFACE',
    )
  })

  it('accepts any earlier seq on an append, on the surface or not', () => {
    const s = sessionWithUsers(2)
    const e = s.append('user/message', user('x'), { surfaceOp: 'append', sourceEventSeqs: [0, 2] })
    expect(e.sourceEventSeqs).toEqual([0, 2])
    expect(s.surface.nodes).toEqual([1, 2, 3])
  })
})

describe('SPEC 5 surface append', () => {
  it('pushes the seq of each surface event and nothing else', () => {
    const s = newSession('s', basicLog())
    expect(s.surface.nodes).toEqual([1, 4, 6, 9, 13])
    s.append('turn/start', { turn: 3, trigger: { kind: 'message', source: USER } })
    s.append('steering/message', { turn: 3, content: text('go'), source: USER }, { surfaceOp: 'append' })
    expect(s.surface.nodes).toEqual([1, 4, 6, 9, 13, 16])
    expect(s.surface.replaceGeneration).toBe(0)
  })

  it('keeps one surface object and one live nodes array, updated in place', () => {
    const s = sessionWithUsers(1)
    const surface = s.surface
    const nodes = s.surface.nodes
    s.append('user/message', user('x'), { surfaceOp: 'append' })
    expect(s.surface).toBe(surface)
    expect(s.surface.nodes).toBe(nodes)
    expect(nodes).toEqual([1, 2])
    s.append('context/message', summary(), { surfaceOp: { op: 'replace', start: 1, end: 2 }, sourceEventSeqs: [1, 2] })
    expect(s.surface).toBe(surface)
    expect(s.surface.nodes).toBe(nodes)
    expect(nodes).toEqual([3])
    expect(surface.replaceGeneration).toBe(1)
  })
})

describe('SPEC 5 surface replace', () => {
  it('splices the range (inclusive, by position) into the new seq and bumps replaceGeneration', () => {
    const s = sessionWithUsers(4) // nodes [1, 2, 3, 4]
    const e = s.append('context/message', summary(), {
      surfaceOp: { op: 'replace', start: 2, end: 3 },
      sourceEventSeqs: [2, 3],
    })
    expect(e.seq).toBe(5)
    expect(s.surface.nodes).toEqual([1, 5, 4])
    expect(s.surface.replaceGeneration).toBe(1)
  })

  it('replaces a single node when start === end', () => {
    const s = sessionWithUsers(3)
    s.append('tool/result', { turn: 1, step: 1, callId: 'c', content: text('trimmed'), isError: false }, {
      surfaceOp: { op: 'replace', start: 2, end: 2 },
      sourceEventSeqs: [2],
    })
    expect(s.surface.nodes).toEqual([1, 4, 3])
  })

  it('replaces the head and the whole surface', () => {
    const s = sessionWithUsers(3)
    s.append('context/message', summary('head'), { surfaceOp: { op: 'replace', start: 1, end: 2 }, sourceEventSeqs: [1, 2] })
    expect(s.surface.nodes).toEqual([4, 3])
    s.append('context/message', summary('all'), { surfaceOp: { op: 'replace', start: 4, end: 3 }, sourceEventSeqs: [4, 3] })
    expect(s.surface.nodes).toEqual([5])
    expect(s.surface.replaceGeneration).toBe(2)
  })

  it('keeps the shadowed events in the log', () => {
    const s = sessionWithUsers(3)
    s.append('context/message', summary(), { surfaceOp: { op: 'replace', start: 1, end: 3 }, sourceEventSeqs: [1, 2, 3] })
    expect(s.events).toHaveLength(5)
    expect(s.events.slice(1, 4).map((e) => e.type)).toEqual(['user/message', 'user/message', 'user/message'])
  })

  it('replaces over an earlier summary (nested compaction)', () => {
    const s = sessionWithUsers(4)
    s.append('context/message', summary('first'), { surfaceOp: { op: 'replace', start: 1, end: 2 }, sourceEventSeqs: [1, 2] })
    expect(s.surface.nodes).toEqual([5, 3, 4])
    s.append('context/message', summary('second'), { surfaceOp: { op: 'replace', start: 5, end: 3 }, sourceEventSeqs: [5, 3] })
    expect(s.surface.nodes).toEqual([6, 4])
    expect(s.surface.replaceGeneration).toBe(2)
  })

  it('accepts sources beyond the shadowed nodes', () => {
    const s = sessionWithUsers(3)
    s.append('context/message', summary(), { surfaceOp: { op: 'replace', start: 2, end: 2 }, sourceEventSeqs: [0, 2, 1] })
    expect(s.surface.nodes).toEqual([1, 4, 3])
  })

  it('works for every surface type', () => {
    for (const type of SURFACE_TYPES) {
      const s = sessionWithUsers(2)
      appendAny(s, type, { turn: 1, step: 1, callId: 'c', isError: false, provenance: PROV, ...user('x') }, {
        surfaceOp: { op: 'replace', start: 1, end: 2 },
        sourceEventSeqs: [1, 2],
      })
      expect(s.surface.nodes).toEqual([3])
    }
  })

  it('rejects a start seq that is not on the surface', () => {
    const s = sessionWithUsers(3)
    expectRejectedWithoutChange(
      s,
      () => s.append('context/message', summary(), { surfaceOp: { op: 'replace', start: 42, end: 2 }, sourceEventSeqs: [2] }),
      'surface replace: start seq 42 not found in surface',
      'INVALID_SURFACE',
    )
  })

  it('rejects a start seq that is in the log but not on the surface', () => {
    const s = sessionWithUsers(3)
    expectRejectedWithoutChange(
      s,
      () => s.append('context/message', summary(), { surfaceOp: { op: 'replace', start: 0, end: 2 }, sourceEventSeqs: [0, 1, 2] }),
      'surface replace: start seq 0 not found in surface',
      'INVALID_SURFACE',
    )
  })

  it('rejects a start seq that an earlier replace shadowed', () => {
    const s = sessionWithUsers(3)
    s.append('context/message', summary(), { surfaceOp: { op: 'replace', start: 1, end: 1 }, sourceEventSeqs: [1] })
    expectRejectedWithoutChange(
      s,
      () => s.append('context/message', summary(), { surfaceOp: { op: 'replace', start: 1, end: 3 }, sourceEventSeqs: [1, 2, 3] }),
      'surface replace: start seq 1 not found in surface',
      'INVALID_SURFACE',
    )
  })

  it('names the start before the end when both are unknown', () => {
    const s = sessionWithUsers(3)
    expectError(
      () => s.append('context/message', summary(), { surfaceOp: { op: 'replace', start: 40, end: 41 }, sourceEventSeqs: [1] }),
      'surface replace: start seq 40 not found in surface',
    )
  })

  it('rejects an end seq that is not on the surface', () => {
    const s = sessionWithUsers(3)
    expectRejectedWithoutChange(
      s,
      () => s.append('context/message', summary(), { surfaceOp: { op: 'replace', start: 1, end: 9 }, sourceEventSeqs: [1, 2, 3] }),
      'surface replace: end seq 9 not found in surface',
      'INVALID_SURFACE',
    )
  })

  it('rejects a start that comes after the end by position', () => {
    const s = sessionWithUsers(3)
    expectRejectedWithoutChange(
      s,
      () => s.append('context/message', summary(), { surfaceOp: { op: 'replace', start: 3, end: 1 }, sourceEventSeqs: [1, 2, 3] }),
      'surface replace: start seq 3 (index 2) is after end seq 1 (index 0)',
      'INVALID_SURFACE',
    )
  })

  it('orders by position, not by seq, after a replace', () => {
    const s = sessionWithUsers(3)
    s.append('context/message', summary(), { surfaceOp: { op: 'replace', start: 1, end: 1 }, sourceEventSeqs: [1] })
    // nodes [4, 2, 3]: 4 comes before 2 by position
    s.append('context/message', summary(), { surfaceOp: { op: 'replace', start: 4, end: 2 }, sourceEventSeqs: [4, 2] })
    expect(s.surface.nodes).toEqual([5, 3])
    expectError(
      () => s.append('context/message', summary(), { surfaceOp: { op: 'replace', start: 3, end: 5 }, sourceEventSeqs: [3, 5] }),
      'surface replace: start seq 3 (index 1) is after end seq 5 (index 0)',
    )
  })

  it('rejects sources that miss a shadowed node, listing each one', () => {
    const s = sessionWithUsers(5)
    expectRejectedWithoutChange(
      s,
      () => s.append('context/message', summary(), { surfaceOp: { op: 'replace', start: 1, end: 5 }, sourceEventSeqs: [1, 3, 5] }),
      'surface replace: sourceEventSeqs must include every shadowed surface node; missing 2, 4',
      'INVALID_SURFACE',
    )
  })

  it('rejects a replace without any sources', () => {
    const s = sessionWithUsers(2)
    expectRejectedWithoutChange(
      s,
      () => s.append('context/message', summary(), { surfaceOp: { op: 'replace', start: 1, end: 2 } }),
      'surface replace: sourceEventSeqs must include every shadowed surface node; missing 1, 2',
      'INVALID_SURFACE',
    )
  })

  it('rejects a replace on an empty surface', () => {
    const s = new Session('s')
    s.append('turn/start', { turn: 1, trigger: { kind: 'message', source: USER } })
    expectError(
      () => s.append('context/message', summary(), { surfaceOp: { op: 'replace', start: 0, end: 0 }, sourceEventSeqs: [0] }),
      'surface replace: start seq 0 not found in surface',
    )
  })
})

describe('SPEC 5 foldSurface', () => {
  it('folds a whole log into its nodes and replacement history', () => {
    const s = sessionWithUsers(4)
    s.append('context/message', summary(), { surfaceOp: { op: 'replace', start: 2, end: 3 }, sourceEventSeqs: [2, 3] })
    s.append('tool/result', { turn: 1, step: 1, callId: 'c', content: text('t'), isError: false }, {
      surfaceOp: { op: 'replace', start: 4, end: 4 },
      sourceEventSeqs: [4],
    })
    s.append('context/message', summary('all'), {
      surfaceOp: { op: 'replace', start: 1, end: 6 },
      sourceEventSeqs: [1, 5, 6],
    })
    const folded = foldSurface(s.events)
    expect(folded.nodes).toEqual([7])
    expect(folded.replacements).toEqual([
      { seq: 5, start: 2, end: 3, shadowedSeqs: [2, 3] },
      { seq: 6, start: 4, end: 4, shadowedSeqs: [4] },
      { seq: 7, start: 1, end: 6, shadowedSeqs: [1, 5, 6] },
    ])
    expect(folded.nodes).toEqual(s.surface.nodes)
    expect(folded.nodes).not.toBe(s.surface.nodes)
  })

  it('returns no replacements for an append-only log', () => {
    expect(foldSurface(basicLog() as never)).toEqual({ nodes: [1, 4, 6, 9, 13], replacements: [] })
  })

  it('folds an empty log', () => {
    expect(foldSurface([])).toEqual({ nodes: [], replacements: [] })
  })

  it('rejects a log whose seq is not contiguous', () => {
    const log = basicLog()
    log[3] = { ...log[3], seq: 5 }
    expectError(() => foldSurface(log as never), 'session event seq 5 is not contiguous; expected 3', 'SEQ_NOT_CONTIGUOUS')
  })

  it('rejects a log that does not start at seq 0', () => {
    const log = basicLog().slice(1)
    expectError(() => foldSurface(log as never), 'session event seq 1 is not contiguous; expected 0', 'SEQ_NOT_CONTIGUOUS')
  })

  it('rejects an invalid transition with the surface message', () => {
    const log = basicLog()
    log[13] = { ...log[13], surfaceOp: { op: 'replace', start: 42, end: 1 }, sourceEventSeqs: [1] }
    expectError(() => foldSurface(log as never), 'surface replace: start seq 42 not found in surface', 'INVALID_SURFACE')
  })

  it('counts a null surfaceOp or sourceEventSeqs as present, as append does', () => {
    const at = (extra: Record<string, unknown>) => [{ type: 'step/start', seq: 0, time: 1, data: { turn: 1, step: 1 }, ...extra }]
    expectError(() => foldSurface(at({ surfaceOp: null }) as never), 'session event "step/start" is not surface-eligible and cannot carry surfaceOp', 'INVALID_SURFACE')
    expectError(() => foldSurface(at({ sourceEventSeqs: null }) as never), 'session event "step/start" is not surface-eligible and cannot carry sourceEventSeqs', 'INVALID_SURFACE')
  })

  it('rejects a surface event without a surfaceOp', () => {
    const log = basicLog()
    const { surfaceOp: _op, ...rest } = log[6]
    log[6] = rest
    expectError(
      () => foldSurface(log as never),
      'session event "tool/result" is surface-eligible and requires a surfaceOp marker',
      'INVALID_SURFACE',
    )
  })

  it('does not modify its input', () => {
    const s = sessionWithUsers(2)
    s.append('context/message', summary(), { surfaceOp: { op: 'replace', start: 1, end: 2 }, sourceEventSeqs: [1, 2] })
    const before = JSON.stringify(s.events)
    foldSurface(s.events)
    expect(JSON.stringify(s.events)).toBe(before)
  })

  it('agrees with the seeded session', () => {
    const s = sessionWithUsers(3)
    s.append('context/message', summary(), { surfaceOp: { op: 'replace', start: 1, end: 2 }, sourceEventSeqs: [1, 2] })
    const seeded = new Session('copy', s.events)
    expect(seeded.surface.nodes).toEqual(foldSurface(s.events).nodes)
    expect(seeded.surface.replaceGeneration).toBe(foldSurface(s.events).replacements.length)
  })
})
