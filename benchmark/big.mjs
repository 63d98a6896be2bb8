// Big sessions (issue 21): time and memory of a resume, side by side with
// JSON.parse of every line kept in an array, each measurement in a fresh
// child process (`node --expose-gc`):
//
//   Session.fromJsonl(Buffer) and fromJsonl(string) of the log, then the
//     first deriveMessages()  vs  JSON.parse of every line of the same Buffer
//     (a line decoded at a time) or string (split at newlines): the time
//     (the file read before the clock starts), peak RSS (Linux VmHWM, reset
//     once the input is read; counted from the child's RSS before the read,
//     so the caller's input is in it) and RSS retained after gc with the
//     input dropped, and again a second later after the next
//     deriveMessages() (a loop's next step, which collects the compressed
//     blocks of the texts the read left raw);
//   open through the JSONL and the SQLite store, then the first
//     deriveMessages(): times, longest event-loop pauses (1 ms timer, GC time
//     inside the pause shown apart), peak and retained RSS;
//   toJsonl() of a ~600 MiB log (big-payload shape), past V8's string limit:
//     what happens, and the Buffer / file / stream path when the package
//     offers one (feature-detected; ALTERNATIVES says what is looked for).
//
// Shapes: `agent` is the shared workload (test-data/bench, ~227 MiB at 1M
// events); `big-payload` is the same with every 100th tool result (1%)
// carrying a 1-10 MB tool output (deterministic; lib/big-sessions.mjs), about
// 290 MiB at 300k events (issue 21's log of that kind was 267 MiB). Logs are cut back to their last whole turn and
// written to a temporary folder, removed at the end.
//
//   npm run build && node benchmark/big.mjs [--events 300000] [--shape agent|big-payload]
//     [--runs 3] [--tojsonl-mib 600 (0: skip)]

import { createHash } from 'node:crypto'
import * as fs from 'node:fs'
import * as path from 'node:path'
import { pipeline } from 'node:stream/promises'
import { fileURLToPath } from 'node:url'
import {
  ID, Session, bigPayloadPlan, childTask, eventSource, median, mib, parseArgs, pauseProbe, peakProbe, range, reply, removeAtExit, rss,
  runChild, settle, sleep, storedLog, storesOf, table, tmpDir, workloadOps, writeJsonl,
} from './lib/big-sessions.mjs'

const self = fileURLToPath(import.meta.url)

/**
 * Ways to write a log too big for one string, looked for on a session in this
 * order: [method, how it is called]. The first one present is used; add the
 * package's documented path here if it has another name.
 */
const ALTERNATIVES = [
  ['toJsonlBuffer', (s) => s.toJsonlBuffer()],
  ['writeJsonl', (s, file) => s.writeJsonl(file)],
  ['toJsonlFile', (s, file) => s.toJsonlFile(file)],
  ['toJsonlStream', (s) => s.toJsonlStream()],
  ['jsonlStream', (s) => s.jsonlStream()],
]

// ---------------------------------------------------------------- children

/** Read the log as the task says (`buffer` or `string`); a string past V8's limit throws. */
const readInput = (file, input) => (input === 'string' ? fs.readFileSync(file, 'utf8') : fs.readFileSync(file))

