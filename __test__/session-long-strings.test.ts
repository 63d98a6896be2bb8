// Payloads with long strings (issue 21): whatever a payload holds
// (escapes, lone surrogates, non-Latin-1 text, duplicate keys, `__proto__`,
// nesting, white space), the value `Session.fromJsonl` or a store `open`
// gives must be the one `JSON.parse` of the line gives (SPEC 2: a payload
// reads back as it was written), key order included, and every text must
// read back byte for byte.

import { createHash } from 'node:crypto'
import * as fs from 'node:fs'
import * as os from 'node:os'
import * as path from 'node:path'
import { Worker } from 'node:worker_threads'
import fc from 'fast-check'
import { afterEach, describe, expect, it } from 'vitest'
import { JsonlSessionStore, Session, SessionId, SqliteSessionStore } from '../index.js'

const dirs: string[] = []
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true })
})

const HEADER = { type: 'session', version: 0, id: SessionId('long-strings'), createdAt: 1 }
/** Where a JSONL store under `root` keeps the session's log (its folder made). */
function logFile(store: JsonlSessionStore): string {
  const file = store.locate(HEADER).path
  fs.mkdirSync(path.dirname(file), { recursive: true })
  return file
}

// ------------------------------------------------------------ JSON texts

/** Pieces of JSON string contents, as text: plain, escaped, non-Latin-1, lone surrogates. */
const piece = fc.constantFrom(
  'a', 'lorem ', 'é', '✓', '😀', '\\n', '\\"', '\\\\', '\\/', '\\t', '\\b', '\\u0000', '\\u00e9', '\\u00E9', '\\u2713', '\\ud800', '\\udc00', '\\ud83d\\ude00', '\\u0041', 'ÿ', '\\u00ff',
)
const stringText = fc.array(piece, { maxLength: 12 }).map((ps) => `"${ps.join('')}"`)
const keyText = fc.constantFrom('"a"', '"b"', '"\\u0061"', '"__proto__"', '"text"', '"✓"', '""')
const ws = fc.constantFrom('', '', ' ', '\t ')

const valueText: fc.Arbitrary<string> = fc.letrec<{ value: string }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    stringText,
    stringText,
    fc.constantFrom('1', '-2.5', '0', 'true', 'null'),
    fc.array(fc.tuple(ws, tie('value'), ws).map((p) => p.join('')), { maxLength: 4 }).map((xs) => `[${xs.join(',')}]`),
    fc
      .array(fc.tuple(ws, keyText, ws, tie('value')).map(([a, k, b, v]) => `${a}${k}${b}:${v}`), { maxLength: 5 })
      .map((ms) => `{${ms.join(',')}}`),
  ),
})).value

/** A surface event's line whose payload carries `meta` and a text, both JSON texts. */
const line = (seq: number, text: string, meta: string) =>
  `{"type":"context/message","seq":${seq},"time":1,"data":{"content":[{"type":"text","text":${text}}],"source":{"kind":"plugin"},"meta":${meta}},"surfaceOp":"append"}`

/**
 * A log whose surface events carry `payloads` ([text, meta] JSON texts);
 * `pad` first puts a non-surface event of ~1.1 MB before them, so that
 * `fromJsonl` reads on its thread (a log shorter than one 1 MiB piece is
 * read at once, handing nothing over).
 */
function logOf(payloads: Array<[string, string]>, pad: boolean): string[] {
  const lines = [JSON.stringify(HEADER)]
  if (pad) lines.push(`{"type":"plugin/pad","seq":0,"time":1,"data":{"pad":"${'x'.repeat(1_100_000)}"}}`)
  for (const [text, meta] of payloads) lines.push(line(lines.length - 1, text, meta))
  return lines
}

/** JSON of `value` with keys in their order (toEqual ignores order). */
const exact = (value: unknown) => JSON.stringify(value)
/** `exact`, as a digest (a failure does not print megabytes). */
const digest = (value: unknown) => createHash('sha256').update(exact(value)).digest('hex')

