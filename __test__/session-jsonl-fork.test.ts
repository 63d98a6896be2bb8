import { describe, expect, it } from 'vitest'
import { foldSurface, Session } from '../index.js'
import {
  appendAny,
  basicLog,
  catchError,
  expectError,
  isDeepFrozen,
  manifest,
  newSession,
  readExpected,
  readLog,
  sessionWithUsers,
  stateOf,
  text,
  USER,
} from './spec-helpers.js'

const okLogs = manifest().logs.filter((name) => readExpected(name).ok !== false)
const versioned = okLogs.filter((name) => readLog(name).header.version === 0)

const headerLine = (h: Record<string, unknown>) => JSON.stringify({ type: 'session', ...h })
const jsonl = (lines: unknown[]) => lines.map((l) => (typeof l === 'string' ? l : JSON.stringify(l))).join('\n') + '\n'

describe('JSONL round trip', () => {
  it('covers the fixture logs', () => {
    expect(versioned.length).toBeGreaterThan(60)
  })

  it.each(versioned)('toJsonl() reproduces %s exactly', (name) => {
    const { text } = readLog(name)
    expect(Session.fromJsonl(text).toJsonl()).toBe(text)
    expect(Session.fromJsonl(Buffer.from(text)).toJsonl()).toBe(text)
  })

  it.each(versioned.filter((n) => !n.startsWith('real/')))('a seeded copy of %s writes the same text', (name) => {
    const { text, header, events } = readLog(name)
    const { type: _type, ...rest } = header
    expect(newSession(header.id, events, rest).toJsonl()).toBe(text)
  })

  it('writes the header line then one line per event, with a trailing newline', () => {
    const s = new Session('s', [], { version: 0, id: 's' as never, createdAt: 5, cwd: '/w' })
    expect(s.toJsonl()).toBe('{"type":"session","version":0,"id":"s","createdAt":5,"cwd":"/w"}\n')
    const a = s.append('turn/start', { turn: 1, trigger: { kind: 'message', source: USER } })
    const b = s.append('user/message', { content: text('hi'), source: USER }, { surfaceOp: 'append', sourceEventSeqs: [0] })
    expect(s.toJsonl()).toBe(
      '{"type":"session","version":0,"id":"s","createdAt":5,"cwd":"/w"}\n' + JSON.stringify(a) + '\n' + JSON.stringify(b) + '\n',
    )
  })

  it('round-trips a live session through fromJsonl', () => {
    const s = sessionWithUsers(3)
    s.append('request/header', { header: { config: { provider: 'p', model: 'm' }, system: '' }, reason: 'initial' })
    s.append('context/message', { content: text('sum'), source: { kind: 'c' } }, {
      surfaceOp: { op: 'replace', start: 1, end: 2 },
      sourceEventSeqs: [1, 2],
    })
    const copy = Session.fromJsonl(s.toJsonl())
    expect(stateOf(copy)).toEqual(stateOf(s))
    expect(copy.toJsonl()).toBe(s.toJsonl())
  })

  it('accepts a Uint8Array that is not a Buffer', () => {
    const s = sessionWithUsers(2)
    const bytes = new TextEncoder().encode(s.toJsonl())
    expect(Session.fromJsonl(bytes).deriveMessages()).toEqual(s.deriveMessages())
  })

  it('reads a header-only log as an empty session', () => {
    const s = Session.fromJsonl(headerLine({ version: 0, id: 'e', createdAt: 1 }) + '\n')
    expect(s.id).toBe('e')
    expect(s.seq).toBe(0)
    expect(s.events).toEqual([])
  })

  it('gives a parsed session the same events contract: frozen, deep-frozen, one array until the next append', () => {
    const { text: file, events } = readLog('compaction-middle')
    const s = Session.fromJsonl(file)
    const a = s.events
    expect(a).toEqual(events)
    expect(s.events).toBe(a)
    expect(Object.isFrozen(a)).toBe(true)
    for (const e of a) expect(isDeepFrozen(e)).toBe(true)
    appendAny(s, 'plugin/x', {})
    expect(s.events).not.toBe(a)
    expect(a).toHaveLength(events.length)
    a.forEach((e, i) => expect(s.events[i]).toBe(e))
  })

  it('reads the events of a long parsed session across its parsing slices', () => {
    // `events` of a resumed session is parsed 8192 events at a time: two
    // whole slices and a part of a third, every event in place and frozen.
    const live = new Session('long')
    const n = 8192 * 2 + 17
    for (let i = 0; i < n; i++) appendAny(live, 'plugin/x', { i, text: `event ${i}` })
    const copy = Session.fromJsonl(live.toJsonl())
    const events = copy.events
    expect(events).toHaveLength(n)
    expect(events).toEqual(live.events)
    for (const i of [0, 8191, 8192, 16383, 16384, n - 1]) {
      expect(events[i].seq).toBe(i)
      expect(isDeepFrozen(events[i])).toBe(true)
    }
  })

  it('continues a parsed session with live appends', () => {
    const { text: file, header } = readLog('agent-basic')
    const s = Session.fromJsonl(file)
    const n = s.seq
    s.append('turn/start', { turn: 99, trigger: { kind: 'message', source: USER } })
    const e = s.append('user/message', { content: text('more'), source: USER }, { surfaceOp: 'append' })
    expect(e.seq).toBe(n + 1)
    expect(s.toJsonl()).toBe(file + JSON.stringify(s.events[n]) + '\n' + JSON.stringify(e) + '\n')
    expect(s.id).toBe(header.id)
  })
})