const CHILDREN = {
  /** Write the measured log to a JSONL and a SQLite store. */
  async make({ dir, asked, shape }) {
    const { ops } = workloadOps(asked)
    const plan = shape === 'big-payload' ? bigPayloadPlan(ops) : new Map()
    const stored = await storedLog(dir, ops.length, eventSource(ops, plan))
    const plannedBytes = [...plan.values()].reduce((sum, [bytes]) => sum + bytes, 0)
    return { stored, events: ops.length, planned: plan.size, plannedBytes }
  },

  /** Write the toJsonl log: the big-payload shape up to the first whole turn past `mib` MiB. */
  async makeBig({ dir, mib: size }) {
    const { ops } = workloadOps(Math.ceil(size * 1400))
    const file = path.join(dir, 'big.jsonl')
    const [count, bytes] = writeJsonl(file, ops.length, eventSource(ops, bigPayloadPlan(ops)), size * 2 ** 20)
    return { dir, file, count, bytes }
  },

  /** Baseline: JSON.parse of every line, kept in an array. */
  async parse({ file, input, events }) {
    await settle()
    const rss0 = rss()
    let data = readInput(file, input)
    await settle()
    const probe = peakProbe()
    const t0 = performance.now()
    const parsed = []
    if (typeof data === 'string') {
      for (const line of data.split('\n')) if (line.length > 0) parsed.push(JSON.parse(line))
    } else {
      for (let from = 0; from < data.length;) {
        const nl = data.indexOf(10, from)
        const to = nl < 0 ? data.length : nl
        if (to > from) parsed.push(JSON.parse(data.toString('utf8', from, to)))
        from = to + 1
      }
    }
    const t1 = performance.now()
    const peak = probe.peak()
    data = undefined
    await settle()
    if (parsed.length !== events + 1) throw new Error(`parsed ${parsed.length} lines`)
    return { time: t1 - t0, peak: peak - rss0, retained: rss() - rss0, peakReset: probe.reset }
  },

  /** Session.fromJsonl of the log, then the first derive. */
  async fromJsonl({ file, input, events }) {
    await settle()
    const rss0 = rss()
    let data = readInput(file, input)
    await settle()
    const probe = peakProbe()
    const t0 = performance.now()
    const session = Session.fromJsonl(data)
    const t1 = performance.now()
    const messages = session.deriveMessages()
    const t2 = performance.now()
    const peak = probe.peak()
    data = undefined
    await settle()
    if (session.seq !== events || messages.length === 0) throw new Error(`read ${session.seq} events`)
    const retained = rss() - rss0
    // An agent loop's next step, a second later: by then the compressor the
    // read started is done, and the step collects its blocks.
    await sleep(1000)
    session.deriveMessages()
    await settle()
    return { time: t1 - t0, derive: t2 - t1, peak: peak - rss0, retained, retainedStep: rss() - rss0, peakReset: probe.reset }
  },

  /** Open through a store, then the first derive. */
  async open({ dir, store: kind, events }) {
    const store = storesOf(dir)[kind]()
    await settle()
    const rss0 = rss()
    const peak = peakProbe()
    const probe = pauseProbe()
    await sleep(20)
    const t0 = performance.now()
    const session = await store.open(ID)
    const t1 = performance.now()
    const messages = session.deriveMessages()
    const t2 = performance.now()
    await probe.stop()
    const top = peak.peak()
    await settle()
    if (session.seq !== events || messages.length === 0) throw new Error(`opened ${session.seq} events`)
    const retained = rss() - rss0
    await store.close()
    return {
      open: t1 - t0, derive: t2 - t1, openPause: probe.pause(t0, t1), derivePause: probe.pause(t1, t2),
      peak: top - rss0, retained, peakReset: peak.reset,
    }
  },

  /** toJsonl() of a log past V8's string limit, then the first alternative the package offers. */
  async toJsonl({ file }) {
    const digest = createHash('sha256')
    await pipeline(fs.createReadStream(file), digest)
    const fileHash = digest.digest('hex')
    const fileBytes = fs.statSync(file).size
    let data = fs.readFileSync(file)
    const t0 = performance.now()
    const session = Session.fromJsonl(data)
    const load = performance.now() - t0
    data = undefined
    await settle()
    const out = { fileBytes, load, events: session.seq }
    const t1 = performance.now()
    try {
      const text = session.toJsonl()
      const ms = performance.now() - t1
      const bytes = Buffer.byteLength(text)
      out.string = { ok: true, ms, bytes, same: bytes === fileBytes && createHash('sha256').update(text).digest('hex') === fileHash }
    } catch (error) {
      out.string = { ok: false, ms: performance.now() - t1, code: error.code, error: `${error.name}: ${error.message}`.slice(0, 160) }
    }
    await settle()
    const names = new Set([
      ...Object.getOwnPropertyNames(Session.prototype).filter((n) => /jsonl/i.test(n)),
      ...Object.getOwnPropertyNames(Session).filter((n) => /jsonl/i.test(n)),
    ])
    names.delete('toJsonl')
    names.delete('fromJsonl')
    out.found = [...names]
    const found = ALTERNATIVES.find(([name]) => typeof session[name] === 'function')
    if (found === undefined) return out
    const dir = removeAtExit(tmpDir('tojsonl'))
    const target = path.join(dir, 'out.jsonl')
    const t2 = performance.now()
    try {
      const hash = createHash('sha256')
      let bytes
      let result = await found[1](session, target)
      if (typeof result === 'string') result = Buffer.from(result)
      if (result instanceof Uint8Array) {
        hash.update(result)
        bytes = result.byteLength
      } else if (result !== undefined && (typeof result.pipe === 'function' || result[Symbol.asyncIterator] !== undefined)) {
        await pipeline(result, fs.createWriteStream(target))
      }
      const ms = performance.now() - t2
      if (bytes === undefined) {
        bytes = fs.statSync(target).size
        await pipeline(fs.createReadStream(target), hash)
      }
      out.alternative = { name: found[0], ok: true, ms, bytes, same: bytes === fileBytes && hash.digest('hex') === fileHash }
    } catch (error) {
      out.alternative = { name: found[0], ok: false, ms: performance.now() - t2, code: error.code, error: `${error.name}: ${error.message}`.slice(0, 160) }
    }
    fs.rmSync(dir, { recursive: true, force: true })
    return out
  },
}

