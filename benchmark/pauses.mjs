// The event loop at a million events (issues 17 and 21), side by side with
// plain Node doing the same work, each measurement in a fresh child process
// (`node --expose-gc`, started from a collected heap):
//
//   open the session through the JSONL store and through the SQLite store,
//     then its first deriveMessages()  vs  reading the file and JSON.parse of
//     every line, 4,096 lines per event-loop turn
//   flush a live session (built by append in the child) to a fresh store in
//     one store.flush() call  vs  JSON.stringify of 4,096 events per part,
//     fs append of each part, one fsync
//   the first flush after a resume: open the stored session through a store
//     (or read its file with Session.fromJsonl), append one turn, flush it to
//     the store
//   resume (store open, Session.fromJsonl of the file)  vs  the reference's
//     new Session(id, events) of the parsed lines (when ../shared is beside
//     the clone)
//
// The longest pause is the longest gap of a 1 ms interval timer inside the
// window, shown with the GC time inside that gap taken out. The log is the
// shared agent workload (test-data/bench), cut back to its last whole turn,
// written to a temporary folder that is removed at the end.
//
//   npm run build && node benchmark/pauses.mjs [events=1000000] [--runs 3]

import * as fs from 'node:fs'
import * as path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import {
  HEADER, ID, REFERENCE, Session, childTask, eventSource, mib, parseArgs, pauseProbe, range, removeAtExit, reply, settle, sleep,
  storedLog, storesOf, table, tmpDir, turn, workloadOps, runChild,
} from './lib/big-sessions.mjs'

const self = fileURLToPath(import.meta.url)
/** Events per part of the plain-Node baselines (the stores' flush uses the same). */
const PART = 4096

// ---------------------------------------------------------------- children

