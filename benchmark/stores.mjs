// Durable stores (SPEC 11), side by side with plain Node in one run:
//   open a stored session + its first deriveMessages()  vs  JSON.parse of every JSONL line
//   flush the workload turn by turn (one durable batch per turn)  vs  fs append + fsync per
//     batch (synchronous: it blocks the event loop), the same through fs.promises (off the
//     main thread, as the stores work), and better-sqlite3 prepared INSERTs in one transaction per batch (when installed)
//   the longest event-loop pause (1 ms interval timer) while opening and while flushing,
//     measured in a child process that holds only what an application would (one warm-up
//     open first); GC time inside a gap is shown apart
// Times are medians; fsync times drift on a shared machine, so the flush runs interleave
// ours and the baselines. Only the ratios are meant to be compared.
// --postgres-only: the PostgreSQL store against node-postgres (`pg`, a dev dependency) doing
// the same work on the same server: open + first derive vs one SELECT of the session's rows
// and JSON.parse of each event; flush turn by turn vs one transaction per turn holding one
// `unnest` INSERT of the turn's events. The server is DSH_BENCH_PG_URL (a throwaway schema
// is used and dropped), or else a throwaway local one started here with fsync on
// (PostgreSQL 15 binaries, as the tests use; fsync and synchronous_commit at their defaults).
//
//   npm run build && node benchmark/stores.mjs [events=100000]
//   node benchmark/stores.mjs --postgres-only [events=100000]
//   DSH_BENCH_PG_URL=postgres://… node benchmark/stores.mjs --postgres-only [events]

import { execFileSync, spawn } from 'node:child_process'
import * as fs from 'node:fs'
import { createRequire } from 'node:module'
import * as os from 'node:os'
import * as path from 'node:path'
import { PerformanceObserver } from 'node:perf_hooks'
import { fileURLToPath } from 'node:url'
import { SQLITE_SCHEMA } from './lib/big-sessions.mjs'

const require = createRequire(import.meta.url)
const here = path.dirname(fileURLToPath(import.meta.url))
const self = fileURLToPath(import.meta.url)
const { Session } = require('../index.js')
const { JsonlSessionStore, SqliteSessionStore, PostgresSessionStore } = require('../lib/stores.js')
const { generateOps, toEvents } = await import(path.resolve(here, '../test-data/bench/workload.mjs'))

const PAUSES = process.argv[2] === '--pauses'
const PG_ONLY = process.argv[2] === '--postgres-only'
let PG_URL = process.env.DSH_BENCH_PG_URL
const N = Number(PAUSES ? process.argv[4] : ((PG_ONLY ? process.argv[3] : process.argv[2]) ?? 100_000))
const OPEN_RUNS = 5
const FLUSH_RUNS = 3
const ID = 'bench-session'
const HEADER = { version: 0, id: ID, createdAt: 1_700_000_000_000, cwd: '/home/dev/project' }

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const ms = (x) => x.toFixed(1)
const tmp = (label) => fs.mkdtempSync(path.join(os.tmpdir(), `dsh-bench-${label}-`))
const jsonlMake = (dir) => new JsonlSessionStore({ root: dir })
const sqliteMake = (dir) => new SqliteSessionStore({ path: path.join(dir, 'sessions.db') })

// ---------------------------------------------------------------- PostgreSQL peak (child process)

// `--pg-peak {url, schema, who}`: the RSS an open + first derive adds at its
// peak, in a process holding nothing else (`who`: ours, or node-postgres
// SELECT + JSON.parse per event).
if (process.argv[2] === '--pg-peak') {
  const { url, schema, who } = JSON.parse(process.argv[3])
  const rss0 = process.memoryUsage.rss()
  let count
  if (who === 'ours') {
    const store = new PostgresSessionStore({ connectionString: url, schema })
    const session = await store.open(ID)
    count = session.deriveMessages().length > 0 ? session.seq : 0
    await store.close()
  } else {
    const client = new (require('pg').Client)({ connectionString: url })
    await client.connect()
    count = (await pgReadEvents(client, schema)).length
    await client.end()
  }
  console.log(JSON.stringify({ count, peak: process.resourceUsage().maxRSS * 1024 - rss0 }))
  process.exit(0)
}

// ---------------------------------------------------------------- workload

