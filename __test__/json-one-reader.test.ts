// One reader for every path (issue 10; SPEC 2 and 11): whatever `append`,
// `flush` and the stores accept is read back by the same scanner, with the
// same limits, whether it is resumed, loaded or probed for the torn-tail
// decision. Nesting: 1,000 levels of payload, on write and on read. -0: in no
// spelling. Lone surrogates: kept exactly.

import * as fs from 'node:fs'
import { createRequire } from 'node:module'
import * as path from 'node:path'
import fc from 'fast-check'
import { afterAll, describe, expect, it } from 'vitest'
import { header, JsonlSessionStore, rejection, Session, SqliteSessionStore, sqliteTool, STORES, tempDir } from './fixtures-crash/stores.js'
import type { SessionEvent } from '../index.js'

const nodeRequire = createRequire(__filename)
const { isJsonValue, snapshotJsonValue } = nodeRequire('../index.js') as typeof import('../index.js')

/** The payload nesting limit (index.js `MAX_NESTING`, src/scan.rs `MAX_NESTING`). */
const LIMIT = 1000
const T = 1_760_000_000_000
const USER = { kind: 'user' }
const PROV = { provider: 'deepseek', model: 'deepseek-chat' }

type Live = InstanceType<typeof Session>

/** The untyped append, for plugin types and payloads the typed overloads do not know. */
function appendAny(s: Live, type: string, data: unknown, intent?: unknown): SessionEvent {
  return (s.append as unknown as (...a: unknown[]) => SessionEvent).call(s, type, data, intent)
}

const dirs: string[] = []
afterAll(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true })
})
function dir(label: string): string {
  const d = tempDir(label)
  dirs.push(d)
  return d
}

/** A value nesting `levels` arrays and objects (alternating) around `leaf`. */
function nest(levels: number, leaf: unknown = 1): unknown {
  let v = leaf
  for (let i = 0; i < levels; i++) v = i % 2 ? [v] : { k: v }
  return v
}

/** The same as JSON text, built without recursion (any depth). */
function nestText(levels: number): string {
  return `${'['.repeat(levels)}1${']'.repeat(levels)}`
}

/** A JSONL log: header line, then one line per event (raw texts allowed). */
function jsonl(id: string, lines: (object | string)[]): string {
  const head = JSON.stringify({ type: 'session', version: 0, id, createdAt: T })
  return [head, ...lines.map((l) => (typeof l === 'string' ? l : JSON.stringify(l)))].join('\n') + '\n'
}

const turnStart = (seq: number) => ({ type: 'turn/start', seq, time: T, data: { turn: 1, trigger: { kind: 'message', source: USER } } })
const turnEnd = (seq: number, reason: object = { kind: 'completed' }) => ({ type: 'turn/end', seq, time: T, data: { turn: 1, reason } })

/** The first string inside `v` (depth-first, without recursion), or `q`. */
function firstString(v: unknown): string {
  const todo = [v]
  while (todo.length > 0) {
    const x = todo.pop()
    if (typeof x === 'string') return x
    if (x !== null && typeof x === 'object') todo.push(...Object.keys(x), ...Object.values(x))
  }
  return 'q'
}

/**
 * A closed turn holding `payload` as the data of a plugin event, and its
 * first string as a user message's text and source field.
 */
function sessionWith(id: string, payload: unknown): Live {
  const s = new Session(id, [], header(id))
  s.append('turn/start', { turn: 1, trigger: { kind: 'message', source: USER } })
  appendAny(s, 'plugin/payload', payload)
  const str = firstString(payload)
  s.append('user/message', { content: [{ type: 'text', text: str }], source: { kind: 'user', [str]: str } as never }, { surfaceOp: 'append' })
  s.append('turn/end', { turn: 1, reason: { kind: 'completed' } })
  return s
}

function plain(events: readonly SessionEvent[]): unknown {
  return JSON.parse(JSON.stringify(events))
}

/**
 * Every acknowledged event comes back unchanged: `toJsonl` -> `fromJsonl`,
 * and for each store `flush` -> `load`, `open` -> `toJsonl` -> `fromJsonl`
 * (through a second store object, as another process would read it).
 */