const CHILDREN = {
  /** Open through a store, then the first derive. */
  async open({ dir, store: kind, events }) {
    const store = storesOf(dir)[kind]()
    await settle()
    const probe = pauseProbe()
    await sleep(20)
    const t0 = performance.now()
    const session = await store.open(ID)
    const t1 = performance.now()
    const messages = session.deriveMessages()
    const t2 = performance.now()
    await probe.stop()
    if (session.seq !== events || messages.length === 0) throw new Error(`opened ${session.seq} events, ${messages.length} messages`)
    await store.close()
    return { open: t1 - t0, derive: t2 - t1, openPause: probe.pause(t0, t1), derivePause: probe.pause(t1, t2) }
  },

  /** Baseline: read the file and JSON.parse every line, a part per event-loop turn. */
  async parse({ file, events }) {
    await settle()
    const probe = pauseProbe()
    await sleep(20)
    const t0 = performance.now()
    const bytes = await fs.promises.readFile(file)
    const parsed = []
    for (let from = 0; from < bytes.length; await turn()) {
      let to = from
      for (let k = 0; k < PART && to < bytes.length; k++) {
        const nl = bytes.indexOf(10, to)
        to = nl < 0 ? bytes.length : nl + 1
      }
      for (const line of bytes.toString('utf8', from, to).split('\n')) if (line.length > 0) parsed.push(JSON.parse(line))
      from = to
    }
    const t1 = performance.now()
    await probe.stop()
    if (parsed.length !== events + 1) throw new Error(`parsed ${parsed.length} lines`)
    return { time: t1 - t0, pause: probe.pause(t0, t1) }
  },

  /** A live session built by append, flushed to a fresh store in one call. */
  async flush({ store: kind, events }) {
    const { ops } = workloadOps(events)
    const session = new Session(ID, [], HEADER)
    for (const { type, data, opts } of ops) {
      if (opts === undefined) session.append(type, data)
      else session.append(type, data, opts)
    }
    ops.length = 0
    const dir = removeAtExit(tmpDir('flush'))
    const store = storesOf(dir)[kind]()
    await settle()
    const probe = pauseProbe()
    await sleep(20)
    const t0 = performance.now()
    const written = await store.flush(session)
    const t1 = performance.now()
    await probe.stop()
    await store.close()
    fs.rmSync(dir, { recursive: true, force: true })
    if (written !== events) throw new Error(`flushed ${written} of ${events}`)
    return { time: t1 - t0, pause: probe.pause(t0, t1) }
  },

  /** Baseline: the same events written by plain Node, a part per write, one fsync. */
  async write({ events }) {
    const { ops } = workloadOps(events)
    const eventAt = eventSource(ops)
    const dir = removeAtExit(tmpDir('write'))
    await settle()
    const probe = pauseProbe()
    await sleep(20)
    const t0 = performance.now()
    const fh = await fs.promises.open(path.join(dir, 'log.jsonl'), 'a')
    await fh.write(`${JSON.stringify({ type: 'session', ...HEADER })}\n`)
    for (let from = 0; from < events; from += PART) {
      let text = ''
      for (let i = from; i < Math.min(events, from + PART); i++) text += `${JSON.stringify(eventAt(i))}\n`
      await fh.write(text)
    }
    await fh.sync()
    await fh.close()
    const t1 = performance.now()
    await probe.stop()
    fs.rmSync(dir, { recursive: true, force: true })
    return { time: t1 - t0, pause: probe.pause(t0, t1) }
  },

  /**
   * Resume a copy of the stored session, derive, append one turn, flush it
   * to the store: resumed by that store's open, or by Session.fromJsonl of
   * the JSONL store's file (a store that holds the history but has not read it).
   * The open is a writer's (`{ write: true }`, as an agent resuming to write
   * opens it): a reader's open leaves its first flush to compare the session
   * with storage event by event (docs/STORES.md), as the fromJsonl rows do.
   */
  async resumeFlush({ dir, store: kind, lastTurn, via }) {
    const copy = removeAtExit(tmpDir('resume'))
    fs.cpSync(dir, copy, { recursive: true })
    const stores = storesOf(copy)
    const store = stores[kind]()
    const session = via === 'open' ? await store.open(ID, { write: true }) : Session.fromJsonl(fs.readFileSync(stores.jsonl().locate(HEADER).path))
    session.deriveMessages()
    await settle()
    const probe = pauseProbe()
    await sleep(20)
    const appended = appendTurn(session, lastTurn + 1)
    await turn() // the window is the flush alone
    const t0 = performance.now()
    const written = await store.flush(session)
    const t1 = performance.now()
    await probe.stop()
    await store.close()
    fs.rmSync(copy, { recursive: true, force: true })
    if (written !== appended) throw new Error(`flushed ${written} of ${appended}`)
    return { time: t1 - t0, pause: probe.pause(t0, t1) }
  },

  /**
   * Fork the opened session (each call is synchronous: its time is its
   * pause), whole and at a turn end mid-log, then each child's first
   * derive; and through the Cordis service (`ctx.sessions.fork`, which
   * makes copies), the session entered with `create(id, { from })`.
   */
  async fork({ dir, events, midEnd }) {
    const store = storesOf(dir).jsonl()
    const session = await store.open(ID)
    session.deriveMessages()
    await settle()
    const { Context } = await import('@deepseek-ai/cordis')
    const { SessionStore } = await import('../index.js')
    const ctx = new Context()
    await ctx.plugin(SessionStore)
    const entered = ctx.sessions.create(`${ID}-entered`, { from: session })
    entered.deriveMessages()
    const out = {}
    const forks = [
      ['whole', () => session.fork(undefined, `${ID}-whole`), events],
      ['mid', () => session.fork(midEnd, `${ID}-mid`), midEnd + 1],
      ['service', () => ctx.sessions.fork(entered), events],
    ]
    for (const [name, fork, length] of forks) {
      const t0 = performance.now()
      const child = fork()
      const t1 = performance.now()
      const messages = child.deriveMessages()
      const t2 = performance.now()
      if (messages.length === 0 || child.seq !== length) throw new Error(`forked ${child.seq} events`)
      out[name] = { fork: t1 - t0, derive: t2 - t1 }
      await settle()
    }
    await store.close()
    return out
  },

  /** Session.fromJsonl of the file's bytes (read before the clock starts), then the first derive. */
  async fromJsonl({ file, events }) {
    const bytes = fs.readFileSync(file)
    await settle()
    const t0 = performance.now()
    const session = Session.fromJsonl(bytes)
    const t1 = performance.now()
    session.deriveMessages()
    const t2 = performance.now()
    if (session.seq !== events) throw new Error(`read ${session.seq} events`)
    return { resume: t1 - t0, derive: t2 - t1 }
  },

  /** The reference: new Session(id, events) of the parsed lines, then the first derive. */
  async reference({ file, events }) {
    const { Session: Reference } = await import(pathToFileURL(REFERENCE).href)
    const t0 = performance.now()
    const lines = fs.readFileSync(file, 'utf8').split('\n')
    const parsed = []
    for (let i = 1; i < lines.length; i++) if (lines[i].length > 0) parsed.push(JSON.parse(lines[i]))
    const tParse = performance.now() - t0
    lines.length = 0
    await settle()
    const t1 = performance.now()
    const session = new Reference(ID, parsed)
    const t2 = performance.now()
    session.deriveMessages()
    const t3 = performance.now()
    if (session.seq !== events) throw new Error(`seeded ${session.seq} events`)
    return { parse: tParse, resume: t2 - t1, derive: t3 - t2 }
  },
}

