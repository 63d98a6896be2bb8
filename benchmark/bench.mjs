// Session core benchmark: ratios measured side by side in one run, on the
// shared 100k-event workload (test-data/bench/workload.mjs, a copy of
// ../shared/bench/workload.mjs).
//
//   node --expose-gc benchmark/bench.mjs [events=100000] [rounds=5]
//
// Each ratio is the median of `rounds` interleaved runs of both sides.
import { execFileSync } from 'node:child_process'
import { createRequire } from 'node:module'
import * as fs from 'node:fs'
import os from 'node:os'
import { fileURLToPath } from 'node:url'
import path from 'node:path'

const require = createRequire(import.meta.url)
const here = path.dirname(fileURLToPath(import.meta.url))
const { Session } = require('../index.js')

if (process.argv[2] === '--memory') {
  // Child: resume the log in argv[3] and report memory before, after the
  // resume and first derive, and after `events` is first read.
  const text = fs.readFileSync(process.argv[3], 'utf8')
  const memory = () => {
    globalThis.gc()
    globalThis.gc()
    const m = process.memoryUsage()
    return { heap: m.heapUsed, external: m.external + m.arrayBuffers, rss: m.rss }
  }
  const before = memory()
  const resumed = Session.fromJsonl(text)
  resumed.deriveMessages()
  const afterResume = memory()
  const events = resumed.events
  const afterEvents = memory()
  if (events.length === 0) throw new Error('resumed session lost its events')
  process.stdout.write(JSON.stringify([before, afterResume, afterEvents]))
  process.exit(0)
}

const workloadPath = path.resolve(here, '../test-data/bench/workload.mjs')
const { generateOps, toEvents, cloneJson } = await import(workloadPath)

const N = Number(process.argv[2] ?? 100_000)
const ROUNDS = Number(process.argv[3] ?? 5)
const gc = globalThis.gc ?? (() => {})

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const now = () => performance.now()

function deepFreeze(v) {
  if (typeof v === 'object' && v !== null) {
    if (Array.isArray(v)) for (const x of v) deepFreeze(x)
    else for (const k in v) deepFreeze(v[k])
    Object.freeze(v)
  }
  return v
}

const { ops, stepStarts } = generateOps(N)
const stepStartSet = new Set(stepStarts)
console.log(`workload: ${ops.length} events, ${stepStarts.length} steps (Node ${process.version})`)

// 1. live append vs the JS floor ---------------------------------------------
function floorRun(inputs) {
  const t = now()
  const out = new Array(inputs.length)
  for (let i = 0; i < inputs.length; i++) out[i] = deepFreeze(JSON.parse(JSON.stringify(inputs[i].data)))
  return now() - t
}
function appendRun(inputs) {
  const s = new Session('bench')
  const t = now()
  for (let i = 0; i < inputs.length; i++) {
    const op = inputs[i]
    if (op.opts === undefined) s.append(op.type, op.data)
    else s.append(op.type, op.data, op.opts)
  }
  return now() - t
}
const appendRatios = []
let appendMs = 0
let floorMs = 0
for (let r = 0; r < ROUNDS; r++) {
  const a = cloneJson(ops)
  const b = cloneJson(ops)
  gc()
  const f = floorRun(a)
  gc()
  const s = appendRun(b)
  appendRatios.push(s / f)
  appendMs += s
  floorMs += f
}

// 2. resume: fromJsonl + first deriveMessages vs JSON.parse of every line ---------
const live = new Session('bench-resume')
for (const op of ops) op.opts === undefined ? live.append(op.type, op.data) : live.append(op.type, op.data, op.opts)
const jsonl = live.toJsonl()
const lines = jsonl.split('\n')
lines.pop()
const resumeRatios = []
const resumeBufferRatios = []
const jsonlBuffer = Buffer.from(jsonl)
let resumeMs = 0
let resumeBufferMs = 0
let parseMs = 0
// The same log with non-ASCII text: a two-byte JS string, whose UTF-8 differs.
const wide = jsonl.replaceAll(' module ', ' 模块 ').replaceAll(' session ', ' séssion ')
const wideLines = wide.split('\n')
wideLines.pop()
const wideRatios = []
let wideMs = 0
/** Milliseconds `fn` takes, from a collected heap. */
const timed = (fn) => {
  gc()
  const t = now()
  fn()
  return now() - t
}
const parseEvery = (list) => () => {
  const parsed = new Array(list.length)
  for (let i = 0; i < list.length; i++) parsed[i] = JSON.parse(list[i])
}
for (let r = 0; r < ROUNDS; r++) {
  const p = timed(parseEvery(lines))
  const q = timed(() => Session.fromJsonl(jsonl).deriveMessages())
  resumeRatios.push(q / p)
  resumeMs += q
  parseMs += p
  const u = timed(() => Session.fromJsonl(jsonlBuffer).deriveMessages())
  resumeBufferRatios.push(u / p)
  resumeBufferMs += u
  const wp = timed(parseEvery(wideLines))
  const w = timed(() => Session.fromJsonl(wide).deriveMessages())
  wideRatios.push(w / wp)
  wideMs += w
}

