// SQLite rows with column types the schema does not give them (issue 10): a
// table made by hand without STRICT can hold a REAL or TEXT seq or time. A
// load refuses that as corruption naming the row, and changes nothing,
// rather than dropping the row as a torn tail.

import * as fs from 'node:fs'
import * as path from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { rejection, sqliteTool, SqliteSessionStore, T0, tempDir, turns } from './fixtures-crash/stores.js'

const cleanup: (() => Promise<void> | void)[] = []
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f()
})

/** A schema-4 database whose tables are not STRICT, holding turns(1) of "s". */
function handMade(): string {
  const dir = tempDir('sqlite-odd')
  cleanup.push(() => fs.rmSync(dir, { recursive: true, force: true }))
  const db = path.join(dir, 'hand.db')
  const exec = (sql: string, params: unknown[] = []) => sqliteTool(db, { op: 'exec', sql, params })
  exec('CREATE TABLE sessions (id TEXT PRIMARY KEY, version INTEGER NOT NULL, created_at INTEGER NOT NULL, cwd TEXT, parent_session TEXT, seed_length INTEGER)')
  exec('CREATE TABLE events (session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE, seq INTEGER NOT NULL, type TEXT NOT NULL, time INTEGER NOT NULL, data TEXT NOT NULL, source_event_seqs TEXT, surface_op TEXT, PRIMARY KEY (session_id, seq))')
  exec('PRAGMA user_version = 4')
  exec('INSERT INTO sessions (id, version, created_at) VALUES (?, 0, ?)', ['s', T0])
  for (const e of turns(1)) {
    exec('INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?)', [
      's', e.seq, e.type, e.time, JSON.stringify(e.data),
      e.sourceEventSeqs === undefined ? null : JSON.stringify(e.sourceEventSeqs),
      e.surfaceOp === undefined ? null : JSON.stringify(e.surfaceOp),
    ])
  }
  return db
}

describe('sqlite store: odd column types', () => {
  it('loads the hand-made table as long as its values have the schema\'s types', async () => {
    const db = handMade()
    const store = new SqliteSessionStore({ path: db })
    cleanup.push(() => store.close())
    expect((await store.load('s')).events).toEqual(turns(1))
  })

  for (const [what, sql, message] of [
    ['a REAL seq after the last turn/end', 'INSERT INTO events VALUES (\'s\', 9.5, \'x\', 1, \'{}\', NULL, NULL)', 'corrupt session log: row 10 of session "s" has a REAL seq column (9.5); the events table holds INTEGER there'],
    ['a REAL time in the committed region', 'UPDATE events SET time = 1.25 WHERE seq = 3', 'corrupt session log: row 4 of session "s" has a REAL time column (1.25); the events table holds INTEGER there'],
    ['a TEXT time on the last row', 'UPDATE events SET time = \'late\' WHERE seq = 8', 'corrupt session log: row 9 of session "s" has a TEXT time column; the events table holds INTEGER there'],
  ] as const) {
    it(`refuses ${what} as corruption naming the row, and changes nothing`, async () => {
      const db = handMade()
      sqliteTool(db, { op: 'exec', sql })
      const before = sqliteTool(db, { op: 'dump', id: 's' })
      const store = new SqliteSessionStore({ path: db })
      cleanup.push(() => store.close())
      expect(await rejection(store.load('s'))).toEqual({ code: 'CORRUPT_LOG', message })
      expect(sqliteTool(db, { op: 'dump', id: 's' })).toEqual(before)
    })
  }
})
