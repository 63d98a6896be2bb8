// The published line (published/, the drop-in for @deepseek-ai/dsh-session
// 0.1.1-rc.2) side by side with 0.1.1-rc.2 itself, in one run, on the work a
// drop-in user does: live append, an agent loop's steps, Session.create of a
// stored log, Session.fromRestore of JSON.parse'd lines (as a persistence
// backend does) and the event loop's longest pause while it resumes.
//
//   node benchmark/published.mjs [--runs 3] [--n 100000] [--big] [--big-n 1000000]
//        [--parts append,loop,seed,restore] [--ours PATH] [--ref PATH] [--json FILE]
//
// As ../shared/bench/compare.mjs does for v0: every run of every part is a
// fresh child process (node --expose-gc, workload generated untimed by
// lib/published-workload.mjs, the same for both), the two sides alternate run
// by run (which goes first alternates too), and the table shows
// median(ours) / median(reference) with the range of the run-by-run ratios.
// Each child also hashes JSON.stringify(deriveMessages()) at the end of its
// workload; every child of a part must agree, both sides, else the exit
// status is 1. Times are printed, never asserted.
//
// --ours defaults to ../published/lib/index.js, --ref to the reference
// installed in ../test-published (npm ci --legacy-peer-deps there).
// --ours PATH --ref PATH with the same path measures the harness itself.
import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, writeFileSync } from 'node:fs'
import { dirname, resolve } from 'node:path'
import { PerformanceObserver, monitorEventLoopDelay } from 'node:perf_hooks'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { generateOps, storedHeader, toEvents } from './lib/published-workload.mjs'

const self = fileURLToPath(import.meta.url)
const root = resolve(dirname(self), '..')
const argv = process.argv.slice(2)
const opt = (name, dflt) => {
  const i = argv.indexOf(`--${name}`)
  return i >= 0 && i + 1 < argv.length && !argv[i + 1].startsWith('--') ? argv[i + 1] : dflt
}
const flag = (name) => argv.includes(`--${name}`)

const now = () => performance.now()
const gc = () => {
  if (globalThis.gc) {
    globalThis.gc()
    globalThis.gc()
  }
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const turn = () => new Promise((r) => setImmediate(r))
const sha = (s) => createHash('sha256').update(s).digest('hex').slice(0, 16)

// ---------------------------------------------------------------- children

async function load(path) {
  const m = await import(pathToFileURL(path).href)
  if (typeof m.Session?.create !== 'function') throw new Error(`${path} exports no Session.create`)
  return m
}

function check(session, messages) {
  return {
    events: session.seq,
    nodes: session.surface.nodes.length,
    messages: messages.length,
    derivedSha: sha(JSON.stringify(messages)),
  }
}

/** Names the call that threw, so a failure says which append of which event. */
function failed(what, error) {
  if (error !== null && typeof error === 'object') {
    error.benchCall = what
    return error
  }
  return Object.assign(new Error(String(error)), { benchCall: what })
}

/**
 * The longest gap of a 1 ms interval timer, with the GC time (PerformanceObserver
 * 'gc' entries) that fell inside it, and monitorEventLoopDelay's max beside it.
 */
function pauseProbe() {
  const gcs = []
  const obs = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) gcs.push([e.startTime, e.startTime + e.duration])
  })
  obs.observe({ entryTypes: ['gc'] })
  const eld = monitorEventLoopDelay({ resolution: 1 })
  eld.enable()
  let last = now()
  let max = { from: last, to: last }
  const timer = setInterval(() => {
    const t = now()
    if (t - last > max.to - max.from) max = { from: last, to: t }
    last = t
  }, 1)
  return {
    async stop() {
      await sleep(20)
      clearInterval(timer)
      eld.disable()
      await sleep(5) // let the observer deliver
      obs.disconnect()
      const gap = max.to - max.from
      let inGc = 0
      for (const [a, b] of gcs) inGc += Math.max(0, Math.min(b, max.to) - Math.max(a, max.from))
      return { pause: gap, pauseGc: inGc, eldMax: eld.max / 1e6 }
    },
  }
}