async function expectEveryPathLoadsBack(s: Live, root: string): Promise<void> {
  const want = plain(s.events)
  const text = s.toJsonl()
  expect(plain(Session.fromJsonl(text).events)).toEqual(want)
  expect(Session.fromJsonl(text).toJsonl()).toBe(text)
  for (const { kind, make } of STORES) {
    const where = path.join(root, kind)
    fs.mkdirSync(where, { recursive: true })
    const writer = make(where)
    await writer.flush(s)
    await writer.close()
    const reader = make(where)
    try {
      const loaded = await reader.load(s.id)
      expect(plain(loaded.events as SessionEvent[]), kind).toEqual(want)
      const opened = await reader.open(s.id)
      expect(plain(opened.events), kind).toEqual(want)
      const again = Session.fromJsonl(opened.toJsonl())
      expect(plain(again.events), kind).toEqual(want)
      // A second flush of the same session finds the store holding it.
      expect(await reader.flush(s), kind).toBe(0)
    } finally {
      await reader.close()
    }
  }
}

describe('one nesting limit on write and read: 1,000 levels of payload', () => {
  it('loads back unchanged, on every path, a payload nested exactly 1,000 levels', async () => {
    const payload = nest(LIMIT)
    expect(isJsonValue(payload)).toBe(true)
    await expectEveryPathLoadsBack(sessionWith('deep', { v: nest(LIMIT - 1) }), dir('deep'))
    const s = new Session('deep-array')
    appendAny(s, 'plugin/payload', payload)
    expect(plain(Session.fromJsonl(s.toJsonl()).events)).toEqual(plain(s.events))
  })

  it('refuses a payload nested 1,001 levels at append with NOT_LOSSLESS_JSON, and logs nothing', () => {
    const s = new Session('too-deep')
    s.append('turn/start', { turn: 1, trigger: { kind: 'message', source: USER } })
    const before = s.toJsonl()
    expect(isJsonValue(nest(LIMIT + 1))).toBe(false)
    expect(snapshotJsonValue(nest(LIMIT + 1))).toBeUndefined()
    let error: any
    try {
      appendAny(s, 'plugin/payload', nest(LIMIT + 1))
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(Error)
    expect(error.code).toBe('NOT_LOSSLESS_JSON')
    expect(error.message).toBe('session event "plugin/payload" carries non-JSON-serializable data')
    expect(s.seq).toBe(1)
    expect(s.toJsonl()).toBe(before)
  })

  it('refuses a 10,000-level value with a stable code, never a RangeError', async () => {
    const huge = nest(10_000)
    expect(isJsonValue(huge)).toBe(false)
    expect(snapshotJsonValue(huge)).toBeUndefined()
    const s = new Session('huge')
    expect(() => appendAny(s, 'plugin/payload', huge)).toThrow(
      expect.objectContaining({ code: 'NOT_LOSSLESS_JSON' }),
    )
    const seed = [{ type: 'plugin/payload', seq: 0, time: T, data: huge }]
    expect(() => new Session('huge-seed', seed as never)).toThrow(
      expect.objectContaining({ code: 'NOT_LOSSLESS_JSON', message: 'seed event at index 0 is not losslessly JSON-serializable' }),
    )
    for (const { kind, make } of STORES) {
      const store = make(dir(`huge-${kind}`))
      expect(await rejection(store.append('huge', seed as never))).toEqual({
        code: 'NOT_LOSSLESS_JSON',
        message: 'event at index 0 is not losslessly JSON-serializable',
      })
      expect(await store.list()).toEqual([])
      await store.close()
    }
  })

  it('seeds and stores whole events whose payload nests 1,000 levels: the envelope does not count', async () => {
    const events = [turnStart(0), { type: 'plugin/payload', seq: 1, time: T, data: nest(LIMIT) }, turnEnd(2)]
    const seeded = new Session('seeded', events as never)
    expect(plain(seeded.events)).toEqual(events)
    for (const { kind, make } of STORES) {
      const store = make(dir(`seed-${kind}`))
      await store.create(header('seeded'))
      await store.append('seeded', events as never)
      expect(plain((await store.load('seeded')).events as SessionEvent[]), kind).toEqual(events)
      await store.close()
    }
  })

  it('refuses on read, with a code and the line, a payload nested deeper, and reads a 1,000,000-level line without overflowing the stack', () => {
    for (const levels of [LIMIT + 1, 1_000_000]) {
      const line = `{"type":"plugin/payload","seq":0,"time":${T},"data":${nestText(levels)}}`
      let error: any
      try {
        Session.fromJsonl(jsonl('r', [line]))
      } catch (e) {
        error = e
      }
      expect(error, `${levels}`).toBeInstanceOf(Error)
      expect(error.code).toBe('NOT_LOSSLESS_JSON')
      expect(error.line).toBe(2)
    }
    const ok = `{"type":"plugin/payload","seq":0,"time":${T},"data":${nestText(LIMIT)}}`
    expect(Session.fromJsonl(jsonl('r', [ok])).toJsonl()).toBe(jsonl('r', [ok]))
  })

  it('a store refuses to load a committed line nested deeper than the limit, leaving the file byte-identical', async () => {
    const root = dir('deep-load')
    const store = new JsonlSessionStore({ root })
    const s = sessionWith('d', 1)
    await store.flush(s)
    const file = store.locate(s.header)!.path
    await store.close()
    const lines = fs.readFileSync(file, 'utf8').split('\n')
    lines[2] = lines[2].replace('"data":1', `"data":${nestText(LIMIT + 1)}`)
    fs.writeFileSync(file, lines.join('\n'))
    const before = fs.readFileSync(file)
    const reader = new JsonlSessionStore({ root })
    const r = await rejection(reader.load('d'))
    expect(r.code).toBe('CORRUPT_LOG')
    expect(r.message).toContain('line 2')
    expect(r.message).toContain('not losslessly JSON-serializable')
    expect(fs.readFileSync(file).equals(before)).toBe(true)
    await reader.close()
  })
})

describe('-0 in any spelling is refused, exactly as JSON.parse reads it (SPEC 2)', () => {
  const spellings = [
    '0', '-0', '0.0', '-0.0', '-0e5', '-0E-5', '-0.000e+12', '-0e-0',
    '1e400', '-1e400', '1e-400', '-1e-400', '1E308', '1.7976931348623157e308', '1.7976931348623159e308',
    '-2.4703282292062327e-324', '-2.4703282292062328e-324', '-5e-324', '5e-324', '4.9406564584124654e-324',
    `-0.${'0'.repeat(330)}1`, `-0.${'0'.repeat(300)}1`, `0.${'0'.repeat(330)}1`, `-${'0'.repeat(1)}.${'0'.repeat(22)}1`,
    `1${'0'.repeat(308)}`, `1${'0'.repeat(309)}`, `-1${'0'.repeat(309)}`, '9007199254740993', '-1.5', '123.456e-7',
  ]

  /** Whether the native reader keeps a number spelled `text`, and what it gives back. */
  function readNumber(text: string): { ok: true; value: unknown } | { ok: false; code: unknown; line: unknown } {
    const line = `{"type":"plugin/number","seq":0,"time":${T},"data":{"n":${text}}}`
    try {
      const s = Session.fromJsonl(jsonl('n', [line]))
      return { ok: true, value: (s.events[0].data as { n: unknown }).n }
    } catch (e) {
      const error = e as { code?: unknown; line?: unknown }
      return { ok: false, code: error.code, line: error.line }
    }
  }

  function expectAsJsonParse(text: string): void {
    const parsed = JSON.parse(text) as number
    const keeps = Number.isFinite(parsed) && !Object.is(parsed, -0)
    const read = readNumber(text)
    if (keeps) {
      expect(read, text).toEqual({ ok: true, value: parsed })
      expect(Object.is((read as { value: unknown }).value, parsed), text).toBe(true)
    } else {
      expect(read, text).toEqual({ ok: false, code: 'NOT_LOSSLESS_JSON', line: 2 })
    }
  }

  it('accepts a number exactly when JSON.parse reads it as a finite number other than -0', () => {
    for (const text of spellings) expectAsJsonParse(text)
  })

  it('agrees with JSON.parse on generated spellings near zero and near the largest double', () => {
    const digits = (min: number, max: number) => fc.stringMatching(new RegExp(`^[0-9]{${min},${max}}$`))
    const spelling = fc
      .tuple(
        fc.boolean(),
        fc.oneof(fc.constant('0'), fc.stringMatching(/^[1-9][0-9]{0,20}$/)),
        fc.option(fc.oneof(digits(1, 30), fc.constant('0'.repeat(320) + '1'), fc.constant('0'.repeat(330) + '7'))),
        fc.option(fc.tuple(fc.constantFrom('e', 'E'), fc.constantFrom('', '+', '-'), fc.integer({ min: 0, max: 420 }))),
      )
      .map(([neg, int, frac, exp]) => `${neg ? '-' : ''}${int}${frac === null ? '' : `.${frac}`}${exp === null ? '' : `${exp[0]}${exp[1]}${exp[2]}`}`)
    fc.assert(fc.property(spelling, (text) => expectAsJsonParse(text)), { numRuns: 400, seed: 10 })
  })

  it('refuses -0 on append in every position', () => {
    const s = new Session('z')
    expect(() => appendAny(s, 'plugin/number', { n: [1, { m: -0 }] })).toThrow(expect.objectContaining({ code: 'NOT_LOSSLESS_JSON' }))
    expect(() => appendAny(s, 'plugin/number', -0)).toThrow(expect.objectContaining({ code: 'NOT_LOSSLESS_JSON' }))
    expect(s.seq).toBe(0)
  })

  it('a store refuses a committed -0.000…01 that JSON.parse reads as -0, and leaves the file byte-identical', async () => {
    const root = dir('minus-zero')
    const store = new JsonlSessionStore({ root })
    const s = sessionWith('z', { n: 1 })
    await store.flush(s)
    const file = store.locate(s.header)!.path
    await store.close()
    const text = fs.readFileSync(file, 'utf8').replace('{"n":1}', `{"n":-0.${'0'.repeat(400)}1}`)
    fs.writeFileSync(file, text)
    const reader = new JsonlSessionStore({ root })
    const r = await rejection(reader.load('z'))
    expect(r.code).toBe('CORRUPT_LOG')
    expect(r.message).toContain('not losslessly JSON-serializable')
    expect(fs.readFileSync(file, 'utf8')).toBe(text)
    await reader.close()
  })

  it('the SQLite store refuses a row whose data spells -0 and leaves the rows unchanged', async () => {
    const where = dir('minus-zero-sqlite')
    const db = path.join(where, 'sessions.db')
    const store = new SqliteSessionStore({ path: db })
    await store.flush(sessionWith('z', { n: 1 }))
    await store.close()
    sqliteTool(db, { op: 'exec', sql: "UPDATE events SET data = ? WHERE session_id = 'z' AND seq = 1", params: ['{"n":-0e7}'] })
    const rows = sqliteTool(db, { op: 'dump', id: 'z' })
    const reader = new SqliteSessionStore({ path: db })
    const r = await rejection(reader.load('z'))
    expect(r.code).toBe('CORRUPT_LOG')
    expect(r.message).toContain('not losslessly JSON-serializable')
    await reader.close()
    expect(sqliteTool(db, { op: 'dump', id: 'z' })).toEqual(rows)
  })
})

describe('lone surrogates round-trip exactly', () => {
  const odd = 'a\ud800b\udfffc'

  it('through append, toJsonl and fromJsonl and both stores, in strings, keys, sources and provenance', async () => {
    const s = new Session('lone', [], header('lone'))
    s.append('turn/start', { turn: 1, trigger: { kind: 'message', source: { kind: 'user', tag: '\udc00' } } as never })
    s.append('user/message', { content: [{ type: 'text', text: odd }], source: { kind: 'user', [odd]: odd } as never }, { surfaceOp: 'append' })
    s.append('step/start', { turn: 1, step: 1 })
    s.append('assistant/message', { turn: 1, step: 1, content: [{ type: 'text', text: odd }], provenance: { ...PROV, requestId: '\ud800' } as never }, { surfaceOp: 'append' })
    appendAny(s, 'plugin/payload', { [`\ud800`]: [odd, { '\udfff': '\ud800' }] })
    s.append('step/end', { turn: 1, step: 1 })
    s.append('turn/end', { turn: 1, reason: { kind: 'completed' } })
    // JSON.stringify writes them as \u escapes, which is what every store holds.
    expect(s.toJsonl()).toContain('a\\ud800b\\udfffc')
    await expectEveryPathLoadsBack(s, dir('lone'))
  })

  it('reads a hand-written log whose escapes hold lone surrogates, and gives back the same bytes', () => {
    const lines = [
      '{"type":"turn/start","seq":0,"time":1,"data":{"turn":1,"trigger":{"kind":"message","source":{"kind":"user"}}}}',
      '{"type":"plugin/x","seq":1,"time":1,"data":{"\\ud800":"\\udc00","s":"x\\uD83D"}}',
      '{"type":"turn/end","seq":2,"time":1,"data":{"turn":1,"reason":{"kind":"completed"}}}',
    ]
    const text = jsonl('h', lines)
    const s = Session.fromJsonl(text)
    expect(s.events[1].data).toEqual({ '\ud800': '\udc00', s: 'x\ud83d' })
    expect(s.toJsonl()).toBe(text)
  })
})

describe('a flush compares what a store holds with the live session by the same reader', () => {
  it('finds a stored session unchanged when its texts differ only in key order, with lone surrogates and deep payloads', async () => {
    for (const data of [{ s: '\ud800', t: { '\udc00': 1 } }, { v: nest(LIMIT - 1) }]) {
      // Keys in another order than JSON.stringify of an appended event:
      // SQLite rebuilds the envelope in its own order, so the texts differ.
      const seed = [{ time: T, seq: 0, type: 'plugin/payload', data }]
      for (const { kind, make } of STORES) {
        const where = dir(`reflush-${kind}`)
        const s = new Session('r', seed as never, header('r'))
        const first = make(where)
        expect(await first.flush(s)).toBe(1)
        await first.close()
        const second = make(where)
        expect(await second.flush(s), kind).toBe(0)
        s.append('turn/start', { turn: 1, trigger: { kind: 'message', source: USER } })
        s.append('turn/end', { turn: 1, reason: { kind: 'completed' } })
        expect(await second.flush(s), kind).toBe(2)
        expect(plain((await second.load('r')).events as SessionEvent[]), kind).toEqual(plain(s.events))
        await second.close()
      }
    }
  })
})

describe('the torn-tail decision reads records as the load does', () => {
  it('a final turn/end that JSON.parse reads (a duplicated key) commits what precedes it: the load rejects, the file is byte-identical', async () => {
    const root = dir('dup-key')
    const store = new JsonlSessionStore({ root })
    const s = new Session('t', [], header('t'))
    s.append('turn/start', { turn: 1, trigger: { kind: 'message', source: USER } })
    await store.flush(s)
    const file = store.locate(s.header)!.path
    await store.close()
    const end = JSON.stringify(turnEnd(2)).replace('{"type":"turn/end",', '{"type":"turn/end","type":"turn/end",')
    expect(JSON.parse(end).type).toBe('turn/end')
    fs.appendFileSync(file, `{"type":"step/st\n${end}\n`)
    const before = fs.readFileSync(file)
    const reader = new JsonlSessionStore({ root })
    expect(await rejection(reader.load('t'))).toEqual({
      code: 'CORRUPT_LOG',
      message: 'corrupt session log: unparsable committed event at line 2',
    })
    expect(fs.readFileSync(file).equals(before)).toBe(true)
    await reader.close()
  })

  it('keeps a completed turn whose turn/end nests as deep as a payload may: nothing is cut, nothing is closed', async () => {
    const root = dir('deep-end')
    const store = new JsonlSessionStore({ root })
    const s = new Session('e', [], header('e'))
    s.append('turn/start', { turn: 1, trigger: { kind: 'message', source: USER } })
    // data -> reason -> detail: the payload nests exactly LIMIT levels.
    s.append('turn/end', { turn: 1, reason: { kind: 'completed', detail: nest(LIMIT - 2) } as never })
    await store.flush(s)
    const file = store.locate(s.header)!.path
    await store.close()
    const before = fs.readFileSync(file)
    const reader = new JsonlSessionStore({ root })
    const loaded = await reader.load('e')
    expect(plain(loaded.events as SessionEvent[])).toEqual(plain(s.events))
    expect(fs.readFileSync(file).equals(before)).toBe(true)
    await reader.close()
  })
})

describe('property: whatever append accepts, every path loads back unchanged', () => {
  // Strings of any UTF-16 code units, lone surrogates included.
  const units = fc.string({ unit: fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)), maxLength: 8 })
  const leaf = fc.oneof(
    units,
    fc.double({ noNaN: false }),
    fc.integer(),
    fc.boolean(),
    fc.constant(null),
    fc.constantFrom(-0, 1e-320, -5e-324, Number.MAX_VALUE, Number.MIN_SAFE_INTEGER),
  )
  const { value } = fc.letrec<{ value: unknown }>((tie) => ({
    value: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      leaf,
      fc.array(tie('value'), { maxLength: 4 }),
      fc.dictionary(units, tie('value'), { maxKeys: 4 }),
    ),
  }))
  const payload = fc.oneof(
    value,
    fc.tuple(value, fc.integer({ min: LIMIT - 3, max: LIMIT + 1 })).map(([v, levels]) => nest(levels, v)),
  )

  it('toJsonl -> fromJsonl, and flush -> load -> open -> toJsonl -> fromJsonl on both stores', async () => {
    let n = 0
    const root = dir('prop')
    await fc.assert(
      fc.asyncProperty(payload, async (p) => {
        const id = `p${n++}`
        let s: Live
        try {
          s = sessionWith(id, p)
        } catch (e) {
          // Refused up front, with the code, and only when not lossless.
          expect((e as { code?: unknown }).code).toBe('NOT_LOSSLESS_JSON')
          expect(isJsonValue(p)).toBe(false)
          return
        }
        expect(isJsonValue(p)).toBe(true)
        await expectEveryPathLoadsBack(s, path.join(root, id))
      }),
      { numRuns: 40, seed: 42 },
    )
  })
})
