// Retained memory of a 100k-event session: this package against the
// TypeScript reference, side by side (each reading in a fresh process,
// `node --expose-gc`, medians of --runs), in four shapes:
//
// - burst: 100k appends in one synchronous loop, read 50 ms later (what
//   ../shared/bench/compare.mjs's memory part does);
// - loop: the same appends a model step at a time, with a turn of the event
//   loop after each step (an agent loop awaits its model between steps),
//   read once the loop is done and the process has been idle 50 ms;
// - seed: `new Session(id, events)` of the same log;
// - fromJsonl: `Session.fromJsonl` of its JSONL text (the reference has no
//   such path: its row is the seed of `JSON.parse` of every line).
//
// The baseline is taken before the workload is generated, as compare.mjs
// does: about 40 MB of each delta is the workload's own garbage, the same
// on both sides.
//
//   npm run build && node benchmark/memory.mjs [--runs 3] [--n 100000]
import { spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
const root = resolve(here, '..')
const reference = resolve(root, '../shared/bench/reference/dsh-session-v0.min.mjs')
const argv = process.argv.slice(2)
const opt = (name, dflt) => {
  const i = argv.indexOf(`--${name}`)
  return i >= 0 ? argv[i + 1] : dflt
}

if (opt('child') !== undefined) {
  const [side, shape] = opt('child').split(':')
  const n = Number(opt('n', '100000'))
  const { generateOps, toEvents } = await import(pathToFileURL(resolve(root, 'test-data/bench/workload.mjs')).href)
  const impl = side === 'reference' ? await import(pathToFileURL(reference).href) : createRequire(import.meta.url)('../index.js')
  const gc = () => {
    globalThis.gc()
    globalThis.gc()
  }
  const idle = (ms) => new Promise((r) => setTimeout(r, ms))
  const append = (s, op) => (op.opts === undefined ? s.append(op.type, op.data) : s.append(op.type, op.data, op.opts))
  gc()
  await idle(50)
  gc()
  const m0 = process.memoryUsage()
  let s
  if (shape === 'burst') {
    s = (() => {
      const { ops } = generateOps(n)
      const session = new impl.Session('burst')
      for (const op of ops) append(session, op)
      return session
    })()
  } else if (shape === 'loop') {
    const { ops } = generateOps(n)
    s = new impl.Session('loop')
    for (let i = 0; i < ops.length; i++) {
      append(s, ops[i])
      if (ops[i].type === 'step/end') {
        s.deriveMessages()
        await new Promise((r) => setImmediate(r))
      }
    }
    ops.length = 0
  } else if (shape === 'seed') {
    s = (() => new impl.Session('seed', toEvents(generateOps(n).ops)))()
  } else {
    s = (() => {
      const live = new impl.Session('jsonl', toEvents(generateOps(n).ops))
      const text = side === 'reference' ? live.events.map((e) => JSON.stringify(e)).join('\n') : live.toJsonl()
      if (side === 'reference') return new impl.Session('jsonl', text.split('\n').map((line) => JSON.parse(line)))
      return impl.Session.fromJsonl(text)
    })()
  }
  s.deriveMessages()
  s.requestHeader()
  gc()
  await idle(50)
  gc()
  const m1 = process.memoryUsage()
  const mb = (k) => (m1[k] - m0[k]) / 1048576
  process.stdout.write(JSON.stringify({ rss: mb('rss'), heap: mb('heapUsed'), seq: s.seq }))
  process.exit(0)
}

if (!existsSync(reference)) {
  console.error(`benchmark/memory.mjs: ${reference} not found; this benchmark needs ../shared beside the checkout`)
  process.exit(2)
}
const runs = Number(opt('runs', '3'))
const n = opt('n', '100000')
const median = (v) => {
  const s = [...v].sort((a, b) => a - b)
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}
const child = (side, shape) => {
  const r = spawnSync(process.execPath, ['--expose-gc', fileURLToPath(import.meta.url), '--child', `${side}:${shape}`, '--n', n], {
    encoding: 'utf8',
    timeout: 600_000,
  })
  if (r.status !== 0) throw new Error(`${side} ${shape} failed:\n${r.stderr}`)
  return JSON.parse(r.stdout)
}
console.log(`retained memory of a ${n}-event session, MB (median of ${runs} runs; range of the ratio)\n`)
console.log('shape      reference rss/heap   package rss/heap   rss ratio (range)   heap ratio')
for (const shape of ['burst', 'loop', 'seed', 'fromJsonl']) {
  const ref = []
  const pkg = []
  for (let i = 0; i < runs; i++) {
    ref.push(child('reference', shape))
    pkg.push(child('package', shape))
  }
  const ratios = pkg.map((p, i) => p.rss / ref[i].rss)
  const f = (x) => x.toFixed(1).padStart(6)
  console.log(
    `${shape.padEnd(10)} ${f(median(ref.map((x) => x.rss)))} /${f(median(ref.map((x) => x.heap)))}     ${f(median(pkg.map((x) => x.rss)))} /${f(median(pkg.map((x) => x.heap)))}    ${(median(pkg.map((x) => x.rss)) / median(ref.map((x) => x.rss))).toFixed(2)} (${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)})       ${(median(pkg.map((x) => x.heap)) / median(ref.map((x) => x.heap))).toFixed(2)}`,
  )
}