const CHILDREN = {
  /** Live append of the n-event log into Session.create(id), nothing else. */
  async append(m, n) {
    const { ops } = generateOps(n)
    gc()
    const s = m.Session.create('bench-append')
    let i = 0
    const t0 = now()
    try {
      for (; i < ops.length; i++) {
        const op = ops[i]
        if (op.opts === undefined) s.append(op.type, op.data)
        else s.append(op.type, op.data, op.opts)
      }
    } catch (error) {
      throw failed(`session.append(${JSON.stringify(ops[i].type)}, …) of op ${i}`, error)
    }
    const ms = now() - t0
    return { metrics: { append_ms: ms, append_ns_per_event: (ms * 1e6) / n }, check: check(s, s.deriveMessages()) }
  },

  /**
   * The loop's steps: deriveMessages() before every step/start, then after it
   * requestHeader() (+ headerEquals against the header the loop last built)
   * and requestContext(); every event appended as it comes.
   */
  async loop(m, n) {
    const { ops, stepStarts } = generateOps(n)
    const isStep = new Uint8Array(ops.length)
    for (const i of stepStarts) isStep[i] = 1
    gc()
    const s = m.Session.create('bench-loop')
    const per = []
    let headerMs = 0
    let candidate
    let i = 0
    let what = 'append'
    const tLoop = now()
    try {
      for (; i < ops.length; i++) {
        const op = ops[i]
        if (isStep[i] === 1) {
          what = 'deriveMessages()'
          const t = now()
          s.deriveMessages()
          per.push(now() - t)
          what = 'append'
          s.append(op.type, op.data)
          what = 'requestHeader()/headerEquals()/requestContext()'
          const th = now()
          const baseline = s.requestHeader()
          if (baseline !== undefined && candidate !== undefined) m.headerEquals(baseline, candidate)
          s.requestContext()
          headerMs += now() - th
          continue
        }
        if (op.type === 'request/header') candidate = op.data.header
        what = 'append'
        if (op.opts === undefined) s.append(op.type, op.data)
        else s.append(op.type, op.data, op.opts)
      }
    } catch (error) {
      throw failed(`${what === 'append' ? `session.append(${JSON.stringify(ops[i].type)}, …)` : what} at op ${i}`, error)
    }
    const loopMs = now() - tLoop
    const sorted = [...per].sort((a, b) => a - b)
    return {
      metrics: {
        loop_ms: loopMs,
        derive_total_ms: per.reduce((a, b) => a + b, 0),
        derive_p50_us: sorted[sorted.length >> 1] * 1000,
        header_total_ms: headerMs,
      },
      check: check(s, s.deriveMessages()),
    }
  },

  /** Session.create(id, storedLog) + the first deriveMessages() + requestHeader(). */
  async seed(m, n) {
    const events = toEvents(generateOps(n).ops)
    gc()
    let s, msgs
    const t0 = now()
    try {
      s = m.Session.create('bench-seed', events)
    } catch (error) {
      throw failed(`Session.create('bench-seed', events[${n}])`, error)
    }
    const t1 = now()
    msgs = s.deriveMessages()
    const t2 = now()
    s.requestHeader()
    const t3 = now()
    return {
      metrics: { seed_ms: t3 - t0, seed_construct_ms: t1 - t0, seed_first_derive_ms: t2 - t1 },
      check: check(s, msgs),
    }
  },

  /**
   * A persistence backend's resume: the stored log's lines JSON.parse'd 4,096
   * a turn of the event loop (untimed against the session: the same for both),
   * then Session.fromRestore(id, parsed, header) + the first deriveMessages()
   * + requestHeader() (the resume, timed), a pause probe running throughout.
   */
  async restore(m, n) {
    const lines = storedLines(n)
    gc()
    await sleep(50)
    const probe = pauseProbe()
    await sleep(20)
    const t0 = now()
    const parsed = []
    for (let from = 0; from < lines.length; await turn()) {
      const to = Math.min(lines.length, from + 4096)
      for (let k = from; k < to; k++) parsed.push(JSON.parse(lines[k]))
      from = to
    }
    const t1 = now()
    let s
    try {
      s = m.Session.fromRestore('bench-restore', parsed, storedHeader('bench-restore'))
    } catch (error) {
      throw failed(`Session.fromRestore('bench-restore', parsed[${n}], header)`, error)
    }
    const t2 = now()
    const msgs = s.deriveMessages()
    const t3 = now()
    s.requestHeader()
    const t4 = now()
    const p = await probe.stop()
    return {
      metrics: {
        parse_ms: t1 - t0,
        restore_construct_ms: t2 - t1,
        restore_first_derive_ms: t3 - t2,
        restore_ms: t4 - t1,
        max_pause_ms: p.pause,
        max_pause_gc_ms: p.pauseGc,
        eld_max_ms: p.eldMax,
      },
      check: check(s, msgs),
    }
  },
}

