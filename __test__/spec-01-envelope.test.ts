import { describe, expect, it } from 'vitest'
import { Session } from '../index.js'
import { appendAny, basicLog, ev, expectError, newSession, sessionWithUsers, text, USER } from './spec-helpers.js'

const turnStart = ev(0, 'turn/start', { turn: 1, trigger: { kind: 'message', source: USER } })
const userAt1 = ev(1, 'user/message', { content: text('q'), source: USER }, { surfaceOp: 'append' })

function seedWith(second: unknown): () => Session {
  return () => newSession('s', [turnStart, second])
}

describe('SPEC 1 event envelope (seed)', () => {
  it('accepts the six envelope keys', () => {
    const s = new Session('s', [
      turnStart,
      ev(1, 'user/message', { content: text('q'), source: USER }, { surfaceOp: 'append', sourceEventSeqs: [0] }),
    ] as never)
    expect(s.events).toHaveLength(2)
    expect(Object.keys(s.events[1]).sort()).toEqual(['data', 'seq', 'sourceEventSeqs', 'surfaceOp', 'time', 'type'])
  })

  it('rejects an extra top-level key', () => {
    expectError(seedWith({ ...userAt1, extra: 1 }), 'seed event at index 1 has an invalid event envelope', 'INVALID_EVENT')
  })

  it('rejects a negative time', () => {
    expectError(seedWith({ ...userAt1, time: -1 }), 'seed event at index 1 has an invalid event envelope', 'INVALID_EVENT')
  })

  it('rejects a time that is not an integer', () => {
    expectError(seedWith({ ...userAt1, time: 1.5 }), 'seed event at index 1 has an invalid event envelope', 'INVALID_EVENT')
  })

  it('rejects a time beyond the safe integers', () => {
    expectError(seedWith({ ...userAt1, time: 2 ** 53 }), 'seed event at index 1 has an invalid event envelope', 'INVALID_EVENT')
  })

  it('rejects a time that is a string', () => {
    expectError(seedWith({ ...userAt1, time: '5' }), 'seed event at index 1 has an invalid event envelope', 'INVALID_EVENT')
  })

  it('rejects a missing time', () => {
    const { time: _time, ...rest } = userAt1
    expectError(seedWith(rest), 'seed event at index 1 has an invalid event envelope', 'INVALID_EVENT')
  })

  it('rejects a seq that is not an integer', () => {
    expectError(seedWith({ ...userAt1, seq: 1.5 }), 'seed event at index 1 has an invalid event envelope', 'INVALID_EVENT')
  })

  it('rejects a negative seq', () => {
    expectError(seedWith({ ...userAt1, seq: -1 }), 'seed event at index 1 has an invalid event envelope', 'INVALID_EVENT')
  })

  it('rejects a seq that is a string', () => {
    expectError(seedWith({ ...userAt1, seq: '1' }), 'seed event at index 1 has an invalid event envelope', 'INVALID_EVENT')
  })

  it('rejects missing data', () => {
    const { data: _data, ...rest } = userAt1
    expectError(seedWith(rest), 'seed event at index 1 has an invalid event envelope', 'INVALID_EVENT')
  })

  it('rejects a missing type', () => {
    const { type: _type, ...rest } = userAt1
    expectError(seedWith(rest), 'seed event at index 1 has an invalid event envelope', 'INVALID_EVENT')
  })

  it('rejects a type that is not a string', () => {
    expectError(seedWith({ ...userAt1, type: 7 }), 'seed event at index 1 has an invalid event envelope', 'INVALID_EVENT')
  })

  it('rejects an event that is not a record (null)', () => {
    expectError(seedWith(null), 'seed event at index 1 has an invalid event envelope', 'INVALID_EVENT')
  })

  it('rejects an event that is an array', () => {
    expectError(seedWith(['user/message', 1, 5]), 'seed event at index 1 has an invalid event envelope', 'INVALID_EVENT')
  })

  it('rejects an event that is an array with one slot per envelope field', () => {
    expectError(
      () => newSession('s', [['turn/start', 0, 1, { turn: 1 }, null, null]]),
      'seed event at index 0 has an invalid event envelope',
      'INVALID_EVENT',
    )
  })

  it('rejects an event that is a string', () => {
    expectError(seedWith('turn/start'), 'seed event at index 1 has an invalid event envelope', 'INVALID_EVENT')
  })

  it('accepts time 0 and any string type (plugin vocabulary)', () => {
    const s = newSession('s', [
      { type: 'plugin/ping', seq: 0, time: 0, data: { n: 1 } },
      { type: '', seq: 1, time: 1, data: {} },
    ])
    expect(s.events.map((e) => e.type)).toEqual(['plugin/ping', ''])
    expect(s.events[0].time).toBe(0)
    expect(s.surface.nodes).toEqual([])
  })

  it('accepts any JSON value as data: arrays, strings, numbers', () => {
    const s = newSession('s', [
      { type: 'b', seq: 0, time: 1, data: [1, 'x'] },
      { type: 'c', seq: 1, time: 1, data: 'str' },
      { type: 'd', seq: 2, time: 1, data: 0 },
      { type: 'e', seq: 3, time: 1, data: false },
    ])
    expect(s.events.map((e) => e.data)).toEqual([[1, 'x'], 'str', 0, false])
  })

  it('accepts null as data (present, unlike a missing data key)', () => {
    const s = newSession('s', [{ type: 'plugin/null', seq: 0, time: 1, data: null }])
    expect(s.events[0].data).toBeNull()
    expect(Object.keys(s.events[0])).toContain('data')
  })
})

