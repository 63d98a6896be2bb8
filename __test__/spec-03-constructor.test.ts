import { describe, expect, it } from 'vitest'
import { Session, SESSION_FORMAT_VERSION, SessionId } from '../index.js'
import {
  basicLog,
  ev,
  expectError,
  isDeepFrozen,
  manifest,
  newSession,
  text,
  USER,
  type RawEvent,
} from './spec-helpers.js'

describe('SPEC 3 default header', () => {
  it('is {version: 0, id, createdAt: Date.now()}', () => {
    const before = Date.now()
    const s = new Session('alpha')
    const after = Date.now()
    expect(Object.keys(s.header).sort()).toEqual(['createdAt', 'id', 'version'])
    expect(s.header.version).toBe(0)
    expect(s.header.id).toBe('alpha')
    expect(s.header.createdAt).toBeGreaterThanOrEqual(before)
    expect(s.header.createdAt).toBeLessThanOrEqual(after)
    expect(SESSION_FORMAT_VERSION).toBe(0)
  })

  it('is frozen', () => {
    const s = new Session('alpha')
    expect(isDeepFrozen(s.header)).toBe(true)
  })

  it('takes the id from a SessionId as well as a string', () => {
    const s = new Session(SessionId('branded'))
    expect(s.id).toBe('branded')
    expect(s.header.id).toBe('branded')
  })

  it('starts empty', () => {
    const s = new Session('alpha')
    expect(s.id).toBe('alpha')
    expect(s.seq).toBe(0)
    expect(s.events).toEqual([])
    expect(s.surface.nodes).toEqual([])
    expect(s.surface.replaceGeneration).toBe(0)
    expect(s.deriveMessages()).toEqual([])
    expect(s.requestHeader()).toBeUndefined()
  })
})

describe('SPEC 3 given header', () => {
  const full = { version: 0, id: 'a', createdAt: 5, cwd: '/work', parentSession: 'p', seedLength: 0 }

  it('is published as given, detached and deep-frozen', () => {
    const given = { ...full }
    const s = new Session('a', [], given as never)
    expect(s.header).toEqual(full)
    expect(s.header).not.toBe(given)
    expect(isDeepFrozen(s.header)).toBe(true)
    expect(Object.isFrozen(given)).toBe(false)
    given.cwd = '/elsewhere'
    given.createdAt = 99
    expect(s.header).toEqual(full)
  })

  it('is the same object on every read', () => {
    const s = new Session('a', [], full as never)
    expect(s.header).toBe(s.header)
  })

  it('accepts the minimal header', () => {
    const s = new Session('a', undefined, { version: 0, id: SessionId('a'), createdAt: 0 })
    expect(s.header).toEqual({ version: 0, id: 'a', createdAt: 0 })
  })

  it('accepts a fractional createdAt (finite is enough)', () => {
    const s = newSession('a', [], { version: 0, id: 'a', createdAt: 1.5 })
    expect(s.header.createdAt).toBe(1.5)
  })

  it('accepts a header whose seedLength is larger than the seed', () => {
    const s = newSession('a', [], { version: 0, id: 'a', createdAt: 1, seedLength: 12 })
    expect(s.header.seedLength).toBe(12)
  })

  it('rejects version 1', () => {
    expectError(
      () => newSession('a', [], { ...full, version: 1 }),
      'session header version must be 0, got 1',
      'INVALID_HEADER',
    )
  })

  it('rejects a missing version', () => {
    const { version: _v, ...rest } = full
    expectError(() => newSession('a', [], rest), /^session header version must be 0/, 'INVALID_HEADER')
  })

  it('rejects version "0" (a string)', () => {
    expectError(() => newSession('a', [], { ...full, version: '0' }), /^session header version must be 0/, 'INVALID_HEADER')
  })

  it('rejects an id that does not match the session id', () => {
    expectError(
      () => newSession('a', [], { ...full, id: 'b' }),
      'session header id "b" does not match session id "a"',
      'INVALID_HEADER',
    )
  })

  it('rejects a missing id', () => {
    const { id: _id, ...rest } = full
    expectError(() => newSession('a', [], rest), /^session header id .*does not match session id "a"$/, 'INVALID_HEADER')
  })

  it.each([
    ['a string', '5'],
    ['missing', undefined],
    ['null', null],
  ])('rejects createdAt that is %s', (_name, createdAt) => {
    const header: Record<string, unknown> = { version: 0, id: 'a' }
    if (createdAt !== undefined) header.createdAt = createdAt
    expectError(() => newSession('a', [], header), /^session header .*createdAt/, 'INVALID_HEADER')
  })

  it('rejects a relative cwd', () => {
    expectError(() => newSession('a', [], { ...full, cwd: 'relative/dir' }), /^session header .*cwd/, 'INVALID_HEADER')
  })

  it('rejects a cwd that is not a string', () => {
    expectError(() => newSession('a', [], { ...full, cwd: 5 }), /^session header .*cwd/, 'INVALID_HEADER')
  })

  it('rejects a parentSession that is not a string', () => {
    expectError(
      () => newSession('a', [], { ...full, parentSession: 5 }),
      /^session header .*parentSession/,
      'INVALID_HEADER',
    )
  })

  it.each([
    ['negative', -1],
    ['fractional', 1.5],
    ['beyond the safe integers', 2 ** 53],
    ['a string', '3'],
  ])('rejects a seedLength that is %s', (_name, seedLength) => {
    expectError(() => newSession('a', [], { ...full, seedLength }), /^session header .*seedLength/, 'INVALID_HEADER')
  })

  it.each([
    ['an array', () => [0, 'a', 1]],
    ['a class instance', () => new (class H {
      version = 0
      id = 'a'
      createdAt = 1
    })()],
    ['a Map', () => new Map([['version', 0]])],
    ['a record holding undefined', () => ({ ...full, cwd: undefined })],
    ['a record holding NaN', () => ({ ...full, createdAt: NaN })],
  ])('rejects a header that is %s', (_name, make) => {
    expectError(() => newSession('a', [], make()), /^session header/, 'INVALID_HEADER')
  })
})

