// Issue 13: the PostgreSQL store's schema, options and failures. The SPEC 11
// tables live in the given schema, created on first use with a recorded
// version (another version is refused); connections fail with PG_CONNECT
// and statements with PG, within their timeouts: never a hung promise.

import { spawn } from 'node:child_process'
import * as fs from 'node:fs'
import { describe, expect, it } from 'vitest'
import { cli } from './cli-helpers.js'
import {
  asEvents,
  header,
  PG_URL,
  pgSchema,
  pgStore,
  PostgresSessionStore,
  psqlExec,
  psqlRows,
  rejection,
  tempDir,
  turnBatches,
  turns,
  type SessionStore,
  testCleanup,
} from './fixtures-crash/stores.js'

const { cleanup } = testCleanup()

function storeFor(label: string, options: Record<string, unknown> = {}): { dir: string; schema: string; store: SessionStore } {
  const dir = tempDir(label)
  cleanup.push(() => fs.rmSync(dir, { recursive: true, force: true }))
  const store = pgStore(dir, options)
  cleanup.push(() => store.close())
  dirs.set(pgSchema(dir), dir)
  return { dir, schema: pgSchema(dir), store }
}

/** How messages name the test database and a schema in it. */
function named(schema: string): string {
  const url = new URL(PG_URL!)
  return `PostgreSQL database "${url.pathname.slice(1)}" on ${url.hostname}:${url.port} (schema "${schema}")`
}

function thrown(f: () => unknown): { code: string; message: string } {
  try {
    f()
  } catch (error) {
    const e = error as { code?: string; message: string }
    return { code: String(e.code), message: e.message }
  }
  throw new Error('expected a throw')
}

