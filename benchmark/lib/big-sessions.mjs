// What the big-session benchmarks (pauses.mjs, big.mjs) share: the logs they
// generate from test-data/bench (the agent workload, and the big-payload shape
// where 1% of tool results carry 1-10 MB outputs), the stored copies of a log
// in a JSONL and a SQLite store, and the probes a measuring child runs (the
// longest event-loop pause with GC time apart, peak and retained RSS).
// Only the package's public API is used, so the scripts keep working while the
// internals change.

import { spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import { createRequire } from 'node:module'
import * as os from 'node:os'
import * as path from 'node:path'
import { PerformanceObserver } from 'node:perf_hooks'
import { fileURLToPath, pathToFileURL } from 'node:url'

const require = createRequire(import.meta.url)
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')
const { generateOps, toEvents, rng } = await import(pathToFileURL(path.join(root, 'test-data/bench/workload.mjs')).href)

export const { Session } = require('../../index.js')
export const { JsonlSessionStore, SqliteSessionStore } = require('../../lib/stores.js')

export const ID = 'bench-session'
/** The SQLite store's tables (SPEC 11), as a better-sqlite3 baseline creates them. */
export const SQLITE_SCHEMA = `CREATE TABLE sessions (id TEXT PRIMARY KEY, version INTEGER NOT NULL,
  created_at INTEGER NOT NULL, cwd TEXT, parent_session TEXT, seed_length INTEGER) STRICT;
CREATE TABLE events (session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  seq INTEGER NOT NULL, type TEXT NOT NULL, time INTEGER NOT NULL, data TEXT NOT NULL,
  source_event_seqs TEXT, surface_op TEXT, PRIMARY KEY (session_id, seq)) STRICT;`
export const HEADER = Object.freeze({ version: 0, id: ID, createdAt: 1_700_000_000_000, cwd: '/home/dev/project' })
/** The TypeScript reference, when ../shared is beside the clone. */
export const REFERENCE = path.resolve(root, '../shared/bench/reference/dsh-session-v0.min.mjs')

const MiB = 1 << 20

// ---------------------------------------------------------------- arguments

/** `--name value` options and the positional arguments of `argv`. */
export function parseArgs(argv) {
  const options = {}
  const positional = []
  for (let i = 0; i < argv.length; i++) {
    if (argv[i].startsWith('--')) options[argv[i].slice(2)] = argv[++i]
    else positional.push(argv[i])
  }
  return { options, positional }
}

// ---------------------------------------------------------------- logs

/**
 * The first `n` ops of the agent workload, cut back to the last `turn/end`
 * (a balanced log: no store repairs it on open, every child sees the same
 * events). `lastTurn` is the number of that turn.
 */
export function workloadOps(n) {
  const { ops } = generateOps(n)
  let end = ops.length
  while (end > 0 && ops[end - 1].type !== 'turn/end') end--
  ops.length = end
  return { ops, lastTurn: end > 0 ? ops[end - 1].data.turn : 0 }
}

/** The big-payload shape: every 100th tool result (1%) carries a 1-10 MB output. */
export const BIG_PAYLOAD = Object.freeze({ every: 100, minBytes: 1_000_000, maxBytes: 10_000_000, seed: 0xb16 })

/** Op index -> [output bytes, seed] of the tool results the big-payload shape enlarges. */
export function bigPayloadPlan(ops, shape = BIG_PAYLOAD) {
  const next = rng(shape.seed)
  const plan = new Map()
  let results = 0
  for (let i = 0; i < ops.length; i++) {
    if (ops[i].type !== 'tool/result') continue
    if (results++ % shape.every !== shape.every >> 1) continue
    plan.set(i, [shape.minBytes + Math.floor(next() * (shape.maxBytes - shape.minBytes)), Math.floor(next() * 2 ** 32)])
  }
  return plan
}

const WORDS = ('session event store flush append derive surface node message header tool result call chunk '
  + 'stream provider model config token usage file path line error test build run check value index array '
  + 'object string number boolean null undefined src lib package json module promise resolve reject throw')
  .split(' ')
const LEVELS = ['INFO ', 'DEBUG', 'WARN ', 'INFO ', 'TRACE']

/**
 * About `bytes` bytes (UTF-8) of text resembling tool output: grep hits, build
 * and server logs, test-runner lines, `git log` with hashes. Mostly ASCII (a
 * test run's output carries check marks, so a quarter of the outputs are
 * two-byte strings in V8); random identifiers, numbers and hashes keep it
 * from compressing trivially. Deterministic in `seed`.
 */
export function toolOutput(seed, bytes) {
  const next = rng(seed ^ 0x9e3779b9)
  const int = (k) => Math.floor(next() * k)
  const word = () => WORDS[int(WORDS.length)]
  const hex = (k) => {
    let s = ''
    while (s.length < k) s += int(2 ** 32).toString(16).padStart(8, '0')
    return s.slice(0, k)
  }
  const ident = () => {
    const w = word()
    return `${word()}${w[0].toUpperCase()}${w.slice(1)}${int(100)}`
  }
  const kind = int(4)
  const lines = []
  let size = 0
  while (size < bytes) {
    let line
    if (kind === 0) {
      line = `src/${word()}/${ident()}.ts:${1 + int(2000)}:${1 + int(80)}:    const ${ident()} = ${ident()}("${word()} ${word()}", ${int(10_000)}) // ${word()} ${word()}`
    } else if (kind === 1) {
      line = `2026-12-0${1 + int(9)}T${String(int(24)).padStart(2, '0')}:${String(int(60)).padStart(2, '0')}:${String(int(60)).padStart(2, '0')}.${String(int(1000)).padStart(3, '0')}Z ${LEVELS[int(5)]} [worker-${int(16)}] ${word()} ${word()} id=${hex(16)} path=/api/${word()}/${int(100_000)} status=${next() < 0.9 ? 200 : 500} dur=${int(5000)}ms`
    } else if (kind === 2) {
      line = next() < 0.95
        ? `  ✓ ${word()} ${word()} ${ident()} ${word()} ${word()} (${int(900)} ms)`
        : `  ✗ ${word()} ${ident()} expected ${int(1_000_000)} to equal ${int(1_000_000)} at ${word()}.test.ts:${int(900)}:${int(80)}`
    } else {
      line = next() < 0.25
        ? `commit ${hex(40)}\nAuthor: dev${int(50)} <dev${int(50)}@example.com>\n\n    ${word()} ${word()} ${ident()}: ${word()} ${word()} ${word()}`
        : ` ${word()}/${ident()}.rs | ${int(400)} ${'+'.repeat(1 + int(30))}${'-'.repeat(int(20))}`
    }
    lines.push(line)
    size += line.length + 1 + (kind === 2 ? 2 : 0) // a check mark is 3 bytes in UTF-8
  }
  return lines.join('\n')
}

/**
 * The events of `ops` as a stored log would hold them (test-data/bench's
 * toEvents), the planned tool results given their big output; each event is
 * built when asked for, so a 600 MiB log never sits in memory at once.
 */
export function eventSource(ops, plan = new Map()) {
  const events = toEvents(ops)
  return (i) => {
    const big = plan.get(i)
    if (big === undefined) return events[i]
    const e = events[i]
    return { ...e, data: { ...e.data, content: [{ type: 'text', text: toolOutput(big[1], big[0]) }] } }
  }
}

/**
 * Write events `0..count` as a v0 JSONL log (header line first); with
 * `stopAtBytes`, stop after the first `turn/end` at or past that size.
 * Returns [events written, bytes].
 */
export function writeJsonl(file, count, eventAt, stopAtBytes = Infinity) {
  fs.mkdirSync(path.dirname(file), { recursive: true })
  const fd = fs.openSync(file, 'w')
  let bytes = 0
  let part = `${JSON.stringify({ type: 'session', ...HEADER })}\n`
  let i = 0
  for (; i < count; i++) {
    const e = eventAt(i)
    part += `${JSON.stringify(e)}\n`
    if (part.length >= 4 * MiB) {
      bytes += fs.writeSync(fd, part)
      part = ''
    }
    if (e.type === 'turn/end' && bytes + part.length >= stopAtBytes) {
      i++
      break
    }
  }
  bytes += fs.writeSync(fd, part)
  fs.closeSync(fd)
  return [i, bytes]
}

/** Where the stores of a bench directory keep their data. */
export const storesOf = (dir) => ({
  jsonl: () => new JsonlSessionStore({ root: path.join(dir, 'jsonl') }),
  sqlite: () => {
    fs.mkdirSync(path.join(dir, 'sqlite'), { recursive: true })
    return new SqliteSessionStore({ path: path.join(dir, 'sqlite', 'sessions.db') })
  },
})

/**
 * Fill the bench directory `dir` with events `0..count` in a JSONL store (the
 * file written where the store locates it) and in a SQLite store (created,
 * then appended in batches of whole turns). Returns the directory and sizes.
 */
export async function storedLog(dir, count, eventAt) {
  const stores = storesOf(dir)
  const jsonl = stores.jsonl()
  const file = jsonl.locate(HEADER).path
  const [, bytes] = writeJsonl(file, count, eventAt)
  await jsonl.close()
  const sqlite = stores.sqlite()
  await sqlite.create(HEADER)
  let batch = []
  let batchBytes = 0
  for (let i = 0; i < count; i++) {
    const e = eventAt(i)
    batch.push(e)
    if (e.data?.content?.[0]?.text !== undefined) batchBytes += e.data.content[0].text.length
    if (e.type === 'turn/end' && (batch.length >= 16_384 || batchBytes >= 32 * MiB || i === count - 1)) {
      await sqlite.append(ID, batch)
      batch = []
      batchBytes = 0
    }
  }
  if (batch.length > 0) await sqlite.append(ID, batch)
  await sqlite.close()
  const db = path.join(dir, 'sqlite', 'sessions.db')
  return { dir, file, bytes, dbBytes: fs.statSync(db).size }
}

export const tmpDir = (label) => fs.mkdtempSync(path.join(os.tmpdir(), `dsh-bench-${label}-`))

const toRemove = new Set()
/** Remove `dir` when this process exits (also on Ctrl-C or a failure). */
export function removeAtExit(dir) {
  if (toRemove.size === 0) {
    process.on('exit', () => {
      for (const d of toRemove) fs.rmSync(d, { recursive: true, force: true })
    })
    process.once('SIGINT', () => process.exit(130))
  }
  toRemove.add(dir)
  return dir
}

// ---------------------------------------------------------------- children

/**
 * Run `script --child <JSON of task>` in a fresh `node --expose-gc` and return
 * what it printed (one JSON value). A child that fails prints its error on
 * stderr; then `{ error }` is returned, so one failing measurement does not
 * lose the others.
 */
export function runChild(script, task, { heapMiB = 8192 } = {}) {
  const r = spawnSync(process.execPath, ['--expose-gc', `--max-old-space-size=${heapMiB}`, script, '--child', JSON.stringify(task)], {
    encoding: 'utf8',
    maxBuffer: 16 * MiB,
    timeout: 900_000,
  })
  if (r.signal === 'SIGINT') process.exit(130) // Ctrl-C: stop here (and remove the logs)
  if (r.status !== 0) {
    const why = (r.stderr || r.error?.message || `exit ${r.status} ${r.signal ?? ''}`).trim().split('\n').filter(Boolean)
    return { error: why.find((l) => /Error|error:/.test(l)) ?? why.at(-1) ?? `exit ${r.status}` }
  }
  return JSON.parse(r.stdout)
}

/** The task a child was started with, or undefined in the parent. */
export function childTask(argv) {
  const i = argv.indexOf('--child')
  return i >= 0 ? JSON.parse(argv[i + 1]) : undefined
}

/** Print a child's result and leave (native threads must not keep it alive). */
export function reply(value) {
  process.stdout.write(JSON.stringify(value))
  process.exit(0)
}

// ---------------------------------------------------------------- probes (in a child)

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
export const turn = () => new Promise((resolve) => setImmediate(resolve))

/** Collect garbage and let the process go idle: what is left is retained. */
export async function settle() {
  globalThis.gc()
  globalThis.gc()
  await sleep(50)
  globalThis.gc()
}

/**
 * The longest event-loop pause inside time windows: a 1 ms interval timer
 * records when it runs; a window's pause is its longest gap between two runs
 * (clamped to the window), shown raw and less the GC time (PerformanceObserver)
 * inside that gap.
 */
export function pauseProbe() {
  const gcs = []
  const observer = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) gcs.push([e.startTime, e.startTime + e.duration])
  })
  observer.observe({ entryTypes: ['gc'] })
  const ticks = []
  const timer = setInterval(() => ticks.push(performance.now()), 1)
  const gcWithin = (a, b) => gcs.reduce((sum, [s, e]) => sum + Math.max(0, Math.min(b, e) - Math.max(a, s)), 0)
  return {
    /** Stop the timer; then `pause(t0, t1)` is `{ ms, lessGc }`. */
    async stop() {
      clearInterval(timer)
      await sleep(100) // GC entries arrive late
      observer.disconnect()
    },
    pause(t0, t1) {
      let ms = 0
      let lessGc = 0
      let last = t0
      for (const t of [...ticks.filter((t) => t > t0 && t < t1), t1]) {
        ms = Math.max(ms, t - last)
        lessGc = Math.max(lessGc, t - last - gcWithin(last, t))
        last = t
      }
      return { ms, lessGc }
    },
  }
}