describe('SPEC 1 seq === index', () => {
  it('rejects a seed whose seq skips ahead', () => {
    const log = basicLog()
    log[2] = { ...log[2], seq: 5 }
    expectError(
      () => newSession('s', log),
      'seed event at index 2 has seq 5 (expected 2); seed must be contiguous from 0',
      'SEQ_NOT_CONTIGUOUS',
    )
  })

  it('rejects a seed that does not start at 0', () => {
    const log = basicLog().map((e) => ({ ...e, seq: e.seq + 1 }))
    expectError(
      () => newSession('s', log),
      'seed event at index 0 has seq 1 (expected 0); seed must be contiguous from 0',
      'SEQ_NOT_CONTIGUOUS',
    )
  })

  it('rejects a repeated seq', () => {
    const log = basicLog()
    log[3] = { ...log[3], seq: 2 }
    expectError(
      () => newSession('s', log),
      'seed event at index 3 has seq 2 (expected 3); seed must be contiguous from 0',
      'SEQ_NOT_CONTIGUOUS',
    )
  })

  it('gives every seeded and appended event seq === index', () => {
    const s = newSession('s', basicLog())
    s.append('turn/start', { turn: 3, trigger: { kind: 'message', source: USER } })
    s.append('user/message', { content: text('x'), source: USER }, { surfaceOp: 'append' })
    s.events.forEach((e, i) => expect(e.seq).toBe(i))
    expect(s.seq).toBe(s.events.length)
  })
})

describe('SPEC 1 envelope of appended events', () => {
  it('has exactly type, seq, time, data for a log-only event', () => {
    const s = new Session('s')
    const e = s.append('turn/start', { turn: 1, trigger: { kind: 'message', source: USER } })
    expect(Object.keys(e).sort()).toEqual(['data', 'seq', 'time', 'type'])
  })

  it('adds surfaceOp, and sourceEventSeqs only when given', () => {
    const s = sessionWithUsers(1)
    const a = s.append('user/message', { content: text('x'), source: USER }, { surfaceOp: 'append' })
    expect(Object.keys(a).sort()).toEqual(['data', 'seq', 'surfaceOp', 'time', 'type'])
    expect(a.surfaceOp).toBe('append')
    const b = s.append('user/message', { content: text('y'), source: USER }, { surfaceOp: 'append', sourceEventSeqs: [0] })
    expect(Object.keys(b).sort()).toEqual(['data', 'seq', 'sourceEventSeqs', 'surfaceOp', 'time', 'type'])
    expect(b.sourceEventSeqs).toEqual([0])
  })

  it('never copies other keys of the intent into the event', () => {
    const s = sessionWithUsers(1)
    const e = appendAny(s, 'user/message', { content: text('x'), source: USER }, { surfaceOp: 'append', extra: 1 })
    expect(Object.keys(e)).not.toContain('extra')
    expect(JSON.parse(s.toJsonl().trimEnd().split('\n').at(-1)!)).not.toHaveProperty('extra')
  })
})