describe.skipIf(PG_URL === undefined)('issue 13: the PostgreSQL schema', () => {
  it('creates sessions, events, leases and dsh_meta in the given schema on first use, with the documented columns', async () => {
    const { schema, store } = storeFor('pg-schema')
    // The constructor connects nothing.
    expect(psqlRows(`SELECT 1 FROM pg_namespace WHERE nspname = '${schema}'`)).toEqual([])
    expect(await store.list()).toEqual([])
    const columns = psqlRows(
      `SELECT table_name AS t, column_name AS c, data_type AS type, is_nullable AS n FROM information_schema.columns
       WHERE table_schema = '${schema}' ORDER BY table_name, ordinal_position`,
    ).map((r) => `${r.t}.${r.c} ${r.type}${r.n === 'NO' ? ' not null' : ''}`)
    expect(columns).toEqual([
      'dsh_meta.key text not null',
      'dsh_meta.value text not null',
      'events.session_id text not null',
      'events.seq bigint not null',
      'events.type text not null',
      'events.time bigint not null',
      'events.data text not null',
      'events.source_event_seqs text',
      'events.surface_op text',
      'leases.session_id text not null',
      'leases.holder text not null',
      'leases.host text not null',
      'leases.pid bigint not null',
      'leases.epoch bigint not null',
      'leases.expires_at timestamp with time zone not null',
      'sessions.id text not null',
      'sessions.version bigint not null',
      'sessions.created_at bigint not null',
      'sessions.cwd text',
      'sessions.parent_session text',
      'sessions.seed_length bigint',
    ])
    expect(psqlRows(`SELECT * FROM ${schema}.dsh_meta`)).toEqual([{ key: 'schema_version', value: '1' }])
    const keys = psqlRows(
      `SELECT tc.table_name AS t, string_agg(kcu.column_name, ',' ORDER BY kcu.ordinal_position) AS cols
       FROM information_schema.table_constraints tc JOIN information_schema.key_column_usage kcu
         ON tc.constraint_name = kcu.constraint_name AND tc.table_schema = kcu.table_schema
       WHERE tc.table_schema = '${schema}' AND tc.constraint_type = 'PRIMARY KEY' GROUP BY tc.table_name ORDER BY 1`,
    )
    expect(keys).toEqual([
      { t: 'dsh_meta', cols: 'key' },
      { t: 'events', cols: 'session_id,seq' },
      { t: 'leases', cols: 'session_id' },
      { t: 'sessions', cols: 'id' },
    ])
  })

  it('refuses a schema of another version, creating nothing in it', async () => {
    const { schema, store } = storeFor('pg-version')
    psqlExec(`CREATE SCHEMA ${schema}; CREATE TABLE ${schema}.dsh_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
      INSERT INTO ${schema}.dsh_meta VALUES ('schema_version', '2');`)
    expect(await rejection(store.list())).toEqual({
      code: 'UNSUPPORTED_VERSION',
      message: `session database ${named(schema)} has schema version 2, incompatible with this build (1)`,
    })
    expect(psqlRows(`SELECT table_name FROM information_schema.tables WHERE table_schema = '${schema}'`)).toEqual([{ table_name: 'dsh_meta' }])
  })

  it('refuses a schema holding tables of another shape with UNSUPPORTED_VERSION, before creating anything in it (issue 19)', async () => {
    const { schema, store } = storeFor('pg-foreign')
    // Someone else's application keeps its own `sessions` table here.
    psqlExec(`CREATE SCHEMA ${schema}; CREATE TABLE ${schema}.sessions (id SERIAL PRIMARY KEY, title TEXT);
      INSERT INTO ${schema}.sessions (title) VALUES ('theirs');`)
    const tables = () => psqlRows(`SELECT table_name FROM information_schema.tables WHERE table_schema = '${schema}' ORDER BY 1`)
    const refused = { code: 'UNSUPPORTED_VERSION', message: `${named(schema)} holds a table "sessions" that is not this store's (id integer, title text); nothing was created in it: use another schema` }
    expect(await rejection(store.list())).toEqual(refused)
    expect(await rejection(store.create(header('s')))).toEqual(refused)
    expect(await rejection(store.load('s'))).toEqual(refused)
    expect(tables()).toEqual([{ table_name: 'sessions' }])
    expect(psqlRows(`SELECT title FROM ${schema}.sessions`)).toEqual([{ title: 'theirs' }])
    // A stamped schema whose table was altered by hand is refused the same way.
    const other = storeFor('pg-altered')
    expect(await other.store.list()).toEqual([])
    await other.store.close()
    psqlExec(`ALTER TABLE ${other.schema}.leases DROP COLUMN pid`)
    const again = pgStore(storeDir(other.schema))
    cleanup.push(() => again.close())
    const altered = await rejection(again.list())
    expect(altered.code).toBe('UNSUPPORTED_VERSION')
    expect(altered.message).toContain(`holds a table "leases" that is not this store's (session_id text, holder text, host text, epoch bigint, expires_at timestamp with time zone)`)
  })

  it('keeps schemas apart: one id in two schemas is two sessions', async () => {
    const a = storeFor('pg-apart-a').store
    const b = storeFor('pg-apart-b').store
    await a.create(header('same', { cwd: '/a' }))
    await a.append('same', asEvents(turns(1)))
    expect(await b.list()).toEqual([])
    await b.create(header('same', { cwd: '/b' }))
    await b.append('same', asEvents(turns(2)))
    expect((await a.load('same')).events).toHaveLength(9)
    expect((await b.load('same')).meta.cwd).toBe('/b')
  })

  it('refuses an id holding U+0000, which PostgreSQL text cannot store, naming it', async () => {
    const { store } = storeFor('pg-nul')
    const refused = { code: 'INVALID_ARGUMENT', message: 'session id "a\\u0000b" contains U+0000, which PostgreSQL text cannot hold' }
    expect(await rejection(store.create(header('a\u0000b')))).toEqual(refused)
    expect(await rejection(store.load('a\u0000b'))).toEqual(refused)
    expect(await rejection(store.append('a\u0000b', asEvents(turns(1))))).toEqual(refused)
  })
})