/** The log as JSONL lines; the ops and events are garbage once this returns. */
function storedLines(n) {
  const events = toEvents(generateOps(n).ops)
  const lines = new Array(events.length)
  for (let i = 0; i < events.length; i++) lines[i] = JSON.stringify(events[i])
  return lines
}

if (flag('worker')) {
  const part = opt('worker')
  try {
    const m = await load(opt('impl'))
    const result = await CHILDREN[part](m, Number(opt('n')))
    process.stdout.write(`BENCH_RESULT ${JSON.stringify(result)}\n`)
    process.exit(0)
  } catch (error) {
    process.stdout.write(`BENCH_ERROR ${JSON.stringify({ call: error?.benchCall, error: String(error?.stack ?? error) })}\n`)
    process.exit(1)
  }
}

// ---------------------------------------------------------------- orchestrator

const ours = resolve(opt('ours', resolve(root, 'published/lib/index.js')))
const ref = resolve(opt('ref', resolve(root, 'test-published/node_modules/@deepseek-ai/dsh-session/lib/index.js')))
for (const [name, path] of [['ours', ours], ['reference', ref]]) {
  if (!existsSync(path)) {
    console.error(`benchmark/published.mjs: ${name} not found at ${path}${name === 'reference' ? ' (cd test-published && npm ci --legacy-peer-deps)' : ''}`)
    process.exit(2)
  }
}
const runs = Number(opt('runs', '3'))
const n = Number(opt('n', '100000'))
const bigN = Number(opt('big-n', '1000000'))
const parts = opt('parts', 'append,loop,seed,restore').split(',')
/** [label, child part, events] */
const plan = parts.map((p) => [p, p, n])
if (flag('big')) plan.push(['restore-big', 'restore', bigN])

function runChild(part, impl, events) {
  const r = spawnSync(
    process.execPath,
    ['--expose-gc', '--max-old-space-size=12288', self, '--worker', part, '--impl', impl, '--n', String(events)],
    { encoding: 'utf8', timeout: 900_000, maxBuffer: 64 * 1024 * 1024 },
  )
  const line = (r.stdout ?? '').split('\n').find((l) => l.startsWith('BENCH_RESULT ') || l.startsWith('BENCH_ERROR '))
  if (!line) return { error: `no result (status ${r.status}, signal ${r.signal}): ${(r.stderr ?? '').slice(-2000)}` }
  if (line.startsWith('BENCH_ERROR ')) return { ...JSON.parse(line.slice(12)), failed: true }
  return JSON.parse(line.slice(13))
}

const median = (v) => {
  const s = v.filter(Number.isFinite).sort((a, b) => a - b)
  if (s.length === 0) return NaN
  const k = s.length >> 1
  return s.length % 2 ? s[k] : (s[k - 1] + s[k]) / 2
}

const results = {} // label -> { reference: [result], ours: [result] }
let bad = false
for (const [label, part, events] of plan) {
  const got = (results[label] = { reference: [], ours: [], events })
  for (let r = 0; r < runs; r++) {
    const order = r % 2 === 0 ? ['reference', 'ours'] : ['ours', 'reference']
    for (const side of order) {
      const res = runChild(part, side === 'ours' ? ours : ref, events)
      if (res.error) {
        console.error(`${label} (${side}, run ${r + 1}) failed${res.call ? ` in ${res.call}` : ''}:\n${String(res.error).slice(0, 3000)}`)
        bad = true
        continue
      }
      got[side].push(res)
    }
    process.stderr.write(`${label}: run ${r + 1}/${runs} done\n`)
  }
}