// 3. deriveMessages after every step of a live run ------------------------------
let deriveTotal = 0
let deriveCalls = 0
{
  const inputs = cloneJson(ops)
  const s = new Session('bench-derive')
  gc()
  for (let i = 0; i < inputs.length; i++) {
    if (stepStartSet.has(i)) {
      const t = now()
      s.deriveMessages()
      deriveTotal += now() - t
      deriveCalls += 1
    }
    const op = inputs[i]
    op.opts === undefined ? s.append(op.type, op.data) : s.append(op.type, op.data, op.opts)
  }
}

// 4. memory retained by a resumed session, before and after `events` is read ----
// Measured in a fresh child process: in this one, what the earlier phases
// free between two readings (and whether the allocator hands it back to
// the system) would move the difference either way.
const memoryFile = path.join(os.tmpdir(), `dsh-bench-memory-${process.pid}.jsonl`)
fs.writeFileSync(memoryFile, jsonl)
const retained = JSON.parse(
  execFileSync(process.execPath, ['--expose-gc', fileURLToPath(import.meta.url), '--memory', memoryFile], {
    encoding: 'utf8',
  }),
)
fs.rmSync(memoryFile, { force: true })
const perEvent = (a, b, k) => ((b[k] - a[k]) / ops.length).toFixed(0)
const [base, afterResume, afterEvents] = retained

const row = (name, value, target = '') => console.log(`${name.padEnd(58)} ${String(value).padStart(14)}  ${target}`)
console.log('')
row('measure', 'value', 'target')
row('append per event / JS floor (parse∘stringify + freeze)', median(appendRatios).toFixed(2) + 'x', '<= 1.2x')
row('  append per event (µs), median of rounds', ((appendMs / ROUNDS / ops.length) * 1000).toFixed(2))
row('  floor per event (µs)', ((floorMs / ROUNDS / ops.length) * 1000).toFixed(2))
row('fromJsonl + first deriveMessages / JSON.parse of lines', median(resumeRatios).toFixed(2) + 'x', '<= 0.5x')
row('  fromJsonl + derive (ms)', (resumeMs / ROUNDS).toFixed(1))
row('  same from a Buffer (fs.readFile without encoding)', median(resumeBufferRatios).toFixed(2) + 'x')
row('    fromJsonl(Buffer) + derive (ms)', (resumeBufferMs / ROUNDS).toFixed(1))
row('  JSON.parse of every line (ms)', (parseMs / ROUNDS).toFixed(1))
row('  same from a non-ASCII string / JSON.parse of its lines', median(wideRatios).toFixed(2) + 'x')
row('    fromJsonl(non-ASCII string) + derive (ms)', (wideMs / ROUNDS).toFixed(1))
row(`deriveMessages after every step, total (ms, ${deriveCalls} calls)`, deriveTotal.toFixed(1))
row('  per call (µs)', ((deriveTotal / Math.max(deriveCalls, 1)) * 1000).toFixed(1))
row('resumed session retained, before events read (B/event, rss)', perEvent(base, afterResume, 'rss'))
row('  of which JS heap (B/event)', perEvent(base, afterResume, 'heap'))
row('after events is first read (B/event, rss)', perEvent(base, afterEvents, 'rss'))
row('  of which JS heap (B/event)', perEvent(base, afterEvents, 'heap'))
row('JSONL size (B/event)', (Buffer.byteLength(jsonl) / ops.length).toFixed(0))