describe.skipIf(PG_URL === undefined)('issue 13: PostgreSQL store options and failures', () => {
  it('validates its options, naming the one that is wrong', () => {
    const make = (o: unknown) => () => new PostgresSessionStore(o as never)
    expect(thrown(make(undefined))).toEqual({ code: 'INVALID_ARGUMENT', message: 'PostgresSessionStore needs { connectionString: string } (a libpq-style URL)' })
    // One rule for a schema name (Rust's): a string, not empty, no NUL.
    for (const schema of ['', 'a\u0000b', 5, {}]) {
      expect(thrown(make({ connectionString: PG_URL, schema }))).toEqual({ code: 'INVALID_ARGUMENT', message: 'PostgresSessionStore schema must be a non-empty string without NUL' })
    }
    expect(thrown(make({ connectionString: PG_URL, poolSize: 0 }))).toEqual({ code: 'INVALID_ARGUMENT', message: 'PostgresSessionStore poolSize must be an integer from 1 to 1024, got 0' })
    expect(thrown(make({ connectionString: PG_URL, leaseMs: 1.5 }))).toEqual({ code: 'INVALID_ARGUMENT', message: 'PostgresSessionStore leaseMs must be a positive integer of milliseconds, got 1.5' })
    expect(thrown(make({ connectionString: PG_URL, statementTimeoutMs: -1 })).code).toBe('INVALID_ARGUMENT')
    const bad = thrown(make({ connectionString: 'postgres://u@h:notaport/db' }))
    expect(bad.code).toBe('INVALID_ARGUMENT')
    expect(bad.message).toMatch(/^PostgresSessionStore connectionString is not a valid PostgreSQL connection string: /)
  })

  it('rejects with PG_CONNECT when the server refuses or does not answer, within the connect timeout', async () => {
    const closed = new PostgresSessionStore({ connectionString: 'postgres://postgres@127.0.0.1:1/postgres' })
    const refused = await rejection(closed.list())
    expect(refused.code).toBe('PG_CONNECT')
    expect(refused.message).toMatch(/^cannot connect to PostgreSQL database "postgres" on 127\.0\.0\.1:1 \(schema "public"\): /)
    await closed.close()
    // A non-routable address: the connect timeout ends the wait.
    const silent = new PostgresSessionStore({ connectionString: 'postgres://postgres@10.255.255.1:5432/postgres', connectTimeoutMs: 300 })
    const started = Date.now()
    expect((await rejection(silent.load('s'))).code).toBe('PG_CONNECT')
    expect(Date.now() - started).toBeLessThan(5000)
    await silent.close()
  })

  it('rejects a statement that waits past statementTimeoutMs with PG, and keeps working once the wait is over', async () => {
    const { schema, store } = storeFor('pg-timeout', { statementTimeoutMs: 300 })
    await store.create(header('s'))
    await store.append('s', asEvents(turns(1)))
    await store.close()
    // Another client holds the session's lease row locked for a while.
    const holder = spawn('psql', [PG_URL!, '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-c',
      `BEGIN; SELECT 1 FROM ${schema}.leases WHERE session_id = 's' FOR UPDATE; SELECT pg_sleep(1.5); COMMIT;`], { stdio: 'ignore' })
    const done = new Promise((resolve) => holder.on('exit', resolve))
    cleanup.push(() => void holder.kill())
    for (let i = 0; i < 100; i++) {
      const locks = psqlRows(`SELECT 1 FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'leases' AND l.mode = 'RowShareLock'`)
      if (locks.length > 0) break
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    const waiting = pgStore(storeDir(schema), { statementTimeoutMs: 300 })
    cleanup.push(() => waiting.close())
    const started = Date.now()
    // A writer's load takes the lease row (a reader's touches no lease).
    const timedOut = await rejection(waiting.load('s', { write: true }))
    expect(timedOut.code).toBe('PG')
    expect(timedOut.message).toContain(`${named(schema)}: statement timed out after 300 ms`)
    expect(Date.now() - started).toBeLessThan(1400)
    await done
    // The pooled connection is usable again: the same store loads the session.
    expect((await waiting.load('s')).events).toEqual(turns(1))
  })

  it('replaces pooled connections the server closed while they were idle: the next operations succeed', async () => {
    const dir = tempDir('pg-stale')
    cleanup.push(() => fs.rmSync(dir, { recursive: true, force: true }))
    const url = new URL(PG_URL!)
    url.searchParams.set('application_name', `dsh-stale-${process.pid}`)
    const store = new PostgresSessionStore({ connectionString: url.toString(), schema: pgSchema(dir), poolSize: 2 })
    cleanup.push(() => store.close())
    await store.create(header('s'))
    await store.append('s', asEvents(turns(1)))
    // The server ends the store's idle connections (a restart would too).
    await new Promise((resolve) => setTimeout(resolve, 1100))
    const ended = psqlRows(`SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE application_name = 'dsh-stale-${process.pid}'`)
    expect(ended.length).toBeGreaterThan(0)
    expect((await store.load('s')).events).toEqual(turns(1))
    await store.append('s', asEvents(turnBatches(2, 9).flat()))
    expect((await store.load('s')).events).toHaveLength(18)
  })

  it('opens at most poolSize connections, however many operations are in flight', async () => {
    const dir = tempDir('pg-pool')
    cleanup.push(() => fs.rmSync(dir, { recursive: true, force: true }))
    const url = new URL(PG_URL!)
    url.searchParams.set('application_name', `dsh-pool-${process.pid}`)
    const store = new PostgresSessionStore({ connectionString: url.toString(), schema: pgSchema(dir), poolSize: 2 })
    cleanup.push(() => store.close())
    const ids = Array.from({ length: 12 }, (_, i) => `p${i}`)
    for (const id of ids) await store.create(header(id))
    await Promise.all(ids.map((id) => store.append(id, asEvents(turns(1)))))
    const loaded = await Promise.all(ids.map((id) => store.load(id)))
    expect(loaded.every((l) => l.events.length === 9)).toBe(true)
    const open = psqlRows(`SELECT 1 FROM pg_stat_activity WHERE application_name = 'dsh-pool-${process.pid}'`)
    expect(open.length).toBeGreaterThanOrEqual(1)
    expect(open.length).toBeLessThanOrEqual(2)
  })
})

// Issue 29: PostgreSQL truncates names past NAMEDATALEN-1 = 63 bytes, so two
// longer schemas sharing their first 63 bytes would be one schema. Such a
// name is refused by the constructor (and the CLI's reads), before any
// connection: the unreachable server below is never asked.
describe('issue 29: a schema name longer than PostgreSQL keeps', () => {
  const UNREACHABLE = 'postgres://127.0.0.1:1/x'
  const tooLong = (schema: string, bytes: number) => ({
    code: 'INVALID_ARGUMENT',
    message: `PostgresSessionStore schema ${JSON.stringify(schema)} is ${bytes} bytes of UTF-8; PostgreSQL keeps at most 63 bytes of a name (it would truncate this one)`,
  })

  it('accepts a schema of 63 bytes (the store then tries to connect)', async () => {
    const store = new PostgresSessionStore({ connectionString: UNREACHABLE, schema: 's'.repeat(63) })
    expect((await rejection(store.list())).code).toBe('PG_CONNECT')
    await store.close()
  })

  it('takes the default schema (Rust\'s, public) for a schema left out or null: the store then tries to connect', async () => {
    for (const options of [{}, { schema: null }, { schema: undefined }]) {
      const store = new PostgresSessionStore({ connectionString: UNREACHABLE, ...options } as never)
      expect((await rejection(store.list())).code).toBe('PG_CONNECT')
      await store.close()
    }
  })

  it('refuses a schema of 64 bytes with INVALID_ARGUMENT in the constructor, before connecting', () => {
    const schema = 's'.repeat(64)
    expect(thrown(() => new PostgresSessionStore({ connectionString: UNREACHABLE, schema }))).toEqual(tooLong(schema, 64))
  })

  it('counts the bytes of UTF-8, not characters', async () => {
    // 31 characters: 'é' is 2 bytes, so 62 + 2 = 64 bytes.
    const long = 'é'.repeat(31) + 'ab'
    expect(thrown(() => new PostgresSessionStore({ connectionString: UNREACHABLE, schema: long }))).toEqual(tooLong(long, 64))
    const fits = 'é'.repeat(31) + 'a'
    const store = new PostgresSessionStore({ connectionString: UNREACHABLE, schema: fits })
    expect((await rejection(store.list())).code).toBe('PG_CONNECT')
    await store.close()
  })

  it('is refused by the CLI reading a postgres:// address, before connecting', async () => {
    const schema = 'x'.repeat(64)
    const run = await cli(['list', `${UNREACHABLE}?schema=${schema}`, '--json'])
    expect(run.code).toBe(1)
    expect(JSON.parse(run.stderr).error).toMatchObject({ code: 'INVALID_ARGUMENT' })
    expect(JSON.parse(run.stderr).error.message).toContain(tooLong(schema, 64).message)
    const read = await cli(['inspect', `${UNREACHABLE}?schema=${schema}#s`, '--json'])
    expect(read.code).toBe(1)
    expect(JSON.parse(read.stderr).error).toMatchObject({ code: 'INVALID_ARGUMENT' })
  })

  it.skipIf(PG_URL === undefined)('keeps two names sharing their first 63 bytes apart: the 63-byte one works, the longer one is refused', async () => {
    const prefix = `t29_${process.pid}_`.padEnd(63, 'p')
    cleanup.push(() => psqlExec(`DROP SCHEMA IF EXISTS "${prefix}" CASCADE`))
    const short = new PostgresSessionStore({ connectionString: PG_URL!, schema: prefix })
    cleanup.push(() => short.close())
    await short.create(header('s'))
    await short.append('s', asEvents(turns(1)))
    const schema = `${prefix}-second`
    expect(thrown(() => new PostgresSessionStore({ connectionString: PG_URL!, schema }))).toEqual(tooLong(schema, 70))
    expect((await short.load('s')).events).toEqual(turns(1))
    expect(psqlRows(`SELECT nspname FROM pg_namespace WHERE nspname LIKE 't29\\_${process.pid}\\_%'`)).toEqual([{ nspname: prefix }])
  })
})

/** The test directory of a schema made by `storeFor` (its store is closed; a second one opens it). */
const dirs = new Map<string, string>()
function storeDir(schema: string): string {
  const dir = dirs.get(schema)
  if (dir === undefined) throw new Error(`no directory for schema ${schema}`)
  return dir
}
