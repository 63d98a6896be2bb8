// Resuming a stored session through the Cordis service (issue 20), side by
// side in one run, each measurement in a fresh process (medians of --runs):
//
//   open        store.open(id) + deriveMessages()                      (the floor)
//   service     store.open(id) + ctx.sessions.create(id, { from, meta }) + deriveMessages()
//   seed        store.load(id) + ctx.sessions.create(id, { seed: events, meta }) + deriveMessages()
//   reference   JSON.parse of every line + the reference's new Session(id, events) + deriveMessages()
//
//   npm run build && node benchmark/resume.mjs [--n 100000] [--runs 5]
//
// The ratio that matters: service / open (issue 20's target: ≤ 1.2x).

import { spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

const here = path.dirname(fileURLToPath(import.meta.url))
const require = createRequire(import.meta.url)
const argv = process.argv.slice(2)
const opt = (name, fallback) => {
  const i = argv.indexOf(`--${name}`)
  return i >= 0 ? argv[i + 1] : fallback
}
const reference = path.resolve(here, '../../shared/bench/reference/dsh-session-v0.min.mjs')
const ID = 'resume-bench'
const now = () => performance.now()

async function child(shape, root) {
  const index = require('../index.js')
  const { JsonlSessionStore } = index
  const store = new JsonlSessionStore({ root })
  let ms
  let messages
  if (shape === 'reference') {
    const impl = await import(pathToFileURL(reference).href)
    const file = store.locate({ id: ID }).path
    const t0 = now()
    const lines = readFileSync(file, 'utf8').split('\n')
    const events = []
    for (let i = 1; i < lines.length; i++) if (lines[i].length > 0) events.push(JSON.parse(lines[i]))
    const s = new impl.Session(impl.SessionId(ID), events)
    messages = s.deriveMessages()
    ms = now() - t0
  } else {
    const { Context } = await import('@deepseek-ai/cordis')
    const ctx = new Context()
    await ctx.plugin(index.SessionStore)
    const t0 = now()
    if (shape === 'open') {
      messages = (await store.open(ID)).deriveMessages()
    } else if (shape === 'service') {
      const opened = await store.open(ID)
      messages = ctx.sessions.create(ID, { from: opened, meta: opened.header }).deriveMessages()
    } else {
      const { meta, events } = await store.load(ID)
      messages = ctx.sessions.create(ID, { seed: events, meta }).deriveMessages()
    }
    ms = now() - t0
  }
  await store.close()
  process.stdout.write(JSON.stringify({ ms, messages: messages.length }))
  process.exit(0)
}

if (argv[0] === '--child') {
  await child(argv[1], argv[2])
} else {
  const n = Number(opt('n', '100000'))
  const runs = Number(opt('runs', '5'))
  const root = mkdtempSync(path.join(tmpdir(), 'dsh-resume-'))
  try {
    const { Session, JsonlSessionStore } = require('../index.js')
    const { generateOps, toEvents } = await import(pathToFileURL(path.resolve(here, '../test-data/bench/workload.mjs')).href)
    const events = toEvents(generateOps(n).ops)
    const store = new JsonlSessionStore({ root })
    await store.flush(new Session(ID, events, { version: 0, id: ID, createdAt: 1_700_000_000_000 }))
    await store.close()
    const shapes = ['open', 'service', 'seed', ...(existsSync(reference) ? ['reference'] : [])]
    const times = Object.fromEntries(shapes.map((s) => [s, []]))
    const counts = new Set()
    for (let r = 0; r < runs; r++) {
      for (const shape of shapes) {
        const out = spawnSync(process.execPath, [fileURLToPath(import.meta.url), '--child', shape, root], { encoding: 'utf8' })
        if (out.status !== 0) throw new Error(`${shape} failed:\n${out.stderr}`)
        const { ms, messages } = JSON.parse(out.stdout)
        times[shape].push(ms)
        counts.add(messages)
      }
    }
    const median = (v) => [...v].sort((a, b) => a - b)[v.length >> 1]
    const range = (v) => `${Math.min(...v).toFixed(0)}–${Math.max(...v).toFixed(0)}`
    console.log(`resume of a ${events.length}-event session (JSONL store), ms: median (range) of ${runs} runs; same messages: ${counts.size === 1 ? 'yes' : 'NO'}\n`)
    console.log('| path | ms | / open |')
    console.log('|---|---:|---:|')
    for (const shape of shapes) {
      const ratios = times[shape].map((t, i) => t / times.open[i])
      console.log(`| ${shape} | ${median(times[shape]).toFixed(1)} (${range(times[shape])}) | ${median(ratios).toFixed(2)}x (${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)}) |`)
    }
  } finally {
    rmSync(root, { recursive: true, force: true })
  }
}