const { ops } = generateOps(N)
/** Op index ranges of one turn each (the last one may be cut short). */
const turns = []
for (let from = 0, i = 0; i < ops.length; i++) {
  if (ops[i].type === 'turn/end' || i === ops.length - 1) {
    turns.push([from, i + 1])
    from = i + 1
  }
}

function appendOps(session, from, to) {
  for (let i = from; i < to; i++) {
    const { type, data, opts } = ops[i]
    if (opts === undefined) session.append(type, data)
    else session.append(type, data, opts)
  }
}

/** One turn-by-turn flush of the workload into a fresh store; `onWindow(t0, t1)` sees each flush. */
async function flushTurns(make, onWindow = () => {}) {
  const dir = tmp('flush')
  const store = make(dir)
  const session = new Session(ID, [], HEADER)
  let sum = 0
  let written = 0
  for (const [from, to] of turns) {
    appendOps(session, from, to)
    // Let the timer catch up on the app's own appends: the window is the flush alone.
    await new Promise((resolve) => setImmediate(resolve))
    const t0 = performance.now()
    written += await store.flush(session)
    const t1 = performance.now()
    sum += t1 - t0
    onWindow(t0, t1)
  }
  if (written !== N) throw new Error(`flushed ${written} of ${N}`)
  await store.close()
  fs.rmSync(dir, { recursive: true, force: true })
  return sum
}

// ---------------------------------------------------------------- pauses (child process)

if (PAUSES) {
  const dir = process.argv[3]
  const gcs = []
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) gcs.push([e.startTime, e.startTime + e.duration])
  }).observe({ entryTypes: ['gc'] })
  const ticks = []
  const timer = setInterval(() => ticks.push(performance.now()), 1)
  const windows = { openJsonl: [], openSqlite: [], flushJsonl: [], flushSqlite: [], flushFs: [], bigJsonl: [], bigSqlite: [] }
  const track = (name) => (t0, t1) => windows[name].push([t0, t1])
  for (const [name, make] of [['openJsonl', jsonlMake], ['openSqlite', sqliteMake]]) {
    const store = make(dir)
    await store.open(ID) // warm-up: the first call compiles the JS path
    for (let r = 0; r < OPEN_RUNS; r++) {
      const t0 = performance.now()
      await store.open(ID)
      track(name)(t0, performance.now())
    }
    await store.close()
  }
  // Each phase starts from a collected heap: V8 marks incrementally on
  // the main thread while it waits for I/O, so one phase's garbage (a
  // 100k-event session) would otherwise pause the next phase's windows.
  globalThis.gc()
  await flushTurns(jsonlMake, track('flushJsonl'))
  globalThis.gc()
  await flushTurns(sqliteMake, track('flushSqlite'))
  globalThis.gc()
  {
    // The same turns written by plain Node off the main thread (fs.promises
    // write + sync per batch): what the machine itself adds to a pause.
    const fsDir = tmp('fsp')
    const fh = await fs.promises.open(path.join(fsDir, 'log.jsonl'), 'a')
    const evs = toEvents(ops)
    for (const [from, to] of turns) {
      await new Promise((resolve) => setImmediate(resolve))
      const t0 = performance.now()
      await fh.write(`${evs.slice(from, to).map((e) => JSON.stringify(e)).join('\n')}\n`)
      await fh.sync()
      track('flushFs')(t0, performance.now())
    }
    await fh.close()
    fs.rmSync(fsDir, { recursive: true, force: true })
  }
  for (const [name, make] of [['bigJsonl', jsonlMake], ['bigSqlite', sqliteMake]]) {
    globalThis.gc()
    const flushDir = tmp('big')
    const store = make(flushDir)
    const session = new Session(ID, [], HEADER)
    appendOps(session, 0, ops.length)
    session.deriveMessages() // hands every event's text to the native log first
    const t0 = performance.now()
    await store.flush(session)
    track(name)(t0, performance.now())
    await store.close()
    fs.rmSync(flushDir, { recursive: true, force: true })
  }
  clearInterval(timer)
  await new Promise((resolve) => setTimeout(resolve, 100)) // late GC entries
  const gcWithin = (a, b) => gcs.reduce((sum, [s, e]) => sum + Math.max(0, Math.min(b, e) - Math.max(a, s)), 0)
  const out = {}
  for (const [name, list] of Object.entries(windows)) {
    let raw = 0
    let lessGc = 0
    for (const [t0, t1] of list) {
      let last = t0
      for (const t of [...ticks.filter((t) => t > t0 && t < t1), t1]) {
        raw = Math.max(raw, t - last)
        lessGc = Math.max(lessGc, t - last - gcWithin(last, t))
        last = t
      }
    }
    out[name] = [raw, lessGc]
  }
  process.stdout.write(JSON.stringify(out))
  process.exit(0)
}

