// Issue 13 interop: rows the PostgreSQL store writes are plain text a SQL
// client reads byte for byte, and rows a plain client (`psql`) inserts with
// the documented schema load here (crash repair included).

import * as fs from 'node:fs'
import { afterEach, describe, expect, it } from 'vitest'
import {
  asEvents,
  header,
  interruptedTurnClosers,
  PG_SKIP,
  PG_URL,
  pgDump,
  pgSchema,
  pgStore,
  psqlExec,
  psqlRows,
  sqlText,
  tempDir,
  turns,
  type AnyEvent,
  type SessionStore,
} from './fixtures-crash/stores.js'

const cleanup: (() => Promise<void> | void)[] = []
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f()
})

function storeFor(label: string): { dir: string; schema: string; open: () => SessionStore } {
  const dir = tempDir(label)
  cleanup.push(() => fs.rmSync(dir, { recursive: true, force: true }))
  const open = () => {
    const s = pgStore(dir)
    cleanup.push(() => s.close())
    return s
  }
  return { dir, schema: pgSchema(dir), open }
}

/** The documented schema (docs/POSTGRES.md, "Schema"), as a plain client creates it. */
function documentedSchema(s: string): string {
  return `CREATE SCHEMA ${s};
CREATE TABLE ${s}.dsh_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE ${s}.sessions (id TEXT PRIMARY KEY, version BIGINT NOT NULL, created_at BIGINT NOT NULL,
  cwd TEXT, parent_session TEXT, seed_length BIGINT);
CREATE TABLE ${s}.events (session_id TEXT NOT NULL REFERENCES ${s}.sessions(id) ON DELETE CASCADE,
  seq BIGINT NOT NULL, type TEXT NOT NULL, time BIGINT NOT NULL, data TEXT NOT NULL,
  source_event_seqs TEXT, surface_op TEXT, PRIMARY KEY (session_id, seq));
CREATE TABLE ${s}.leases (session_id TEXT PRIMARY KEY, holder TEXT NOT NULL, host TEXT NOT NULL,
  pid BIGINT NOT NULL, epoch BIGINT NOT NULL, expires_at TIMESTAMPTZ NOT NULL);
INSERT INTO ${s}.dsh_meta VALUES ('schema_version', '1');
`
}

/** An INSERT of event `e` of session `id`, its JSON columns as `JSON.stringify` writes them unless given. */
function insertEvent(s: string, id: string, e: AnyEvent, data = JSON.stringify(e.data)): string {
  const opt = (v: unknown) => (v === undefined ? 'NULL' : sqlText(JSON.stringify(v)))
  return `INSERT INTO ${s}.events VALUES (${sqlText(id)}, ${e.seq}, ${sqlText(e.type)}, ${e.time}, ${sqlText(data)}, ${opt(e.sourceEventSeqs)}, ${opt(e.surfaceOp)});\n`
}

describe.skipIf(PG_URL === undefined)('issue 13: PostgreSQL interop with a plain client (psql)', () => {
  it('writes each event as the exact JSON text of its columns, which psql reads back unchanged', async () => {
    const { dir, open } = storeFor('pg-interop-out')
    const store = open()
    const meta = header('out', { cwd: '/srv/é', parentSession: 'root' as never, seedLength: 2 })
    const events = turns(2)
    // Text that survives only if nothing re-encodes it: escapes, astral
    // characters, an escaped NUL, number forms JSON.stringify keeps.
    ;(events[1]!.data as { content: { text: string }[] }).content[0]!.text = 'é 😀 \u0000 "q" \\ \n line2 \u2028'
    await store.create(meta)
    await store.append('out', asEvents(events))
    const dump = pgDump(dir, 'out')
    expect(dump.session).toEqual({ id: 'out', version: 0, created_at: meta.createdAt, cwd: '/srv/é', parent_session: 'root', seed_length: 2 })
    expect(dump.rows).toEqual(
      events.map((e) => ({
        session_id: 'out',
        seq: e.seq,
        type: e.type,
        time: e.time,
        data: JSON.stringify(e.data),
        source_event_seqs: e.sourceEventSeqs === undefined ? null : JSON.stringify(e.sourceEventSeqs),
        surface_op: e.surfaceOp === undefined ? null : JSON.stringify(e.surfaceOp),
      })),
    )
    // The client can query inside the JSON too (jsonb cannot hold an escaped NUL: the text can).
    const [row] = psqlRows(`SELECT (data::jsonb #>> '{trigger,source,kind}') AS kind FROM ${pgSchema(dir)}.events WHERE seq = 0`)
    expect(row.kind).toBe('user')
    expect((await open().load('out')).events).toEqual(events)
  })

  it('loads sessions a plain client inserted with the documented schema', async () => {
    const { schema, open } = storeFor('pg-interop-in')
    const events = turns(2)
    let sql = documentedSchema(schema)
    sql += `INSERT INTO ${schema}.sessions VALUES ('foreign', 0, 1760000000000, '/srv/app', 'root', 4);\n`
    // Pretty-printed JSON in a column is still one value.
    for (const e of events) sql += insertEvent(schema, 'foreign', e, e.seq === 0 ? JSON.stringify(e.data, null, 2) : JSON.stringify(e.data))
    psqlExec(sql)
    const store = open()
    const meta = header('foreign', { cwd: '/srv/app', parentSession: 'root' as never, seedLength: 4 })
    expect(await store.list()).toEqual([meta])
    const loaded = await store.load('foreign')
    expect(loaded.meta).toEqual(meta)
    expect(loaded.events).toEqual(events)
  })

  it('repairs a torn tail a plain client left, durably, and refuses a damaged committed row naming it', async () => {
    const { dir, schema, open } = storeFor('pg-interop-torn')
    const events = turns(1).slice(0, 5)
    let sql = documentedSchema(schema)
    sql += `INSERT INTO ${schema}.sessions VALUES ('torn', 0, 1, NULL, NULL, NULL), ('bad', 0, 1, NULL, NULL, NULL);\n`
    for (const e of events) sql += insertEvent(schema, 'torn', e)
    // A last row whose data is not one JSON value: a torn record.
    sql += insertEvent(schema, 'torn', { ...events[4]!, seq: 5 }, '{"turn":1,')
    for (const e of turns(1)) sql += insertEvent(schema, 'bad', e, e.seq === 2 ? '{"turn":1}, "smuggled": 1' : JSON.stringify(e.data))
    psqlExec(sql)
    const store = open()
    const closers = interruptedTurnClosers(asEvents(events))
    const loaded = await store.load('torn')
    expect(loaded.events).toEqual([...events, ...closers])
    // The repair is durable: the torn row is gone and the closers are stored.
    expect(pgDump(dir, 'torn').rows.map((r) => r.seq)).toEqual(loaded.events.map((e) => e.seq))
    await expect(store.load('bad')).rejects.toMatchObject({
      code: 'CORRUPT_LOG',
      message: 'corrupt session log: unparsable committed event at row 3',
    })
  })
})