const task = childTask(process.argv)
if (task !== undefined) reply(await CHILDREN[task.kind](task))

// ---------------------------------------------------------------- parent

const { options } = parseArgs(process.argv.slice(2))
const asked = Number(options.events ?? 300_000)
const shape = options.shape ?? 'agent'
const runs = Number(options.runs ?? 3)
const toJsonlMiB = Number(options['tojsonl-mib'] ?? 600)
if (shape !== 'agent' && shape !== 'big-payload') throw new Error(`--shape is agent or big-payload, not ${shape}`)

// The logs are written by a child, so this process stays small while the others measure.
let t = performance.now()
const made = runChild(self, { kind: 'make', dir: removeAtExit(tmpDir('stored')), asked, shape })
if (made.error !== undefined) throw new Error(`writing the log failed: ${made.error}`)
const { stored, events } = made
console.log(`log: ${events} events of the ${shape} shape (the workload's first ${asked}, cut back to its last whole turn)`
  + `${made.planned > 0 ? `, ${made.planned} tool results of 1–10 MB (${mib(made.plannedBytes).toFixed(0)} MiB)` : ''}; `
  + `${mib(stored.bytes).toFixed(0)} MiB of JSONL, ${mib(stored.dbBytes).toFixed(0)} MiB of SQLite; `
  + `written in ${((performance.now() - t) / 1000).toFixed(0)} s; Node ${process.version}; ${runs} run(s)`)

let big
if (toJsonlMiB > 0) {
  t = performance.now()
  big = runChild(self, { kind: 'makeBig', dir: removeAtExit(tmpDir('tojsonl-log')), mib: toJsonlMiB })
  if (big.error !== undefined) throw new Error(`writing the toJsonl log failed: ${big.error}`)
  console.log(`toJsonl log: ${big.count} events of the big-payload shape, ${mib(big.bytes).toFixed(0)} MiB; written in ${((performance.now() - t) / 1000).toFixed(0)} s`)
}

const results = {}
const record = (name, value) => {
  ;(results[name] ??= []).push(value)
  if (value.error !== undefined) console.log(`${name}: failed: ${value.error}`)
}
const base = { dir: stored.dir, file: stored.file, events }
t = performance.now()
for (let r = 0; r < runs; r++) {
  for (const input of ['buffer', 'string']) {
    record(`parse-${input}`, runChild(self, { ...base, kind: 'parse', input }))
    record(`fromJsonl-${input}`, runChild(self, { ...base, kind: 'fromJsonl', input }))
  }
  for (const kind of ['jsonl', 'sqlite']) record(`open-${kind}`, runChild(self, { ...base, kind: 'open', store: kind }))
}
const toJsonl = big === undefined ? undefined : runChild(self, { kind: 'toJsonl', file: big.file })
console.log(`measured in ${((performance.now() - t) / 1000).toFixed(0)} s\n`)

const of = (name, key) => (results[name] ?? []).map((x) => key.split('.').reduce((v, k) => v?.[k], x))
const ratio = (a, b) => of(...a).map((x, i) => x / of(...b)[i]).filter(Number.isFinite)
const fileMiB = mib(stored.bytes)
const memory = (name, key) => {
  const v = of(name, key).filter(Number.isFinite).map(mib)
  return v.length === 0 ? '—' : `${range(v, 0)} MiB, ${(median(v) / fileMiB).toFixed(2)}×`
}
if ((results['fromJsonl-buffer'] ?? []).some((x) => x.peakReset === false)) {
  console.log('(/proc/self/clear_refs could not be written: peaks include the file read)\n')
}