// ---------------------------------------------------------------- throughput (this process)

const events = toEvents(ops)
const jsonlText = `${JSON.stringify({ type: 'session', ...HEADER })}\n${events.map((e) => JSON.stringify(e)).join('\n')}\n`

let Database
try {
  Database = require('better-sqlite3')
} catch {
  Database = undefined
}

/** A directory holding the workload as a JSONL log and in a SQLite database, both repaired once. */
async function storedWorkload() {
  const dir = tmp('stored')
  const jsonl = jsonlMake(dir)
  const file = jsonl.locate(HEADER).path
  fs.mkdirSync(path.dirname(file), { recursive: true })
  fs.writeFileSync(file, jsonlText)
  // The workload's last turn is cut short: the first open repairs it durably.
  await jsonl.open(ID)
  await jsonl.close()
  const sqlite = sqliteMake(dir)
  await sqlite.create(HEADER)
  for (const [from, to] of turns) await sqlite.append(ID, events.slice(from, to))
  await sqlite.open(ID)
  await sqlite.close()
  return dir
}

async function openAndDerive(make, dir) {
  const store = make(dir)
  const times = []
  for (let r = 0; r < OPEN_RUNS; r++) {
    const t0 = performance.now()
    const session = await store.open(ID)
    if (session.deriveMessages().length === 0) throw new Error('nothing derived')
    times.push(performance.now() - t0)
  }
  await store.close()
  return median(times)
}

function parseEveryLine() {
  const times = []
  for (let r = 0; r < OPEN_RUNS; r++) {
    const t0 = performance.now()
    const lines = jsonlText.split('\n')
    const out = new Array(lines.length)
    for (let i = 0; i < lines.length; i++) if (lines[i].length > 0) out[i] = JSON.parse(lines[i])
    times.push(performance.now() - t0)
    if (out.length < N) throw new Error('short parse')
  }
  return median(times)
}

function fsAppendFsync() {
  const dir = tmp('fs')
  const fd = fs.openSync(path.join(dir, 'log.jsonl'), 'a')
  let sum = 0
  turns.forEach(([from, to], t) => {
    const t0 = performance.now()
    let text = t === 0 ? `${JSON.stringify({ type: 'session', ...HEADER })}\n` : ''
    for (let i = from; i < to; i++) text += `${JSON.stringify(events[i])}\n`
    fs.writeSync(fd, text)
    fs.fsyncSync(fd)
    sum += performance.now() - t0
  })
  fs.closeSync(fd)
  fs.rmSync(dir, { recursive: true, force: true })
  return sum
}

/** The same writes off the main thread, as a non-blocking app would make them (fs.promises). */
async function fsPromisesAppend() {
  const dir = tmp('fsp')
  const fh = await fs.promises.open(path.join(dir, 'log.jsonl'), 'a')
  let sum = 0
  for (const [t, [from, to]] of turns.entries()) {
    await new Promise((resolve) => setImmediate(resolve))
    const t0 = performance.now()
    let text = t === 0 ? `${JSON.stringify({ type: 'session', ...HEADER })}\n` : ''
    for (let i = from; i < to; i++) text += `${JSON.stringify(events[i])}\n`
    await fh.write(text)
    await fh.sync()
    sum += performance.now() - t0
  }
  await fh.close()
  fs.rmSync(dir, { recursive: true, force: true })
  return sum
}

