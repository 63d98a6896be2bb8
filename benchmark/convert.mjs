// `dsh-session convert` (issue 21), side by side with what a user would
// write instead with better-sqlite3 (`npm i --no-save better-sqlite3@12`;
// without it only our figures are printed). Each conversion runs in a fresh
// child process; its time and peak RSS (the child's maxRSS, Node's own
// ~45 MiB included on both sides) are reported, medians over the runs:
//
//   JSONL → SQLite: `convert log.jsonl sqlite:db`  vs  reading the file line
//     by line (readline), JSON.parse of each line and an INSERT of each event
//     in one transaction (WAL, synchronous FULL);
//   SQLite → JSONL: `convert sqlite:db#id out.jsonl`  vs  iterating the rows
//     (a prepared SELECT's iterate()) and writing each line through a file
//     stream, then fsync.
//
// The log is the shared agent workload (test-data/bench), cut back to its
// last whole turn, in a temporary folder removed at the end.
//
//   npm run build && node benchmark/convert.mjs [events=300000] [--runs 2]

import { spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import { createRequire } from 'node:module'
import * as path from 'node:path'
import readline from 'node:readline'
import { fileURLToPath } from 'node:url'
import { ID, SQLITE_SCHEMA, eventSource, mib, parseArgs, range, removeAtExit, table, tmpDir, workloadOps, writeJsonl } from './lib/big-sessions.mjs'

const require = createRequire(import.meta.url)
const self = fileURLToPath(import.meta.url)
const cli = path.resolve(path.dirname(self), '../lib/cli/main.js')
const bin = path.resolve(path.dirname(self), '../bin/dsh-session.js')


/** The baselines: what a user would write with better-sqlite3. */
const BASELINES = {
  async toSqlite(from, to) {
    const Database = require('better-sqlite3')
    const db = new Database(to)
    db.pragma('journal_mode = WAL')
    db.pragma('synchronous = FULL')
    db.exec(SQLITE_SCHEMA)
    const insert = db.prepare('INSERT INTO events (session_id, seq, type, time, data, source_event_seqs, surface_op) VALUES (?, ?, ?, ?, ?, ?, ?)')
    let header
    db.exec('BEGIN')
    for await (const line of readline.createInterface({ input: fs.createReadStream(from), crlfDelay: Infinity })) {
      if (line.length === 0) continue
      const e = JSON.parse(line)
      if (header === undefined) {
        header = e
        db.prepare('INSERT INTO sessions (id, version, created_at, cwd) VALUES (?, ?, ?, ?)').run(e.id, e.version, e.createdAt, e.cwd ?? null)
        continue
      }
      insert.run(header.id, e.seq, e.type, e.time, JSON.stringify(e.data),
        e.sourceEventSeqs === undefined ? null : JSON.stringify(e.sourceEventSeqs),
        e.surfaceOp === undefined ? null : JSON.stringify(e.surfaceOp))
    }
    db.exec('COMMIT')
    db.close()
  },
  async toJsonl(from, to) {
    const Database = require('better-sqlite3')
    const db = new Database(from, { readonly: true })
    const h = db.prepare('SELECT * FROM sessions WHERE id = ?').get(ID)
    const out = fs.createWriteStream(to)
    const write = (text) => (out.write(text) ? undefined : new Promise((resolve) => out.once('drain', resolve)))
    await write(`${JSON.stringify({ type: 'session', version: h.version, id: h.id, createdAt: h.created_at, ...(h.cwd === null ? {} : { cwd: h.cwd }) })}\n`)
    for (const r of db.prepare('SELECT * FROM events WHERE session_id = ? ORDER BY seq').iterate(ID)) {
      let line = `{"type":${JSON.stringify(r.type)},"seq":${r.seq},"time":${r.time},"data":${r.data}`
      if (r.source_event_seqs !== null) line += `,"sourceEventSeqs":${r.source_event_seqs}`
      if (r.surface_op !== null) line += `,"surfaceOp":${r.surface_op}`
      await write(`${line}}\n`)
    }
    await new Promise((resolve, reject) => out.end((error) => (error ? reject(error) : resolve())))
    const fd = fs.openSync(to, 'r+')
    fs.fsyncSync(fd)
    fs.closeSync(fd)
    db.close()
  },
}

// ---------------------------------------------------------------- child

const childAt = process.argv.indexOf('--child')
if (childAt >= 0) {
  const { who, direction, from, to } = JSON.parse(process.argv[childAt + 1])
  const t0 = performance.now()
  if (who === 'ours') {
    const target = direction === 'toSqlite' ? `sqlite:${to}` : to
    const source = direction === 'toSqlite' ? from : `sqlite:${from}#${ID}`
    const code = await require(cli).main(['convert', source, target, '--json'])
    if (code !== 0) throw new Error(`convert exited ${code}`)
  } else {
    await BASELINES[direction](from, to)
  }
  const time = performance.now() - t0
  process.stderr.write(`\nRESULT ${JSON.stringify({ time, peak: process.resourceUsage().maxRSS * 1024 })}\n`)
  process.exit(0)
}

// ---------------------------------------------------------------- parent

const { options, positional } = parseArgs(process.argv.slice(2))
const events = Number(positional[0] ?? 300_000)
const runs = Number(options.runs ?? 2)
let hasBaseline = true
try {
  require.resolve('better-sqlite3')
} catch {
  hasBaseline = false
}

const dir = removeAtExit(tmpDir('convert'))
const { ops } = workloadOps(events)
const log = path.join(dir, 'log.jsonl')
const [count, bytes] = writeJsonl(log, ops.length, eventSource(ops))
// The SQLite source both read: our store's database of the same log.
const db = path.join(dir, 'source.db')
{
  const r = spawnSync(process.execPath, [bin, 'convert', log, `sqlite:${db}`], { encoding: 'utf8' })
  if (r.status !== 0) throw new Error(`making the SQLite source: ${r.stderr}`)
}

function measure(who, direction, run) {
  const to = path.join(dir, `${who}-${direction}-${run}.${direction === 'toSqlite' ? 'db' : 'jsonl'}`)
  const from = direction === 'toSqlite' ? log : db
  const r = spawnSync(process.execPath, [self, '--child', JSON.stringify({ who, direction, from, to })], { encoding: 'utf8', maxBuffer: 1 << 24 })
  const line = r.stderr.split('\n').find((l) => l.startsWith('RESULT '))
  if (r.status !== 0 || line === undefined) throw new Error(`${who} ${direction}: ${r.stderr.trim()}`)
  return { ...JSON.parse(line.slice(7)), to }
}

/** What a converted copy holds, as JSONL: a JSONL copy's bytes, a database's session written out by our CLI. */
function jsonlOf(file) {
  if (!file.endsWith('.db')) return fs.readFileSync(file)
  const out = `${file}.jsonl`
  const r = spawnSync(process.execPath, [bin, 'convert', `sqlite:${file}#${ID}`, out], { encoding: 'utf8' })
  if (r.status !== 0) throw new Error(`reading ${file} back: ${r.stderr}`)
  return fs.readFileSync(out)
}

const results = { ours: { toSqlite: [], toJsonl: [] }, baseline: { toSqlite: [], toJsonl: [] } }
for (let run = 0; run < runs; run++) {
  for (const direction of ['toSqlite', 'toJsonl']) {
    results.ours[direction].push(measure('ours', direction, run))
    if (hasBaseline) results.baseline[direction].push(measure('baseline', direction, run))
  }
}
// Every copy holds the log as it was, byte for byte once written out as JSONL.
const original = fs.readFileSync(log)
for (const direction of ['toSqlite', 'toJsonl']) {
  for (const { to } of [...results.ours[direction], ...results.baseline[direction]]) {
    if (!jsonlOf(to).equals(original)) throw new Error(`${to} does not hold the log as it was`)
  }
}

console.log(`log: ${count} events (the workload's first ${events}, cut back to its last whole turn), ${mib(bytes).toFixed(0)} MiB of JSONL; Node ${process.version}; ${runs} run(s)`)
console.log('')
const cell = (xs, key, f) => range(xs.map((x) => f(x[key])), 0)
const ratio = (a, b, key) => (b.length === 0 ? '—' : range(a.map((x, i) => x[key] / b[i][key]), 2, 'x'))
const rows = []
for (const [direction, label] of [['toSqlite', 'JSONL → SQLite'], ['toJsonl', 'SQLite → JSONL']]) {
  const [o, b] = [results.ours[direction], results.baseline[direction]]
  rows.push([`${label}: time, ms`, cell(o, 'time', (x) => x), cell(b, 'time', (x) => x), ratio(o, b, 'time')])
  rows.push([`${label}: peak RSS, MiB`, cell(o, 'peak', mib), cell(b, 'peak', mib), ratio(o, b, 'peak')])
}
table(['convert', 'dsh-session convert', hasBaseline ? 'better-sqlite3, streamed' : 'better-sqlite3 (not installed)', 'ours / baseline'], rows)