const statusKb = (field) => {
  try {
    const m = fs.readFileSync('/proc/self/status', 'utf8').match(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm'))
    return m === null ? undefined : Number(m[1]) * 1024
  } catch {
    return undefined
  }
}

/**
 * Peak RSS from here on: Linux's VmHWM, reset to the current RSS (writing 5 to
 * /proc/self/clear_refs). `peak()` is bytes, or undefined where there is no /proc.
 */
export function peakProbe() {
  let reset = false
  try {
    fs.writeFileSync('/proc/self/clear_refs', '5')
    reset = true
  } catch {}
  return { reset, peak: () => statusKb('VmHWM') }
}

export const rss = () => process.memoryUsage.rss()

// ---------------------------------------------------------------- printing

const quantile = (xs, q) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) * q)]
export const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}

/** `median (min–max)` of a list of numbers, `digits` decimals; `—` for none. */
export function range(xs, digits = 1, unit = '') {
  const v = xs.filter((x) => typeof x === 'number' && Number.isFinite(x))
  if (v.length === 0) return '—'
  const f = (x) => `${x.toFixed(digits)}${unit}`
  if (v.length === 1) return f(v[0])
  return `${f(median(v))} (${f(quantile(v, 0))}–${f(quantile(v, 1))})`
}

export const mib = (bytes) => bytes / MiB

/** Print a Markdown table; `align` has an `l` or `r` per column (default: the first left). */
export function table(head, rows, align = `l${'r'.repeat(head.length - 1)}`) {
  console.log(`| ${head.join(' | ')} |`)
  console.log(`|${head.map((h, i) => (align[i] === 'l' ? '---' : '---:')).join('|')}|`)
  for (const row of rows) console.log(`| ${row.join(' | ')} |`)
}
