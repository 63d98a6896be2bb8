// The CLI reads a SQLite database as the store does (issue 10, item 6): a
// database whose `user_version` is still 0 but that holds the two tables is
// read by the store (which stamps it and keeps the tables), so `check`,
// `inspect` and `list` read the same sessions, without stamping it.

import * as fs from 'node:fs'
import * as path from 'node:path'
import { describe, expect, it } from 'vitest'
import { cli, stores, tempDir } from './cli-helpers.js'
import { sqliteTool } from './fixtures-crash/stores.js'

const TABLES = [
  `CREATE TABLE sessions (id TEXT PRIMARY KEY, version INTEGER NOT NULL,
    created_at INTEGER NOT NULL, cwd TEXT, parent_session TEXT, seed_length INTEGER) STRICT`,
  `CREATE TABLE events (session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL, type TEXT NOT NULL, time INTEGER NOT NULL, data TEXT NOT NULL,
    source_event_seqs TEXT, surface_op TEXT, PRIMARY KEY (session_id, seq)) STRICT`,
]

/** An unstamped database (user_version 0) holding one balanced session `s`. */
function unstampedDatabase(): string {
  const db = path.join(tempDir('unstamped'), 'sessions.db')
  for (const sql of TABLES) sqliteTool(db, { op: 'exec', sql })
  sqliteTool(db, { op: 'exec', sql: "INSERT INTO sessions VALUES ('s', 0, 1760000000000, NULL, NULL, NULL)" })
  const rows = [
    [0, 'turn/start', '{"turn":1,"trigger":{"kind":"message","source":{"kind":"user"}}}', null],
    [1, 'user/message', '{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}}', '"append"'],
    [2, 'turn/end', '{"turn":1,"reason":{"kind":"completed"}}', null],
  ]
  for (const [seq, type, data, op] of rows) {
    sqliteTool(db, {
      op: 'exec',
      sql: "INSERT INTO events VALUES ('s', ?, ?, 1760000000001, ?, NULL, ?)",
      params: [seq, type, data, op],
    })
  }
  expect(sqliteTool(db, { op: 'dump', id: 's' }).userVersion).toBe(0)
  return db
}

describe('dsh-session on a SQLite database with the tables but user_version 0', () => {
  it('check, inspect and list find the session the store loads, and leave the database unstamped', async () => {
    const db = unstampedDatabase()
    const before = fs.readFileSync(db)
    const check = await cli(['check', `sqlite:${db}#s`])
    expect(check.stderr).toBe('')
    expect(check.code).toBe(0)
    const inspect = await cli(['inspect', `sqlite:${db}#s`, '--json'])
    expect(inspect.code).toBe(0)
    const list = await cli(['list', `sqlite:${db}`, '--json'])
    expect(list.code).toBe(0)
    expect(list.stdout).toContain(`sqlite:${db}#s`)
    // Read-only: not stamped, not changed.
    expect(fs.readFileSync(db).equals(before)).toBe(true)

    // The store reads the same three events.
    const store = new stores.SqliteSessionStore({ path: db })
    const loaded = await store.load('s')
    expect(loaded.events.map((e) => e.type)).toEqual(['turn/start', 'user/message', 'turn/end'])
    await store.close()
  })

  it('still says "not found" for a database without the tables', async () => {
    const db = path.join(tempDir('empty'), 'sessions.db')
    sqliteTool(db, { op: 'exec', sql: 'CREATE TABLE other (x)' })
    const run = await cli(['check', `sqlite:${db}#s`])
    expect(run.code).toBe(1)
    expect(run.stderr).toContain('session "s" not found')
  })
})