describe('JSONL defects', () => {
  const h = headerLine({ version: 0, id: 'd', createdAt: 1 })
  const e0 = { type: 'turn/start', seq: 0, time: 1, data: { turn: 1, trigger: { kind: 'message', source: USER } } }
  const e1 = { type: 'user/message', seq: 1, time: 2, data: { content: text('q'), source: USER }, surfaceOp: 'append' }
  const e2 = { type: 'turn/end', seq: 2, time: 3, data: { turn: 1, reason: { kind: 'completed' } } }

  it('reports an unparsable line with its line number', () => {
    const error = catchError(() => Session.fromJsonl(jsonl([h, e0, '{"type":"user/mess', e2])))
    expect(error.line).toBe(3)
    expect(typeof error.code).toBe('string')
    expect(error.code).not.toBe('')
  })

  it('reports an invalid event with the seed message and its line number', () => {
    const { surfaceOp: _op, ...noOp } = e1
    const error = expectError(
      () => Session.fromJsonl(jsonl([h, e0, noOp, e2])),
      'invalid seed event at index 1: session event "user/message" is surface-eligible and requires a surfaceOp marker',
      'INVALID_SURFACE',
    )
    expect(error.line).toBe(3)
  })

  it('reports a seq gap with the seed message and its line number', () => {
    const error = expectError(
      () => Session.fromJsonl(jsonl([h, e0, e1, { ...e2, seq: 3 }])),
      'seed event at index 2 has seq 3 (expected 2); seed must be contiguous from 0',
      'SEQ_NOT_CONTIGUOUS',
    )
    expect(error.line).toBe(4)
  })

  it('reports a non-lossless number with its line number', () => {
    const error = catchError(() => Session.fromJsonl(jsonl([h, e0, JSON.stringify(e1).replace('"time":2', '"time":-0')])))
    expect(error.line).toBe(3)
  })

  it('reports an empty text on line 1', () => {
    const error = catchError(() => Session.fromJsonl(''))
    expect(error.line).toBe(1)
  })

  it('reports a first line that is not a header on line 1', () => {
    const error = catchError(() => Session.fromJsonl(jsonl([e0, e1])))
    expect(error.line).toBe(1)
  })

  it('reports a future format version on line 1', () => {
    const error = expectError(
      () => Session.fromJsonl(jsonl([headerLine({ version: 1, id: 'd', createdAt: 1 }), e0])),
      'unsupported session format version 1 for "d" (only v0 is supported)',
    )
    expect(error.line).toBe(1)
  })
})

