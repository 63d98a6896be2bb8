// SPEC 11 SQLite interop: a database written by a plain SQLite client
// (Python's sqlite3 module) with the documented schema loads here, and the
// rows this store writes read back correctly in that client.

import * as fs from 'node:fs'
import * as path from 'node:path'
import { describe, expect, it } from 'vitest'
import { header, SqliteSessionStore, sqliteTool, T0, tempDir, turns, type AnyEvent } from './fixtures-crash/stores.js'

function rowOf(e: AnyEvent): unknown[] {
  return [
    e.seq,
    e.type,
    e.time,
    JSON.stringify(e.data),
    e.sourceEventSeqs === undefined ? null : JSON.stringify(e.sourceEventSeqs),
    e.surfaceOp === undefined ? null : JSON.stringify(e.surfaceOp),
  ]
}

describe('SPEC 11 SQLite interop with a plain SQLite client', () => {
  it('loads a database another client created with the documented schema', async () => {
    const dir = tempDir('interop-in')
    const db = path.join(dir, 'foreign.db')
    const events = turns(2)
    const jsonl = path.join(dir, 'log.jsonl')
    const meta = header('foreign', { cwd: '/srv/app', parentSession: 'root' as never, seedLength: 4 })
    fs.writeFileSync(jsonl, [JSON.stringify({ type: 'session', ...meta }), ...events.map((e) => JSON.stringify(e)), ''].join('\n'))
    sqliteTool(db, { op: 'schema' })
    sqliteTool(db, { op: 'import', id: 'foreign', jsonl })
    // Pretty-printed JSON in a column is still one value.
    sqliteTool(db, {
      op: 'exec',
      sql: 'UPDATE events SET data = ? WHERE session_id = ? AND seq = 0',
      params: [JSON.stringify(events[0]!.data, null, 2), 'foreign'],
    })
    const store = new SqliteSessionStore({ path: db })
    expect(await store.list()).toEqual([meta])
    const loaded = await store.load('foreign')
    expect(loaded.meta).toEqual(meta)
    expect(loaded.events).toEqual(events)
    const session = await store.open('foreign')
    expect(session.deriveMessages()).toHaveLength(6)
    await store.close()
    fs.rmSync(dir, { recursive: true, force: true })
  })

  it('writes rows that the other client reads back as the same events', async () => {
    const dir = tempDir('interop-out')
    const db = path.join(dir, 'ours.db')
    const store = new SqliteSessionStore({ path: db })
    const meta = header("it's", { cwd: '/home/x', seedLength: 0 })
    await store.create(meta)
    const events = turns(2)
    await store.append("it's", events as never)
    await store.close()
    const dump = sqliteTool(db, { op: 'dump', id: "it's" })
    expect(dump.userVersion).toBe(4)
    expect(dump.session).toEqual(["it's", 0, T0, '/home/x', null, 0])
    expect(dump.rows).toEqual(events.map(rowOf))
    // Each JSON column parses back to the event's field.
    for (const [i, row] of (dump.rows as unknown[][]).entries()) {
      expect(JSON.parse(row[3] as string)).toEqual(events[i]!.data)
    }
    fs.rmSync(dir, { recursive: true, force: true })
  })

  it('deletes a session with its events through the foreign key', async () => {
    const dir = tempDir('interop-fk')
    const db = path.join(dir, 'fk.db')
    const store = new SqliteSessionStore({ path: db })
    await store.create(header('gone'))
    await store.append('gone', turns(1) as never)
    await store.close()
    sqliteTool(db, { op: 'exec', sql: 'DELETE FROM sessions WHERE id = ?', params: ['gone'] })
    expect(sqliteTool(db, { op: 'exec', sql: 'SELECT count(*) FROM events' })).toEqual([[0]])
    fs.rmSync(dir, { recursive: true, force: true })
  })
})
