// Shared builders for the store tests (not a test file itself).

import { execFileSync, spawn } from 'node:child_process'
import * as fs from 'node:fs'
import { createRequire } from 'node:module'
import * as os from 'node:os'
import * as path from 'node:path'
import type { DurableSessionStore as SessionStore } from '../../lib/stores.js'
import type { SessionEvent, SessionHeader } from '../../index.js'
import { afterEach } from 'vitest'

// The package as Node loads it (one module instance): the stores check that
// a flushed session is a `Session` of the same instance, and the test
// runner would otherwise load a second copy of index.js for the test file.
const nodeRequire = createRequire(__filename)
const index = nodeRequire('../../index.js') as typeof import('../../index.js')
const stores = nodeRequire('../../lib/stores.js') as typeof import('../../lib/stores.js')
export const { Session, interruptedTurnClosers } = index
export const { JsonlSessionStore, SqliteSessionStore, PostgresSessionStore } = stores
export type JsonlSessionStore = import('../../lib/stores.js').JsonlSessionStore
export type SqliteSessionStore = import('../../lib/stores.js').SqliteSessionStore
export type PostgresSessionStore = import('../../lib/stores.js').PostgresSessionStore

/** The test server's URL (.ci/run starts one); unset: the PostgreSQL tests skip. */
export const PG_URL = process.env.DSH_TEST_PG_URL
export const PG_SKIP = 'PostgreSQL store tests skipped: DSH_TEST_PG_URL is unset (bash .ci/run starts a server and sets it)'

const places = nodeRequire('./places.cjs') as {
  pgSchema: (dir: string) => string
  pgStore: (dir: string, options?: Record<string, unknown>) => SessionStore
  storeOf: (kind: 'jsonl' | 'sqlite' | 'postgres' | 'pgbouncer', dir: string) => SessionStore
}
/** A schema of its own for each test directory, and the store there. */
export const { pgSchema, pgStore } = places
export type { SessionStore }

/** A raw event record (one definition for every test helper). */
export type { RawEvent as AnyEvent } from '../spec-helpers.js'
import type { RawEvent as AnyEvent } from '../spec-helpers.js'

/** A fresh directory under the OS temp dir. */
export function tempDir(label: string): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), `dsh-store-${label}-`))
}

/**
 * For a test file: `cleanup` runs after each test, last registered first;
 * `dirFor(label)` makes a temporary directory removed then.
 */
export function testCleanup(): { cleanup: (() => Promise<void> | void)[]; dirFor: (label: string) => string } {
  const cleanup: (() => Promise<void> | void)[] = []
  afterEach(async () => {
    for (const f of cleanup.splice(0).reverse()) await f()
  })
  const dirFor = (label: string): string => {
    const dir = tempDir(label)
    cleanup.push(() => fs.rmSync(dir, { recursive: true, force: true }))
    return dir
  }
  return { cleanup, dirFor }
}

/** How each store is made in a directory; the contract suite runs over both. */
export const STORES = [
  { kind: 'jsonl' as const, make: (dir: string): SessionStore => places.storeOf('jsonl', dir) },
  { kind: 'sqlite' as const, make: (dir: string): SessionStore => places.storeOf('sqlite', dir) },
  // One schema per test directory; absent when no server is configured.
  ...(PG_URL === undefined
    ? []
    : [{ kind: 'postgres' as const, make: (dir: string): SessionStore => places.storeOf('postgres', dir) }]),
]
if (PG_URL === undefined) console.warn(PG_SKIP)

/** PgBouncer in transaction mode in front of the test server (.ci/run starts it); unset: those runs skip. */
export const PGBOUNCER_URL = process.env.DSH_TEST_PGBOUNCER_URL
/**
 * The PostgreSQL store through PgBouncer (issue 19): the contract, lease and
 * two-writer suites run over it as well as over STORES.
 */
export const POOLER_STORES =
  PG_URL === undefined || PGBOUNCER_URL === undefined
    ? []
    : [{ kind: 'pgbouncer' as const, make: (dir: string): SessionStore => places.storeOf('pgbouncer', dir) }]
if (PG_URL !== undefined && PGBOUNCER_URL === undefined) console.warn('PgBouncer runs skipped: DSH_TEST_PGBOUNCER_URL is unset (bash .ci/run starts one)')
export type StoreKind = (typeof STORES)[number]['kind'] | (typeof POOLER_STORES)[number]['kind']
/** Whether a store kind is the PostgreSQL store (directly or through PgBouncer). */
export const isPostgres = (kind: StoreKind): boolean => kind === 'postgres' || kind === 'pgbouncer'