function betterSqlite() {
  const dir = tmp('bsq')
  const db = new Database(path.join(dir, 'b.db'))
  db.pragma('journal_mode = WAL')
  db.pragma('synchronous = FULL')
  db.pragma('foreign_keys = ON')
  db.exec(SQLITE_SCHEMA)
  const insertSession = db.prepare('INSERT INTO sessions (id, version, created_at, cwd) VALUES (?, ?, ?, ?)')
  const insert = db.prepare(
    'INSERT INTO events (session_id, seq, type, time, data, source_event_seqs, surface_op) VALUES (?, ?, ?, ?, ?, ?, ?)',
  )
  const batch = db.transaction((first, from, to) => {
    if (first) insertSession.run(ID, 0, HEADER.createdAt, HEADER.cwd)
    for (let i = from; i < to; i++) {
      const e = events[i]
      insert.run(
        ID, e.seq, e.type, e.time, JSON.stringify(e.data),
        e.sourceEventSeqs === undefined ? null : JSON.stringify(e.sourceEventSeqs),
        e.surfaceOp === undefined ? null : JSON.stringify(e.surfaceOp),
      )
    }
  })
  let sum = 0
  turns.forEach(([from, to], t) => {
    const t0 = performance.now()
    batch(t === 0, from, to)
    sum += performance.now() - t0
  })
  db.close()
  fs.rmSync(dir, { recursive: true, force: true })
  return sum
}

// ---------------------------------------------------------------- PostgreSQL (DSH_BENCH_PG_URL)

const PG_SCHEMA = `dsh_bench_${process.pid}`
let pgRuns = 0
const pgMake = () => new PostgresSessionStore({ connectionString: PG_URL, schema: `${PG_SCHEMA}_${pgRuns++}` })

function psql(sql) {
  return execFileSync('psql', [PG_URL, '-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-c', `SET client_min_messages = warning; ${sql}`], { encoding: 'utf8', maxBuffer: 1 << 30 })
}

function dropBenchSchemas() {
  const names = psql(`SELECT nspname FROM pg_namespace WHERE nspname LIKE '${PG_SCHEMA}%'`).split('\n').filter(Boolean)
  for (const name of names) psql(`DROP SCHEMA ${name} CASCADE`)
}

/** The session's events as the store's rows: [seqs, types, times, datas, sources, ops] of turns `from..to`. */
function rowsOf(from, to) {
  const cols = [[], [], [], [], [], []]
  for (let i = from; i < to; i++) {
    const e = events[i]
    cols[0].push(e.seq)
    cols[1].push(e.type)
    cols[2].push(e.time)
    cols[3].push(JSON.stringify(e.data))
    cols[4].push(e.sourceEventSeqs === undefined ? null : JSON.stringify(e.sourceEventSeqs))
    cols[5].push(e.surfaceOp === undefined ? null : JSON.stringify(e.surfaceOp))
  }
  return cols
}

/** The session's events as node-postgres reads them: one SELECT, JSON.parse of each column that holds JSON. */
async function pgReadEvents(client, schema) {
  const { rows } = await client.query(
    `SELECT seq, type, time, data, source_event_seqs, surface_op FROM ${schema}.events WHERE session_id = $1 ORDER BY seq`, [ID])
  const out = new Array(rows.length)
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i]
    const e = { type: row.type, seq: Number(row.seq), time: Number(row.time), data: JSON.parse(row.data) }
    if (row.source_event_seqs !== null) e.sourceEventSeqs = JSON.parse(row.source_event_seqs)
    if (row.surface_op !== null) e.surfaceOp = JSON.parse(row.surface_op)
    out[i] = e
  }
  return out
}

/** Open + first derive through the store, and the same rows through node-postgres + JSON.parse per event. */
async function pgOpen(pg) {
  const store = pgMake()
  const schema = `${PG_SCHEMA}_${pgRuns - 1}`
  await store.create(HEADER)
  for (const [from, to] of turns) await store.append(ID, events.slice(from, to))
  await store.open(ID) // the repair of the cut-short last turn, once
  const ours = []
  for (let r = 0; r < OPEN_RUNS; r++) {
    const t0 = performance.now()
    const session = await store.open(ID)
    if (session.deriveMessages().length === 0) throw new Error('nothing derived')
    ours.push(performance.now() - t0)
  }
  await store.close()
  const client = new pg.Client({ connectionString: PG_URL })
  await client.connect()
  const base = []
  for (let r = 0; r < OPEN_RUNS; r++) {
    const t0 = performance.now()
    const out = await pgReadEvents(client, schema)
    base.push(performance.now() - t0)
    if (out.length < N) throw new Error(`short read: ${out.length}`)
  }
  await client.end()
  return [ours, base, schema]
}