/** Each surface payload as `JSON.parse` of its line gives it. */
const parsedPayloads = (lines: string[]) => lines.slice(1).map((l) => exact(JSON.parse(l).data))

const payloadsArb = fc.array(fc.tuple(stringText, valueText), { minLength: 1, maxLength: 6 })

describe('long strings read back as JSON.parse gives them', () => {
  it('Session.fromJsonl: every payload is the one JSON.parse of its line gives', () => {
    fc.assert(
      fc.property(payloadsArb, (payloads) => {
        const lines = logOf(payloads, true)
        const text = `${lines.join('\n')}\n`
        const read = Session.fromJsonl(Buffer.from(text))
        const messages = read.deriveMessages()
        const plain = Session.fromJsonl(text)
        expect(read.events.map((e) => exact(e.data))).toEqual(parsedPayloads(lines))
        expect(exact(messages)).toBe(exact(plain.deriveMessages()))
      }),
      { numRuns: 60 },
    )
  })

  it('a store open: the first derive reads every payload as JSON.parse of its line gives it', async () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'dsh-long-strings-'))
    dirs.push(root)
    await fc.assert(
      fc.asyncProperty(payloadsArb, async (payloads) => {
        const lines = logOf(payloads, false)
        const store = new JsonlSessionStore({ root })
        fs.writeFileSync(logFile(store), `${lines.join('\n')}\n`)
        const opened = await store.open(HEADER.id)
        const messages = opened.deriveMessages()
        const plain = Session.fromJsonl(`${lines.join('\n')}\n`)
        expect(exact(messages)).toBe(exact(plain.deriveMessages()))
        expect(opened.events.map((e) => exact(e.data))).toEqual(parsedPayloads(lines))
        await store.close()
      }),
      { numRuns: 40 },
    )
  })

  it('a payload with a multi-megabyte string reads back whole through both paths', async () => {
    const big = `"${'tool output line ✓ \\n'.repeat(150_000)}"`
    const lines = logOf([[big, '{"a":"x"}'], ['"short"', big]], true)
    const text = `${lines.join('\n')}\n`
    const read = Session.fromJsonl(Buffer.from(text))
    expect(read.events.map(digest)).toEqual(lines.slice(1).map((l) => digest(JSON.parse(l))))
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'dsh-long-strings-'))
    dirs.push(root)
    const store = new JsonlSessionStore({ root })
    fs.writeFileSync(logFile(store), text)
    const opened = await store.open(HEADER.id)
    expect(digest(opened.deriveMessages())).toBe(digest(read.deriveMessages()))
    expect(opened.toJsonl() === text).toBe(true)
    await store.close()
  })
})