/** [label, metric, bar, kind]: kind 'ratio' (ours/ref ≤ bar) or 'abs' (ours ≤ bar ms). */
const ROWS = [
  ['append', 'append_ns_per_event', 0.4, 'ratio', 'live append, ns/event'],
  ['loop', 'loop_ms', 0.5, 'ratio', 'agent loop (append + derive + header per step)'],
  ['loop', 'derive_p50_us', undefined, 'ratio', '  deriveMessages() p50 per step, µs'],
  ['loop', 'header_total_ms', undefined, 'ratio', '  requestHeader()+headerEquals()+requestContext(), total'],
  ['seed', 'seed_ms', 0.6, 'ratio', 'Session.create(id, events) + first derive'],
  ['restore', 'restore_ms', undefined, 'ratio', `fromRestore + first derive, ${n} events`],
  ['restore', 'parse_ms', undefined, 'ratio', '  (JSON.parse of the lines, the same work)'],
  ['restore', 'max_pause_ms', undefined, 'abs', '  longest event-loop pause, ms'],
  ['restore-big', 'restore_ms', 0.1, 'ratio', `resume of a ${bigN}-event log (fromRestore + first derive)`],
  ['restore-big', 'parse_ms', undefined, 'ratio', '  (JSON.parse of the lines, the same work)'],
  ['restore-big', 'max_pause_ms', 50, 'abs', `  longest event-loop pause in the resume, ms`],
  ['restore-big', 'max_pause_gc_ms', undefined, 'abs', '  of which GC, ms'],
  ['restore-big', 'eld_max_ms', undefined, 'abs', '  monitorEventLoopDelay max, ms'],
]

const pad = (s, w) => String(s).padEnd(w)
const f = (x) => (Number.isFinite(x) ? (Math.abs(x) >= 100 ? x.toFixed(0) : x.toFixed(2)) : '—')
console.log(`ours       ${ours}\nreference  ${ref}`)
console.log(`${runs} runs per part, each in a fresh child, sides alternated; medians; ratio = ours / reference (< 1: ours better); range = run-by-run ratios`)
console.log('(a shared 2-core machine: the figures are noisy, read the ranges)\n')
console.log(`${pad('figure', 72)}${pad('reference', 11)}${pad('ours', 11)}${pad('ratio', 8)}${pad('range', 13)}bar`)
let missed = 0
const summary = {}
for (const [label, metric, bar, kind, title] of ROWS) {
  const got = results[label]
  if (!got) continue
  const a = got.reference.map((r) => r.metrics[metric])
  const b = got.ours.map((r) => r.metrics[metric])
  const ma = median(a)
  const mb = median(b)
  const pairs = []
  for (let i = 0; i < Math.min(a.length, b.length); i++) pairs.push(b[i] / a[i])
  const ratio = mb / ma
  const value = kind === 'abs' ? mb : ratio
  const range = kind === 'abs' ? (b.length ? `${f(Math.min(...b))}-${f(Math.max(...b))}` : '') : pairs.length ? `${Math.min(...pairs).toFixed(2)}-${Math.max(...pairs).toFixed(2)}` : ''
  let mark = ''
  if (bar !== undefined && !Number.isFinite(value)) {
    missed++
    mark = 'no figure (a side failed)'
  } else if (bar !== undefined) {
    const ok = value <= bar
    if (!ok) missed++
    mark = kind === 'abs' ? `≤ ${bar} ms ${ok ? 'met' : 'MISSED'}` : `≤ ${bar}x ${ok ? 'met' : 'MISSED'}`
  }
  summary[`${label} ${metric}`] = { reference: ma, ours: mb, ratio, pairs, oursRuns: b, referenceRuns: a }
  console.log(`${pad(title, 72)}${pad(f(ma), 11)}${pad(f(mb), 11)}${pad(kind === 'abs' || !Number.isFinite(ratio) ? '' : ratio.toFixed(2), 8)}${pad(range, 13)}${mark}`)
}

console.log('\nsame derived messages (hash of JSON.stringify(deriveMessages()) at the end of each workload, every child):')
for (const [label, got] of Object.entries(results)) {
  const all = [...got.reference, ...got.ours].map((r) => JSON.stringify(r.check))
  const same = all.length > 0 && all.every((c) => c === all[0]) && got.ours.length > 0 && got.reference.length > 0
  if (!same) bad = true
  const ourFirst = got.ours[0]?.check
  console.log(`  ${pad(label, 12)}${same ? 'yes' : 'NO'}  ${JSON.stringify(same ? got.reference[0].check : { reference: got.reference[0]?.check, ours: ourFirst })}`)
}
console.log(`\n${missed === 0 ? 'every bar met' : `${missed} bar(s) missed`}${bad ? '; FAILED: a child failed or the sides derived different messages' : ''}`)
const jsonOut = opt('json')
if (jsonOut) writeFileSync(jsonOut, JSON.stringify({ ours, ref, runs, n, bigN, summary, results }, null, 2))
if (bad) process.exitCode = 1