describe('SPEC 3 seed validation', () => {
  const { invalidSeeds } = manifest()

  it('has the invalid-seed fixtures', () => {
    expect(invalidSeeds.length).toBeGreaterThan(0)
  })

  it.each(invalidSeeds.map((c) => [c.name, c] as const))('rejects the %s seed with its exact message', (_name, c) => {
    expectError(() => newSession('s', c.seed), c.error)
  })

  it('rejects an event that is not lossless JSON, naming its index', () => {
    const log: unknown[] = basicLog()
    log[2] = { ...(log[2] as RawEvent), data: { turn: 1, step: NaN } }
    expectError(
      () => newSession('s', log),
      'seed event at index 2 is not losslessly JSON-serializable',
      'NOT_LOSSLESS_JSON',
    )
  })

  it.each([
    ['a Map', () => new Map()],
    ['undefined', () => undefined],
    ['an event holding undefined', () => ({ ...basicLog()[1], surfaceOp: undefined })],
    ['an event with a Date', () => ({ ...basicLog()[1], time: new Date(5) })],
  ])('rejects a seed event that is %s as not lossless', (_name, make) => {
    const log: unknown[] = basicLog()
    log[1] = make()
    expectError(() => newSession('s', log), 'seed event at index 1 is not losslessly JSON-serializable', 'NOT_LOSSLESS_JSON')
  })

  it('reports the first failing event, whatever fails later', () => {
    const log: unknown[] = basicLog()
    log[1] = { ...(log[1] as RawEvent), extra: true }
    log[3] = { ...(log[3] as RawEvent), data: NaN }
    log[5] = { ...(log[5] as RawEvent), seq: 99 }
    expectError(() => newSession('s', log), 'seed event at index 1 has an invalid event envelope')
  })

  it('reports an earlier surface error before a later lossless error', () => {
    const log: unknown[] = basicLog()
    const { surfaceOp: _op, ...noOp } = log[1] as RawEvent
    log[1] = noOp
    log[4] = new Map()
    expectError(
      () => newSession('s', log),
      'invalid seed event at index 1: session event "user/message" is surface-eligible and requires a surfaceOp marker',
      'INVALID_SURFACE',
    )
  })

  it('wraps every surface failure as "invalid seed event at index N: <reason>"', () => {
    const log = basicLog()
    log[13] = { ...log[13], surfaceOp: { op: 'replace', start: 1, end: 6 }, sourceEventSeqs: [1, 4] }
    expectError(
      () => newSession('s', log),
      'invalid seed event at index 13: surface replace: sourceEventSeqs must include every shadowed surface node; missing 6',
      'INVALID_SURFACE',
    )
  })

  it('checks provider/model on a request/header with an empty provider', () => {
    const log = basicLog()
    log[3] = { ...log[3], data: { header: { config: { provider: '', model: 'm' } }, reason: 'initial' } }
    expectError(() => newSession('s', log), 'seed request/header at index 3 lacks provider/model')
  })

  it('checks provider/model on a request/header without a config', () => {
    const log = basicLog()
    log[3] = { ...log[3], data: { header: {}, reason: 'initial' } }
    expectError(() => newSession('s', log), 'seed request/header at index 3 lacks provider/model')
  })

  it('checks provenance on an assistant/message lacking the model', () => {
    const log = basicLog()
    log[9] = { ...log[9], data: { turn: 1, step: 2, content: text('a2'), provenance: { provider: 'deepseek' } } }
    expectError(() => newSession('s', log), 'seed assistant/message at index 9 lacks provider/model provenance')
  })

  it('constructs nothing and leaves the caller\'s seed as it was when a seed fails', () => {
    const log = basicLog()
    log[7] = { ...log[7], seq: 70 }
    const before = JSON.stringify(log)
    expectError(() => newSession('s', log), 'seed event at index 7 has seq 70 (expected 7); seed must be contiguous from 0')
    expect(JSON.stringify(log)).toBe(before)
    expect(log.some((e) => Object.isFrozen(e) || Object.isFrozen(e.data))).toBe(false)
  })

  it('replays a valid seed and snapshots it: the caller\'s objects stay theirs', () => {
    const log = basicLog()
    const s = newSession('s', log)
    expect(s.events).toEqual(log)
    expect(s.seq).toBe(log.length)
    expect(s.events[1]).not.toBe(log[1])
    expect(Object.isFrozen(log[1])).toBe(false)
    ;(log[1].data as { content: { text: string }[] }).content[0].text = 'mutated'
    log.push(ev(15, 'turn/start', { turn: 3, trigger: { kind: 'message', source: USER } }))
    expect((s.events[1].data as { content: { text: string }[] }).content[0].text).toBe('q1')
    expect(s.events).toHaveLength(15)
    expect(s.deriveMessages()[0]).toEqual({ role: 'user', content: text('q1') })
  })

  it('accepts an empty seed', () => {
    const s = new Session('s', [])
    expect(s.seq).toBe(0)
    expect(s.events).toEqual([])
  })
})