describe('fork', () => {
  function parent(cwd?: string): Session {
    return newSession('parent', basicLog(), { version: 0, id: 'parent', createdAt: 1, ...(cwd ? { cwd } : {}) })
  }

  it('copies the whole log by default (it must end on a turn/end)', () => {
    const p = parent('/w')
    const before = Date.now()
    const child = p.fork(undefined, 'child')
    const after = Date.now()
    expect(child.id).toBe('child')
    expect(child.events).toEqual(p.events)
    expect(child.seq).toBe(15)
    expect(child.header.version).toBe(0)
    expect(child.header.id).toBe('child')
    expect(child.header.parentSession).toBe('parent')
    expect(child.header.seedLength).toBe(15)
    expect(child.header.cwd).toBe('/w')
    expect(child.header.createdAt).toBeGreaterThanOrEqual(before)
    expect(child.header.createdAt).toBeLessThanOrEqual(after)
  })

  it('copies events 0..=boundary when the boundary is a turn/end', () => {
    const p = parent('/w')
    const child = p.fork(11, 'c')
    expect(child.events).toEqual(p.events.slice(0, 12))
    expect(child.header).toEqual({
      version: 0,
      id: 'c',
      createdAt: child.header.createdAt,
      cwd: '/w',
      parentSession: 'parent',
      seedLength: 12,
    })
    expect(child.surface.nodes).toEqual([1, 4, 6, 9])
    expect(child.surface.replaceGeneration).toBe(0)
    expect(child.deriveMessages()).toEqual(newSession('x', p.events.slice(0, 12)).deriveMessages())
    expect(child.requestHeader()).toEqual(p.requestHeader())
  })

  it('omits cwd when the parent has none', () => {
    const child = parent().fork(11, 'c')
    expect(child.header).not.toHaveProperty('cwd')
    expect(child.header.parentSession).toBe('parent')
  })

  it('gives the child a fresh id of its own when none is given', () => {
    const p = parent()
    const a = p.fork()
    const b = p.fork()
    expect(typeof a.id).toBe('string')
    expect(a.id).not.toBe('')
    expect(a.id).not.toBe('parent')
    expect(a.id).not.toBe(b.id)
    expect(a.header.id).toBe(a.id)
  })

  it('rejects a boundary that is not a turn/end', () => {
    const p = parent()
    for (const boundary of [0, 1, 10, 13]) {
      expectRejectedFork(p, () => p.fork(boundary, 'c'))
    }
  })

  it('rejects the default boundary when the log does not end on a turn/end', () => {
    const p = sessionWithUsers(2)
    expectRejectedFork(p, () => p.fork())
  })

  it('rejects a boundary past the end of the log', () => {
    const p = parent()
    expectRejectedFork(p, () => p.fork(15, 'c'))
    expectRejectedFork(p, () => p.fork(1000, 'c'))
  })

  it('rejects a boundary that is not a non-negative integer', () => {
    const p = parent()
    for (const boundary of [-1, 1.5, NaN]) expectRejectedFork(p, () => p.fork(boundary, 'c'))
  })

  it('keeps replacements of the copied prefix', () => {
    const p = sessionWithUsers(3, 'p')
    p.append('context/message', { content: text('sum'), source: { kind: 'c' } }, {
      surfaceOp: { op: 'replace', start: 1, end: 2 },
      sourceEventSeqs: [1, 2],
    })
    p.append('turn/end', { turn: 1, reason: { kind: 'completed' } })
    const child = p.fork(undefined, 'c')
    expect(child.surface.nodes).toEqual([4, 3])
    expect(child.surface.replaceGeneration).toBe(1)
    expect(foldSurface(child.events).replacements).toEqual(foldSurface(p.events).replacements)
    expect(child.deriveMessages()).toEqual(p.deriveMessages())
  })

  it('continues independently of its parent', () => {
    const p = parent()
    const child = p.fork(11, 'c')
    const parentBefore = stateOf(p)
    child.append('turn/start', { turn: 2, trigger: { kind: 'message', source: USER } })
    const e = child.append('user/message', { content: text('child only'), source: USER }, { surfaceOp: 'append' })
    expect(e.seq).toBe(13)
    expect(child.surface.nodes).toEqual([1, 4, 6, 9, 13])
    expect(stateOf(p)).toEqual(parentBefore)
    const childBefore = stateOf(child)
    p.append('turn/start', { turn: 3, trigger: { kind: 'message', source: USER } })
    p.append('user/message', { content: text('parent only'), source: USER }, { surfaceOp: 'append' })
    expect(stateOf(child)).toEqual(childBefore)
  })

  it('does not share observers with its parent', () => {
    const p = parent()
    const seen: number[] = []
    p.attach({ afterCommit: (event) => void seen.push(event.seq) })
    const child = p.fork(undefined, 'c')
    child.append('turn/start', { turn: 3, trigger: { kind: 'message', source: USER } })
    expect(seen).toEqual([])
  })

  it('forks a parsed session', () => {
    const { text: file } = readLog('compaction-nested')
    const p = Session.fromJsonl(file)
    const last = p.events.map((e) => e.type).lastIndexOf('turn/end')
    const child = p.fork(last, 'c')
    expect(child.events).toEqual(p.events.slice(0, last + 1))
    expect(child.surface.nodes).toEqual(foldSurface(p.events.slice(0, last + 1)).nodes)
  })

  it('writes the child as a JSONL log of its own', () => {
    const p = parent('/w')
    const child = p.fork(11, 'c')
    const lines = child.toJsonl().trimEnd().split('\n')
    expect(lines).toHaveLength(13)
    expect(JSON.parse(lines[0])).toEqual({ type: 'session', ...child.header })
    expect(Session.fromJsonl(child.toJsonl()).events).toEqual(child.events)
  })
})

function expectRejectedFork(p: Session, fn: () => unknown) {
  const before = stateOf(p)
  const error = catchError(fn)
  expect(error.code).toBe('INVALID_BOUNDARY')
  expect(error.message).not.toBe('')
  expect(stateOf(p)).toEqual(before)
}

describe('fromJsonl input forms', () => {
  it('reads an ASCII string, a string with non-ASCII text and their Buffers as the same log', () => {
    for (const t of ['plain ascii', 'café ✓ 𝄞 \u2028 end']) {
      const s = new Session('forms')
      s.append('turn/start', { turn: 1, trigger: { kind: 'message', source: { kind: 'user' } } })
      s.append('user/message', { content: [{ type: 'text', text: t }], source: { kind: 'user' } }, { surfaceOp: 'append' })
      const jsonl = s.toJsonl()
      const fromString = Session.fromJsonl(jsonl)
      const fromBuffer = Session.fromJsonl(Buffer.from(jsonl, 'utf8'))
      const fromBytes = Session.fromJsonl(new Uint8Array(Buffer.from(jsonl, 'utf8')))
      for (const r of [fromString, fromBuffer, fromBytes]) {
        expect(r.events).toEqual(s.events)
        expect(r.deriveMessages()).toEqual(s.deriveMessages())
        expect(r.toJsonl()).toBe(jsonl)
      }
    }
  })
})
