// SPEC 11 crash-repair load over the conformance cases in fixtures/load/:
// each file placed where the JSONL store looks for it (and, where rows can
// express it, imported into SQLite by a plain SQLite client) loads exactly
// as its `.expect.json` says.

import * as fs from 'node:fs'
import * as path from 'node:path'
import { describe, expect, it } from 'vitest'
import { FIXTURES } from './spec-helpers.js'
import { JsonlSessionStore, rejection, Session, SqliteSessionStore, sqliteTool, tempDir, type AnyEvent } from './fixtures-crash/stores.js'

type Expect =
  | { ok: true; header: Record<string, unknown>; preservedEvents: number; committedBytes: number; closers: AnyEvent[] }
  | { ok: false; error: string }

const LOAD = path.join(FIXTURES, 'load')
const manifest = JSON.parse(fs.readFileSync(path.join(FIXTURES, 'manifest.json'), 'utf8')) as { load: string[] }

function fixture(name: string): { bytes: Buffer; expect: Expect; id: string } {
  const bytes = fs.readFileSync(path.join(LOAD, `${name}.jsonl`))
  const expect = JSON.parse(fs.readFileSync(path.join(LOAD, `${name}.expect.json`), 'utf8')) as Expect
  let id = name
  try {
    const first = JSON.parse(bytes.toString('utf8').split('\n')[0]!)
    if (first.type === 'session' && typeof first.id === 'string') id = first.id
  } catch {
    // no header: the file is placed under the case's name
  }
  return { bytes, expect, id }
}

/** The events a successful load returns: the kept lines, then the closers. */
function expectedEvents(bytes: Buffer, e: Extract<Expect, { ok: true }>): AnyEvent[] {
  const lines = bytes.toString('utf8').split('\n').slice(1, 1 + e.preservedEvents)
  return [...lines.map((l) => JSON.parse(l) as AnyEvent), ...e.closers]
}

describe('SPEC 11 load fixtures: JSONL store', () => {
  it('covers every load case of the manifest', () => {
    expect(manifest.load.length).toBeGreaterThan(10)
  })

  for (const name of manifest.load) {
    it(`loads ${name} as expected`, async () => {
      const { bytes, expect: e, id } = fixture(name)
      const root = tempDir(`fx-${name}`)
      const store = new JsonlSessionStore({ root })
      const file = store.locate({ version: 0, id, createdAt: 0 } as never).path
      fs.mkdirSync(path.dirname(file), { recursive: true })
      fs.writeFileSync(file, bytes)
      try {
        if (e.ok) {
          const loaded = await store.load(id)
          expect(loaded.meta).toEqual(e.header)
          expect(loaded.events).toEqual(expectedEvents(bytes, e))
          // Truncated to the committed bytes, closers appended as JSON.stringify writes them.
          const after = fs.readFileSync(file)
          const closers = e.closers.map((c) => `${JSON.stringify(c)}\n`).join('')
          expect(after.toString('utf8')).toBe(bytes.subarray(0, e.committedBytes).toString('utf8') + closers)
          // A second load (a fresh store, as after a restart) finds nothing to repair.
          const again = new JsonlSessionStore({ root })
          expect(await again.load(id)).toEqual(loaded)
          expect(fs.readFileSync(file).equals(after)).toBe(true)
          await again.close()
        } else {
          expect((await rejection(store.load(id))).message).toBe(e.error)
          expect(fs.readFileSync(file).equals(bytes)).toBe(true)
        }
      } finally {
        await store.close()
        fs.rmSync(root, { recursive: true, force: true })
      }
    })
  }

  it('an open session from a repaired log derives what a seeded session derives', async () => {
    const { bytes, expect: e, id } = fixture('interrupted-turn')
    if (!e.ok) throw new Error('fixture changed')
    const root = tempDir('fx-open')
    const store = new JsonlSessionStore({ root })
    const file = store.locate({ version: 0, id, createdAt: 0 } as never).path
    fs.mkdirSync(path.dirname(file), { recursive: true })
    fs.writeFileSync(file, bytes)
    const session = await store.open(id)
    const events = expectedEvents(bytes, e)
    expect(session.seq).toBe(events.length)
    expect(session.events).toEqual(events)
    expect(session.deriveMessages()).toEqual(new Session(id, events as never).deriveMessages())
    await store.close()
    fs.rmSync(root, { recursive: true, force: true })
  })
})

/**
 * Cases rows cannot express: a file without a header line has no sessions
 * row. (A duplicated seq is stored once; the gap it leaves is reported alike.)
 */
const NOT_ROWS = new Set(['no-header', 'empty-file'])

describe('SPEC 11 load fixtures: SQLite store (rows written by a plain SQLite client)', () => {
  for (const name of manifest.load.filter((n) => !NOT_ROWS.has(n))) {
    it(`loads ${name} as expected`, async () => {
      const { bytes, expect: e, id } = fixture(name)
      const dir = tempDir(`fxdb-${name}`)
      const db = path.join(dir, 'sessions.db')
      sqliteTool(db, { op: 'schema' })
      sqliteTool(db, { op: 'import', id, jsonl: path.join(LOAD, `${name}.jsonl`) })
      const before = sqliteTool(db, { op: 'dump', id })
      const store = new SqliteSessionStore({ path: db })
      try {
        if (e.ok) {
          const loaded = await store.load(id)
          const events = expectedEvents(bytes, e)
          expect(loaded.meta).toEqual(e.header)
          expect(loaded.events).toEqual(events)
          await store.close()
          // The repair is durable: the rows are now exactly the returned events.
          const after = sqliteTool(db, { op: 'dump', id })
          expect(after.rows.map((r: unknown[]) => [r[0], r[1]])).toEqual(events.map((x) => [x.seq, x.type]))
          const again = new SqliteSessionStore({ path: db })
          expect(await again.load(id)).toEqual(loaded)
          await again.close()
        } else {
          const message = (await rejection(store.load(id))).message
          expect(message).toBe(e.error.replace(/ at line (\d+)/, ' at row $1'))
          await store.close()
          expect(sqliteTool(db, { op: 'dump', id })).toEqual(before)
        }
      } finally {
        await store.close()
        fs.rmSync(dir, { recursive: true, force: true })
      }
    })
  }
})