// Whatever the strings hold, every text must read back byte for byte:
// `toJsonl()`, a fork's, a flush to another store, and `events`. A log of
// 1 MiB or more is compressed (a `Buffer` as it is read, other reads by the
// compressor the next native calls take up).
describe('every text of a log of long strings reads back byte for byte', () => {
  const settled = async (session: Session) => {
    session.deriveMessages()
    await new Promise((resolve) => setTimeout(resolve, 30))
    return session.deriveMessages()
  }
  const readers = {
    'fromJsonl(Buffer)': async (text: string) => Session.fromJsonl(Buffer.from(text)),
    'fromJsonl(string)': async (text: string) => Session.fromJsonl(text),
    'a JSONL store open': async (text: string, root: string) => {
      const store = new JsonlSessionStore({ root })
      fs.writeFileSync(logFile(store), text)
      const opened = await store.open(HEADER.id)
      await store.close()
      return opened
    },
    'a SQLite store open': async (text: string, root: string) => {
      const store = new SqliteSessionStore({ path: path.join(root, 'sessions.db') })
      await store.flush(Session.fromJsonl(text))
      await store.close()
      const reopened = new SqliteSessionStore({ path: path.join(root, 'sessions.db') })
      const opened = await reopened.open(HEADER.id)
      await reopened.close()
      return opened
    },
  }
  it.each(Object.keys(readers))('%s', async (reader) => {
    const read = readers[reader as keyof typeof readers]
    await fc.assert(
      fc.asyncProperty(payloadsArb, async (payloads) => {
        const lines = logOf(payloads, true)
        // A turn around them: a fork is cut where a turn ends.
        lines.push(`{"type":"turn/start","seq":${lines.length - 1},"time":1,"data":{"turn":1,"trigger":{"kind":"message","source":{"kind":"user"}}}}`)
        lines.push(`{"type":"turn/end","seq":${lines.length - 1},"time":1,"data":{"turn":1,"reason":{"kind":"completed"}}}`)
        const text = `${lines.join('\n')}\n`
        const root = fs.mkdtempSync(path.join(os.tmpdir(), 'dsh-kept-once-'))
        dirs.push(root)
        const session = await read(text, root)
        const messages = await settled(session)
        expect(exact(messages)).toBe(exact(Session.fromJsonl(text).deriveMessages()))
        expect(session.toJsonl() === text).toBe(true)
        // A fork has a header of its own; its events are the same texts.
        const events = (jsonl: string) => jsonl.slice(jsonl.indexOf('\n'))
        expect(events(session.fork().toJsonl()) === events(text)).toBe(true)
        expect(session.events.map((e) => exact(e.data))).toEqual(parsedPayloads(lines))
        const other = new JsonlSessionStore({ root: path.join(root, 'other') })
        await other.flush(session)
        await other.close()
        expect(fs.readFileSync(other.locate(HEADER).path, 'utf8') === text).toBe(true)
      }),
      { numRuns: 15 },
    )
  })
})

// A worker that reads such a log, derives and ends (its strings collected
// or its isolate torn down with them alive) must leave the process whole.
describe('long strings across a worker\'s life', () => {
  it('a worker reads a log of long strings, hands back what it derived, and is terminated, three times', async () => {
    const index = path.resolve(__dirname, '..', 'index.js')
    const code = `
      const { parentPort } = require('node:worker_threads')
      const { Session } = require(${JSON.stringify(index)})
      const big = 'tool output ✓ line\\\\n'.repeat(100000)
      const lines = ['{"type":"session","version":0,"id":"w","createdAt":1}',
        '{"type":"plugin/pad","seq":0,"time":1,"data":{"pad":"' + 'x'.repeat(1100000) + '"}}',
        '{"type":"context/message","seq":1,"time":1,"data":{"content":[{"type":"text","text":"' + big + '"}],"source":{"kind":"plugin"}},"surfaceOp":"append"}',
        '{"type":"context/message","seq":2,"time":1,"data":{"content":[{"type":"text","text":"' + big.replaceAll('✓', 'v') + '"}],"source":{"kind":"plugin"}},"surfaceOp":"append"}']
      const text = lines.join('\\n') + '\\n'
      const s = Session.fromJsonl(Buffer.from(text))
      const m = s.deriveMessages()
      parentPort.postMessage({ texts: m.map((x) => x.content[1].text), same: s.toJsonl() === text })
    `
    for (let round = 0; round < 3; round++) {
      const worker = new Worker(code, { eval: true })
      const got = await new Promise<{ texts: string[]; same: boolean }>((resolve, reject) => {
        worker.once('message', resolve)
        worker.once('error', reject)
      })
      await worker.terminate()
      expect(got.same).toBe(true)
      expect(got.texts.map((t) => t.length)).toEqual([1_900_000, 1_900_000])
      expect(got.texts[0].startsWith('tool output ✓ line\n')).toBe(true)
      expect(got.texts[1].endsWith('tool output v line\n')).toBe(true)
    }
  })
})