/** Turn-by-turn writes through node-postgres: per turn, BEGIN, one `unnest` INSERT of its events, COMMIT. */
async function pgClientFlush(pg) {
  const schema = `${PG_SCHEMA}_${pgRuns++}`
  const client = new pg.Client({ connectionString: PG_URL })
  await client.connect()
  await client.query(`SET client_min_messages = warning; CREATE SCHEMA ${schema};
    CREATE TABLE ${schema}.sessions (id TEXT PRIMARY KEY, version BIGINT NOT NULL, created_at BIGINT NOT NULL,
      cwd TEXT, parent_session TEXT, seed_length BIGINT);
    CREATE TABLE ${schema}.events (session_id TEXT NOT NULL REFERENCES ${schema}.sessions(id) ON DELETE CASCADE,
      seq BIGINT NOT NULL, type TEXT NOT NULL, time BIGINT NOT NULL, data TEXT NOT NULL,
      source_event_seqs TEXT, surface_op TEXT, PRIMARY KEY (session_id, seq));`)
  const insert = `INSERT INTO ${schema}.events (session_id, seq, type, time, data, source_event_seqs, surface_op)
    SELECT $1, * FROM unnest($2::bigint[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::text[])`
  let sum = 0
  for (let t = 0; t < turns.length; t++) {
    const [from, to] = turns[t]
    // The turn's texts are built inside the window, as a flush stringifies them.
    await new Promise((resolve) => setImmediate(resolve))
    const t0 = performance.now()
    await client.query('BEGIN')
    if (t === 0) {
      await client.query(`INSERT INTO ${schema}.sessions (id, version, created_at, cwd) VALUES ($1, 0, $2, $3)`, [ID, HEADER.createdAt, HEADER.cwd])
    }
    await client.query(insert, [ID, ...rowsOf(from, to)])
    await client.query('COMMIT')
    sum += performance.now() - t0
  }
  await client.end()
  return sum
}

/** min-max of `xs`, as the README's ranges show them. */
const range = (xs, f = ms) => `${f(Math.min(...xs))}–${f(Math.max(...xs))}`

if (PG_ONLY) {
  let server
  if (PG_URL === undefined) {
    const { startServer } = require('../__test__/fixtures-pg/server.cjs')
    server = await startServer({ settings: { fsync: 'on', synchronous_commit: 'on', max_connections: 50 } })
    PG_URL = server.url()
  }
  const pg = require('pg')
  const fsync = execFileSync('psql', [PG_URL, '-X', '-A', '-t', '-c', 'SHOW fsync'], { encoding: 'utf8' }).trim()
  console.log(`workload: ${N} events in ${turns.length} turns; PostgreSQL at ${new URL(PG_URL).host}, fsync ${fsync}${server ? ' (a throwaway server started here)' : ''}`)
  try {
    const [open, read, schema] = await pgOpen(pg)
    const peakOf = (who) => {
      const out = execFileSync(process.execPath, [self, '--pg-peak', JSON.stringify({ url: PG_URL, schema, who })], { encoding: 'utf8' })
      const { count, peak } = JSON.parse(out)
      if (count < N) throw new Error(`${who}: read ${count} events`)
      return peak / 2 ** 20
    }
    const peaks = { ours: [peakOf('ours'), peakOf('ours')], pg: [peakOf('pg'), peakOf('pg')] }
    const runs = { ours: [], pg: [] }
    for (let r = 0; r < FLUSH_RUNS; r++) {
      runs.pg.push(await pgClientFlush(pg))
      runs.ours.push(await flushTurns(pgMake))
    }
    const ratio = (a, b) => (median(a) / median(b)).toFixed(2)
    const ratios = (a, b) => range(a.map((x, i) => x / b[i]), (x) => x.toFixed(2))
    console.log('')
    console.log(`| measure | ours ms (median, range) | baseline | baseline ms (median, range) | ratio of medians (flush: range of the interleaved runs' ratios) |`)
    console.log('|---|---:|---|---:|---:|')
    console.log(`| open + first deriveMessages, PostgreSQL, ${N} events | ${ms(median(open))} (${range(open)}) | node-postgres SELECT + JSON.parse per event | ${ms(median(read))} (${range(read)}) | ${ratio(open, read)}x |`)
    console.log(`| peak RSS of the open + first derive (MiB, a fresh process each), PostgreSQL, ${N} events | ${ms(median(peaks.ours))} (${range(peaks.ours)}) | node-postgres SELECT + JSON.parse per event | ${ms(median(peaks.pg))} (${range(peaks.pg)}) | ${ratio(peaks.ours, peaks.pg)}x |`)
    console.log(`| flush turn by turn, PostgreSQL, ${N} events, fsync ${fsync} | ${ms(median(runs.ours))} (${range(runs.ours)}) | node-postgres, BEGIN + one unnest INSERT + COMMIT per turn | ${ms(median(runs.pg))} (${range(runs.pg)}) | ${ratio(runs.ours, runs.pg)}x (${ratios(runs.ours, runs.pg)}) |`)
  } finally {
    dropBenchSchemas()
    server?.stop()
  }
  process.exit(0)
}