console.log(`Resume from the file, ${Math.round(events / 1000)}k events (${fileMiB.toFixed(0)} MiB), against JSON.parse of every line kept in an array; median (min–max) of ${runs} run(s); memory in MiB and the median as a multiple of the file\n`)
const rows = []
for (const input of ['buffer', 'string']) {
  const ours = `fromJsonl-${input}`
  const parse = `parse-${input}`
  const label = input === 'buffer' ? 'Buffer' : 'string'
  rows.push(
    [`time, Session.fromJsonl(${label})`, `${range(of(ours, 'time'), 0)} ms`, `${range(of(parse, 'time'), 0)} ms`, range(ratio([ours, 'time'], [parse, 'time']), 2, 'x'), '≤ 0.5x'],
    [`  its first deriveMessages()`, `${range(of(ours, 'derive'), 0)} ms`, '—', '—', '—'],
    [`peak RSS, fromJsonl(${label})`, memory(ours, 'peak'), memory(parse, 'peak'), range(ratio([ours, 'peak'], [parse, 'peak']), 2, 'x'), input === 'buffer' ? '≤ 2× the file' : '—'],
    [`retained RSS after gc, fromJsonl(${label})`, memory(ours, 'retained'), memory(parse, 'retained'), range(ratio([ours, 'retained'], [parse, 'retained']), 2, 'x'), '≤ 0.8x'],
    [`  the same a second later, after the next deriveMessages()`, memory(ours, 'retainedStep'), memory(parse, 'retained'), range(ratio([ours, 'retainedStep'], [parse, 'retained']), 2, 'x'), '—'],
  )
}
table(['measure', 'ours', 'JSON.parse of every line', 'ratio', 'target (issue 21)'], rows, 'lrrrl')

console.log(`\nStore open + first deriveMessages(); a pause is the longest gap of a 1 ms timer (median less the GC inside it)\n`)
const pause = (name, key) => `${range(of(name, `${key}.ms`))}; less GC ${range(of(name, `${key}.lessGc`).length > 0 ? [median(of(name, `${key}.lessGc`))] : [])}`
table(['measure', 'JSONL store', 'SQLite store', 'target (issue 21)'], [
  ['open, ms', range(of('open-jsonl', 'open'), 0), range(of('open-sqlite', 'open'), 0), '—'],
  ['  its longest pause, ms', pause('open-jsonl', 'openPause'), pause('open-sqlite', 'openPause'), '≤ 50 ms'],
  ['first deriveMessages(), ms', range(of('open-jsonl', 'derive'), 0), range(of('open-sqlite', 'derive'), 0), '—'],
  ['  its longest pause, ms', pause('open-jsonl', 'derivePause'), pause('open-sqlite', 'derivePause'), '≤ 50 ms'],
  ['peak RSS', memory('open-jsonl', 'peak'), memory('open-sqlite', 'peak'), '≤ 2× the log'],
  ['retained RSS after gc', memory('open-jsonl', 'retained'), memory('open-sqlite', 'retained'), '—'],
], 'lrrl')

if (toJsonl !== undefined) {
  console.log(`\ntoJsonl() of a ${mib(big.bytes).toFixed(0)} MiB log (${big.count} events, big-payload shape, read by Session.fromJsonl(Buffer)${toJsonl.load === undefined ? '' : ` in ${toJsonl.load.toFixed(0)} ms`})\n`)
  const said = (x) => (x.ok ? `${mib(x.bytes).toFixed(0)} MiB${x.same === undefined ? '' : x.same ? ', the same bytes as the file' : ', NOT the bytes of the file'}` : `${x.code === undefined ? 'no code' : `code ${x.code}`}: ${x.error}`)
  const rows = []
  if (toJsonl.error !== undefined) rows.push(['the child', `failed: ${toJsonl.error}`, '—'])
  if (toJsonl.string !== undefined) rows.push(['toJsonl() (a string)', said(toJsonl.string), toJsonl.string.ms.toFixed(0)])
  if (toJsonl.alternative !== undefined) rows.push([`${toJsonl.alternative.name}()`, said(toJsonl.alternative), toJsonl.alternative.ms.toFixed(0)])
  else if (toJsonl.found !== undefined) rows.push([`no Buffer/file/stream path (looked for ${ALTERNATIVES.map(([n]) => n).join(', ')})`, toJsonl.found.length > 0 ? `other JSONL methods: ${toJsonl.found.join(', ')}` : '—', '—'])
  table(['path', 'result', 'ms'], rows, 'llr')
  console.log('\ntarget (issue 21): toJsonl of a 600 MiB log works through the documented path; a coded error where a string cannot hold it')
}