/** One short turn, as a resumed loop appends it: returns how many events. */
function appendTurn(session, n) {
  const source = { kind: 'user' }
  session.append('turn/start', { turn: n, trigger: { kind: 'message', source } })
  session.append('user/message', { content: [{ type: 'text', text: 'and now the tests, please' }], source }, { surfaceOp: 'append' })
  session.append('step/start', { turn: n, step: 1 })
  session.append('assistant/message', {
    turn: n,
    step: 1,
    content: [{ type: 'text', text: 'All 412 tests pass.' }],
    provenance: { provider: 'deepseek', model: 'deepseek-chat' },
  }, { surfaceOp: 'append' })
  session.append('step/end', { turn: n, step: 1 })
  session.append('turn/end', { turn: n, reason: { kind: 'completed' } })
  return 6
}

const task = childTask(process.argv)
if (task !== undefined) reply(await CHILDREN[task.kind](task))

// ---------------------------------------------------------------- parent

const { options, positional } = parseArgs(process.argv.slice(2))
const asked = Number(String(positional[0] ?? '1000000').replace(/^events=/, ''))
const runs = Number(options.runs ?? 3)
const withReference = fs.existsSync(REFERENCE)

let t = performance.now()
const { ops, lastTurn } = workloadOps(asked)
const events = ops.length
const midEnd = ops.findIndex((op, i) => i >= events / 2 && op.type === 'turn/end')
const stored = await storedLog(removeAtExit(tmpDir('stored')), events, eventSource(ops))
ops.length = 0
console.log(`log: ${events} events (the workload's first ${asked}, cut back to its last whole turn), `
  + `${mib(stored.bytes).toFixed(0)} MiB of JSONL, ${mib(stored.dbBytes).toFixed(0)} MiB of SQLite; `
  + `written in ${((performance.now() - t) / 1000).toFixed(0)} s; Node ${process.version}; ${runs} run(s)`)
if (!withReference) console.log(`(no ${REFERENCE}: the reference rows are left out)`)

const results = {}
const record = (name, value) => {
  ;(results[name] ??= []).push(value)
  if (value.error !== undefined) console.log(`${name}: failed: ${value.error}`)
}
const base = { dir: stored.dir, file: stored.file, events, lastTurn, midEnd }
t = performance.now()
for (let r = 0; r < runs; r++) {
  for (const kind of ['jsonl', 'sqlite']) record(`open-${kind}`, runChild(self, { ...base, kind: 'open', store: kind }))
  record('parse', runChild(self, { ...base, kind: 'parse' }))
  record('fromJsonl', runChild(self, { ...base, kind: 'fromJsonl' }))
  if (withReference) record('reference', runChild(self, { ...base, kind: 'reference' }))
  for (const kind of ['jsonl', 'sqlite']) record(`flush-${kind}`, runChild(self, { ...base, kind: 'flush', store: kind }))
  record('write', runChild(self, { ...base, kind: 'write' }))
  for (const via of ['open', 'fromJsonl']) {
    for (const kind of ['jsonl', 'sqlite']) record(`resumeFlush-${via}-${kind}`, runChild(self, { ...base, kind: 'resumeFlush', store: kind, via }))
  }
  record('fork', runChild(self, { ...base, kind: 'fork' }))
}
console.log(`measured in ${((performance.now() - t) / 1000).toFixed(0)} s\n`)

const of = (name, key) => (results[name] ?? []).map((x) => key.split('.').reduce((v, k) => v?.[k], x))
const E = `${Math.round(events / 1000)}k`
const PAUSE = '≤ 50 ms'
const pauseRow = (what, name, time, pause, target = PAUSE) => [what, range(of(name, time)), range(of(name, `${pause}.ms`)), range(of(name, `${pause}.lessGc`)), target]

