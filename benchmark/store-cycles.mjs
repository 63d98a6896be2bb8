// Resident memory of a process that opens and closes stores all day (issue 29
// case 8): N cycles of a new store that opens the session the cycle before
// created, appends a closed turn to it and flushes it, creates a session of its
// own with one closed turn and flushes it, and closes. Every log stays at one or
// two turns, so the work of a cycle does not grow with the count. RSS and the JS heap are printed every
// 500 cycles, with the native part of RSS (RSS less what V8's heap spaces hold
// resident) and the process's thread count (/proc/self/status); at the end the
// growth after the warm-up (the first 500 cycles). V8's young generation grows
// to its bound (32 MiB of RSS in Node 20) in the first few thousand cycles of
// any allocating loop; the native column is the package's.
// One store kind per process, so each kind's figures are its own.
//
//   npm run build && node benchmark/store-cycles.mjs jsonl|sqlite|postgres [cycles=9000]
//   (postgres: DSH_TEST_PG_URL or DSH_BENCH_PG_URL; a throwaway schema, dropped at the end)
//   node benchmark/store-cycles.mjs all [cycles]   each kind in a child of its own
//
// With --json the last line is the figures as JSON (the test that guards the
// bound, __test__/store-cycles.test.ts, reads it).

import { spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import { createRequire } from 'node:module'
import * as os from 'node:os'
import * as path from 'node:path'
import * as v8 from 'node:v8'
import { fileURLToPath } from 'node:url'

const require = createRequire(import.meta.url)
const self = fileURLToPath(import.meta.url)
const args = process.argv.slice(2).filter((a) => !a.startsWith('--'))
const JSON_OUT = process.argv.includes('--json')
const KIND = args[0] ?? 'all'
const CYCLES = Number(args[1] ?? 9000)
const EVERY = 500
/** --kib N: each session's first turn carries about N KiB of tool output (0: a few hundred bytes). */
const KIB = Number(process.argv.find((a) => a.startsWith('--kib='))?.slice(6) ?? 0)
const PAD = 'tool output line '.repeat(Math.ceil((KIB * 1024) / 17 / 64))
const PG_URL = process.env.DSH_TEST_PG_URL ?? process.env.DSH_BENCH_PG_URL
const MiB = 1 << 20

if (KIND === 'all') {
  for (const kind of ['jsonl', 'sqlite', ...(PG_URL ? ['postgres'] : [])]) {
    console.log(`--- ${kind}`)
    const run = spawnSync(process.execPath, [self, kind, String(CYCLES)], { stdio: 'inherit' })
    if (run.status !== 0) process.exit(run.status ?? 1)
  }
  if (!PG_URL) console.log('--- postgres: skipped (no DSH_TEST_PG_URL / DSH_BENCH_PG_URL)')
  process.exit(0)
}

const { Session } = require('../index.js')
const { JsonlSessionStore, SqliteSessionStore, PostgresSessionStore } = require('../lib/stores.js')

const dir = fs.mkdtempSync(path.join(os.tmpdir(), `dsh-cycles-${KIND}-`))
const schema = `dsh_cycles_${process.pid}`
let dropSchema = async () => {}
let make
if (KIND === 'jsonl') make = () => new JsonlSessionStore({ root: dir })
else if (KIND === 'sqlite') make = () => new SqliteSessionStore({ path: path.join(dir, 'sessions.db') })
else if (KIND === 'postgres') {
  if (!PG_URL) throw new Error('postgres needs DSH_TEST_PG_URL or DSH_BENCH_PG_URL')
  make = () => new PostgresSessionStore({ connectionString: PG_URL, schema })
  dropSchema = async () => {
    const client = new (require('pg').Client)({ connectionString: PG_URL })
    await client.connect()
    await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
    await client.end()
  }
} else throw new Error(`unknown store kind ${KIND} (jsonl, sqlite, postgres, all)`)

const threads = () => Number(/^Threads:\s+(\d+)/m.exec(fs.readFileSync('/proc/self/status', 'utf8'))?.[1] ?? NaN)
/** What V8's heap spaces hold resident: RSS less this is native memory (ours, Node's, the allocator's). */
const v8Resident = () => v8.getHeapSpaceStatistics().reduce((sum, space) => sum + space.physical_space_size, 0)
const sample = (cycle) => {
  const rss = process.memoryUsage.rss()
  return { cycle, rss, native: rss - v8Resident(), heap: process.memoryUsage().heapUsed, threads: threads() }
}
const mib = (n) => (n / MiB).toFixed(1)
const show = (s) => `${String(s.cycle).padStart(6)}  rss ${mib(s.rss).padStart(7)} MiB  native ${mib(s.native).padStart(6)} MiB  heap ${mib(s.heap).padStart(6)} MiB  threads ${s.threads}`

const source = { kind: 'user' }
const provenance = { provider: 'deepseek', model: 'deepseek-chat' }
function turn(session, n, i) {
  session.append('turn/start', { turn: n, trigger: { kind: 'message', source } })
  session.append('user/message', { content: [{ type: 'text', text: `question ${i}` }], source }, { surfaceOp: 'append' })
  session.append('step/start', { turn: n, step: 1 })
  session.append('assistant/message', { turn: n, step: 1, content: [{ type: 'text', text: `answer ${i} `.repeat(8) }], provenance }, { surfaceOp: 'append' })
  for (let k = 0; n === 1 && KIB > 0 && k < 64; k++) {
    session.append('user/message', { content: [{ type: 'text', text: `${k} ${PAD}` }], source }, { surfaceOp: 'append' })
  }
  session.append('step/end', { turn: n, step: 1, reason: 'stop' })
  session.append('turn/end', { turn: n, reason: { kind: 'completed' } })
}

async function cycle(i) {
  const store = make()
  if (i > 0) {
    const opened = await store.open(`cycle-${i - 1}`)
    turn(opened, 2, i)
    await store.flush(opened)
    // A JSONL store's file of a session no later cycle reads.
    if (KIND === 'jsonl' && KIB > 0) fs.rmSync(store.locate(opened.header).path, { force: true })
  }
  const session = new Session(`cycle-${i}`)
  await store.create(session.header)
  turn(session, 1, i)
  await store.flush(session)
  await store.close()
}

const samples = [sample(0)]
if (!JSON_OUT) console.log(show(samples[0]))
for (let i = 0; i < CYCLES; i++) {
  await cycle(i)
  if ((i + 1) % EVERY === 0 || i + 1 === CYCLES) {
    samples.push(sample(i + 1))
    if (!JSON_OUT) console.log(show(samples.at(-1)))
  }
}
await dropSchema()
fs.rmSync(dir, { recursive: true, force: true })

const [start, warm, last] = [samples[0], samples[Math.min(1, samples.length - 1)], samples.at(-1)]
const peak = Math.max(...samples.map((s) => s.rss))
const figures = {
  kind: KIND,
  cycles: CYCLES,
  rssStart: start.rss,
  rssWarm: warm.rss,
  rssEnd: last.rss,
  rssPeak: peak,
  growthAfterWarmUp: last.rss - warm.rss,
  nativeGrowthAfterWarmUp: last.native - warm.native,
  heapEnd: last.heap,
  threadsEnd: last.threads,
  threadsMax: Math.max(...samples.map((s) => s.threads)),
}
if (JSON_OUT) console.log(JSON.stringify(figures))
else {
  console.log(
    `${KIND}: ${CYCLES} cycles: rss ${mib(start.rss)} -> ${mib(last.rss)} MiB (peak ${mib(peak)}), ` +
      `growth after the first ${EVERY} cycles ${mib(figures.growthAfterWarmUp)} MiB (native ${mib(figures.nativeGrowthAfterWarmUp)} MiB); heap ${mib(last.heap)} MiB; threads at the end ${last.threads} (max ${figures.threadsMax})`,
  )
}