const turnsModule = nodeRequire('./turns.cjs') as {
  T0: number
  turnBatches: (turn: number, seq: number, text?: string) => AnyEvent[][]
  rng: (seed: number) => () => number
}
export const T0 = turnsModule.T0
/** Seeded random numbers (mulberry32), the same in the test and its child processes. */
export const rng = turnsModule.rng

export function header(id: string, extra: Partial<SessionHeader> = {}): SessionHeader {
  return { version: 0, id, createdAt: T0, ...extra } as SessionHeader
}

/**
 * One tool-using turn starting at `seq`, as three batches: the prompt, the
 * model's tool call, and the result with the turn's end.
 */
export const turnBatches = turnsModule.turnBatches

/** `n` balanced turns from seq 0. */
export function turns(n: number): AnyEvent[] {
  const out: AnyEvent[] = []
  for (let t = 1; t <= n; t++) out.push(...turnBatches(t, out.length).flat())
  return out
}

export function asEvents(events: AnyEvent[]): SessionEvent[] {
  return events as unknown as SessionEvent[]
}

/** Run one command of the plain SQLite client (Python's sqlite3). */
export function sqliteTool(db: string, command: Record<string, unknown>): any {
  const out = execFileSync('python3', [path.join(__dirname, 'sqlite_tool.py'), db], {
    input: JSON.stringify(command),
    encoding: 'utf8',
  })
  return out.length === 0 ? null : JSON.parse(out)
}

/** A rejection's `{ code, message }`. */
export async function rejection(promise: Promise<unknown>): Promise<{ code: string; message: string }> {
  try {
    await promise
  } catch (error) {
    const e = error as { code?: string; message: string }
    return { code: String(e.code), message: e.message }
  }
  throw new Error('expected a rejection')
}

/** The rows `sql` selects, through the plain PostgreSQL client (`psql`), as JSON objects. */
export function psqlRows(sql: string): any[] {
  const out = execFileSync('psql', [PG_URL ?? '', '-X', '-A', '-t', '-q', '-v', 'ON_ERROR_STOP=1', '-c', `SELECT coalesce(json_agg(r), '[]') FROM (${sql}) r`], { encoding: 'utf8', maxBuffer: 1 << 28 })
  return JSON.parse(out)
}

/** A session as the PostgreSQL store of `dir` holds it, read with `psql`: its row, its events' rows, its lease row. */
export function pgDump(dir: string, id: string): { session: unknown; rows: any[]; lease: unknown } {
  const s = pgSchema(dir)
  const lit = `'${id.replaceAll("'", "''")}'`
  return {
    session: psqlRows(`SELECT * FROM ${s}.sessions WHERE id = ${lit}`)[0],
    rows: psqlRows(`SELECT * FROM ${s}.events WHERE session_id = ${lit} ORDER BY seq`),
    lease: psqlRows(`SELECT * FROM ${s}.leases WHERE session_id = ${lit}`)[0],
  }
}

/** Run SQL statements through `psql` (stops at the first error, which throws). */
export function psqlExec(sql: string): void {
  execFileSync('psql', [PG_URL ?? '', '-X', '-q', '-v', 'ON_ERROR_STOP=1'], { input: sql, encoding: 'utf8', stdio: ['pipe', 'pipe', 'pipe'] })
}

/** `text` as an SQL string literal (dollar-quoted: kept byte for byte). */
export function sqlText(text: string): string {
  if (text.includes('$dsh$')) throw new Error('sqlText: text contains the quote tag')
  return `$dsh$${text}$dsh$`
}


/** A fixture child process (writer.cjs, reader.cjs) and what it printed. */
export interface Child {
  /** The events of its `ACK` lines, in order. */
  acked: AnyEvent[]
  /** The logs of its `VIEW` lines. */
  views: AnyEvent[][]
  stderr: string
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  /** SIGKILL it, if it still runs. */
  kill: () => void
}

/** Spawn `script` with `args` under this Node, collecting its `ACK` batches and `VIEW`s. */
export function spawnChild(script: string, args: string[]): Child {
  const proc = spawn(process.execPath, [script, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
  const out: Child = {
    acked: [],
    views: [],
    stderr: '',
    exit: new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal }))),
    kill: () => {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL')
    },
  }
  let buffered = ''
  proc.stdout.setEncoding('utf8')
  proc.stdout.on('data', (chunk: string) => {
    buffered += chunk
    for (let nl = buffered.indexOf('\n'); nl !== -1; nl = buffered.indexOf('\n')) {
      const line = buffered.slice(0, nl)
      buffered = buffered.slice(nl + 1)
      if (line.startsWith('ACK ')) out.acked.push(...(JSON.parse(line.slice(4)) as AnyEvent[]))
      if (line.startsWith('VIEW ')) out.views.push(JSON.parse(line.slice(5)) as AnyEvent[])
    }
  })
  proc.stderr.on('data', (chunk) => (out.stderr += chunk))
  return out
}