console.log(`Longest event-loop pause, ${E} events (ms; median (min–max) of ${runs} run(s))\n`)
table(['work', 'time ms', 'longest pause ms', 'less GC', 'target'], [
  pauseRow('open, JSONL store', 'open-jsonl', 'open', 'openPause'),
  pauseRow('  its first deriveMessages()', 'open-jsonl', 'derive', 'derivePause'),
  pauseRow('open, SQLite store', 'open-sqlite', 'open', 'openPause'),
  pauseRow('  its first deriveMessages()', 'open-sqlite', 'derive', 'derivePause'),
  pauseRow(`plain Node: read the file, JSON.parse every line, ${PART} lines a turn`, 'parse', 'time', 'pause', '—'),
  pauseRow('flush a live session in one call, fresh JSONL store', 'flush-jsonl', 'time', 'pause'),
  pauseRow('flush a live session in one call, fresh SQLite store', 'flush-sqlite', 'time', 'pause'),
  pauseRow(`plain Node: JSON.stringify ${PART} events a part, fs append, fsync`, 'write', 'time', 'pause', '—'),
  pauseRow('first flush after store.open (one turn, 6 events), JSONL', 'resumeFlush-open-jsonl', 'time', 'pause', `${PAUSE}; time ≤ 20 ms`),
  pauseRow('first flush after store.open (one turn, 6 events), SQLite', 'resumeFlush-open-sqlite', 'time', 'pause', `${PAUSE}; time ≤ 20 ms`),
  pauseRow('first flush after Session.fromJsonl of the log, into the JSONL store holding it', 'resumeFlush-fromJsonl-jsonl', 'time', 'pause', `${PAUSE}; time ≤ 20 ms`),
  pauseRow('first flush after Session.fromJsonl of the log, into the SQLite store holding it', 'resumeFlush-fromJsonl-sqlite', 'time', 'pause', `${PAUSE}; time ≤ 20 ms`),
], 'lrrrl')

console.log(`\nFork of the session a JSONL store opened (synchronous calls: each time is a pause)\n`)
table(['work', 'ms', 'target'], [
  ['session.fork() (whole log)', range(of('fork', 'whole.fork')), PAUSE],
  ['  the fork\'s first deriveMessages()', range(of('fork', 'whole.derive')), PAUSE],
  [`session.fork(${midEnd}) (a turn end mid-log)`, range(of('fork', 'mid.fork')), PAUSE],
  ['  the fork\'s first deriveMessages()', range(of('fork', 'mid.derive')), PAUSE],
  ['ctx.sessions.fork(session) (Cordis service: a child of copies)', range(of('fork', 'service.fork')), PAUSE],
  ['  the child\'s first deriveMessages()', range(of('fork', 'service.derive')), PAUSE],
], 'lrl')

console.log(`\nResume of the ${E}-event session against the reference's new Session(id, events) of the parsed lines\n`)
const ratio = (ours, ref) => {
  const r = of(ours[0], ours[1]).map((x, i) => x / of(ref[0], ref[1])[i]).filter(Number.isFinite)
  return range(r, 3, 'x')
}
const resumeRow = (what, name, time, refTime, target) => [what, range(of(name, time), 0), withReference ? range(of('reference', refTime), 0) : '—', withReference ? ratio([name, time], ['reference', refTime]) : '—', target]
for (const name of ['open-jsonl', 'open-sqlite', 'fromJsonl', 'reference']) {
  for (const x of results[name] ?? []) x.total = (x.open ?? x.resume) + x.derive
}
table(['resume', 'ours ms', 'reference ms', 'ratio', 'target'], [
  resumeRow('JSONL store open', 'open-jsonl', 'open', 'resume', '≤ 0.1x'),
  resumeRow('  + first deriveMessages()', 'open-jsonl', 'total', 'total', '—'),
  resumeRow('SQLite store open', 'open-sqlite', 'open', 'resume', '≤ 0.1x'),
  resumeRow('  + first deriveMessages()', 'open-sqlite', 'total', 'total', '—'),
  resumeRow('Session.fromJsonl(Buffer of the file)', 'fromJsonl', 'resume', 'resume', '≤ 0.1x'),
  resumeRow('  + first deriveMessages()', 'fromJsonl', 'total', 'total', '—'),
], 'lrrrl')
if (withReference) console.log(`\n(the reference's JSON.parse of every line, not counted above: ${range(of('reference', 'parse'), 0)} ms)`)