console.log(`workload: ${N} events in ${turns.length} turns, ${(jsonlText.length / 1e6).toFixed(1)} MB of JSONL`)
const stored = await storedWorkload()
const parse = parseEveryLine()
const openJsonl = await openAndDerive(jsonlMake, stored)
const openSqlite = await openAndDerive(sqliteMake, stored)
const runs = { fs: [], fsp: [], jsonl: [], bsq: [], sqlite: [] }
for (let r = 0; r < FLUSH_RUNS; r++) {
  runs.fs.push(fsAppendFsync())
  runs.fsp.push(await fsPromisesAppend())
  runs.jsonl.push(await flushTurns(jsonlMake))
  if (Database !== undefined) runs.bsq.push(betterSqlite())
  runs.sqlite.push(await flushTurns(sqliteMake))
}
const pauses = JSON.parse(execFileSync(process.execPath, ['--expose-gc', self, '--pauses', stored, String(N)], { encoding: 'utf8' }))
fs.rmSync(stored, { recursive: true, force: true })

const rows = [
  ['open + first deriveMessages, JSONL', openJsonl, 'JSON.parse of every line', parse, '<= 0.6x'],
  ['open + first deriveMessages, SQLite', openSqlite, 'JSON.parse of every line', parse, '<= 0.6x'],
  ['flush turn by turn, JSONL', median(runs.jsonl), 'fs append + fsync per batch', median(runs.fs), '<= 1.0x'],
  ['flush turn by turn, SQLite', median(runs.sqlite), 'fs append + fsync per batch', median(runs.fs), '<= 1.0x'],
  ['flush turn by turn, JSONL', median(runs.jsonl), 'fs.promises write + sync per batch (off the main thread)', median(runs.fsp), '<= 1.0x'],
]
if (runs.bsq.length > 0) {
  rows.push(['flush turn by turn, SQLite', median(runs.sqlite), 'better-sqlite3, 1 tx per batch', median(runs.bsq), '<= 1.0x'])
} else {
  console.log('(better-sqlite3 is not installed: `npm i --no-save better-sqlite3@12` adds that baseline)')
}
console.log('')
console.log('| measure | ours ms | baseline | baseline ms | ratio | target |')
console.log('|---|---:|---|---:|---:|---|')
for (const [what, ours, base, baseMs, target] of rows) {
  console.log(`| ${what} | ${ms(ours)} | ${base} | ${ms(baseMs)} | ${(ours / baseMs).toFixed(2)}x | ${target} |`)
}
console.log('')
console.log('| longest event-loop pause (1 ms timer, child process) | ms | ms less GC inside it | target |')
console.log('|---|---:|---:|---|')
for (const [name, what] of [
  ['openJsonl', 'open, JSONL'],
  ['openSqlite', 'open, SQLite'],
  ['flushJsonl', `flush ${N} events turn by turn, JSONL`],
  ['flushSqlite', `flush ${N} events turn by turn, SQLite`],
  ['flushFs', `baseline: plain Node fs.promises write + sync per turn`],
  ['bigJsonl', `flush ${N} events in one call, JSONL`],
  ['bigSqlite', `flush ${N} events in one call, SQLite`],
]) {
  console.log(`| ${what} | ${ms(pauses[name][0])} | ${ms(pauses[name][1])} | <= 5 ms |`)
}