describe('SPEC 3 events property', () => {
  it('is a frozen array of frozen events', () => {
    const s = newSession('s', basicLog())
    s.append('turn/start', { turn: 3, trigger: { kind: 'message', source: USER } })
    expect(Object.isFrozen(s.events)).toBe(true)
    for (const e of s.events) expect(Object.isFrozen(e)).toBe(true)
  })

  it('holds deep-frozen event data, seeded and appended', () => {
    const s = newSession('s', basicLog())
    s.append('user/message', { content: text('x'), source: USER }, { surfaceOp: 'append', sourceEventSeqs: [1] })
    for (const e of s.events) expect(isDeepFrozen(e)).toBe(true)
  })

  it('is the same array object until the next append', () => {
    const s = newSession('s', basicLog())
    const a = s.events
    expect(s.events).toBe(a)
    s.deriveMessages()
    s.requestHeader()
    s.toJsonl()
    expect(s.events).toBe(a)
    s.append('turn/start', { turn: 3, trigger: { kind: 'message', source: USER } })
    const b = s.events
    expect(b).not.toBe(a)
    expect(s.events).toBe(b)
  })

  it('keeps every event object across appends', () => {
    const s = newSession('s', basicLog())
    const a = s.events
    s.append('turn/start', { turn: 3, trigger: { kind: 'message', source: USER } })
    a.forEach((e, i) => expect(s.events[i]).toBe(e))
  })

  it('never grows an array already handed out', () => {
    const s = new Session('s')
    const empty = s.events
    s.append('turn/start', { turn: 1, trigger: { kind: 'message', source: USER } })
    const one = s.events
    s.append('user/message', { content: text('x'), source: USER }, { surfaceOp: 'append' })
    expect(empty).toHaveLength(0)
    expect(one).toHaveLength(1)
    expect(s.events).toHaveLength(2)
    expect(() => (one as unknown[]).push({})).toThrow(TypeError)
  })

  it('reports seq as the log length', () => {
    const s = newSession('s', basicLog())
    expect(s.seq).toBe(15)
    s.append('turn/start', { turn: 3, trigger: { kind: 'message', source: USER } })
    expect(s.seq).toBe(16)
  })

  it('is the same surface object on every read', () => {
    const s = newSession('s', basicLog())
    expect(s.surface).toBe(s.surface)
    expect(s.surface.nodes).toEqual([1, 4, 6, 9, 13])
    expect(s.surface.replaceGeneration).toBe(0)
  })
})
