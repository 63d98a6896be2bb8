// This package against the TypeScript reference, side by side, on the work a
// drop-in user does (../shared/bench/compare.mjs: new Session, append,
// deriveMessages, requestHeader + headerEquals, events), with the targets of
// issue 9 beside each ratio.
//
//   npm run build && node benchmark/compare.mjs [--runs 3] [--rounds 1] [--parts a,b]
//
// Each round runs ../shared/bench/compare.mjs once (every part, both sides,
// alternately, each run in a fresh process, medians of --runs); with
// --rounds > 1 the table shows the median ratio and the range over rounds.
// Needs ../shared beside the checkout (the reference is not shipped here).
import { spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const script = resolve(root, '../shared/bench/compare.mjs')
if (!existsSync(script)) {
  console.error(`benchmark/compare.mjs: ${script} not found; this benchmark needs ../shared beside the checkout`)
  process.exit(2)
}
const argv = process.argv.slice(2)
const opt = (name, dflt) => {
  const i = argv.indexOf(`--${name}`)
  return i >= 0 ? argv[i + 1] : dflt
}
const rounds = Number(opt('rounds', '1'))
const runs = opt('runs', '3')
const parts = opt('parts', 'append,derive,seed,compact,jsonl,memory')

/** metric -> target ratio (package / reference), from issue 9. */
const TARGETS = {
  'append append_ns_per_event': 0.4,
  'derive loop_total_ms': 0.5,
  'derive derive_p50_us': 1.0,
  'derive request_header_total_ms': 0.5,
  'seed seed_total_ms': 0.6,
  'compact compact_total_ms': 0.5,
  'jsonl roundtrip_total_ms': 0.7,
  'memory live_rss_delta_mb': 0.8,
  'memory seed_rss_delta_mb': 0.8,
}
const HEADLINE = {
  append: ['append_ns_per_event'],
  derive: ['loop_total_ms', 'derive_total_ms', 'derive_p50_us', 'derive_p99_us', 'request_header_total_ms'],
  seed: ['seed_total_ms', 'seed_construct_ms', 'seed_first_derive_ms'],
  compact: ['compact_total_ms', 'replace_append_ms', 'derive_after_replace_ms'],
  jsonl: ['roundtrip_total_ms', 'seed_ms', 'derive_ms'],
  memory: ['live_heap_used_delta_mb', 'live_rss_delta_mb', 'seed_heap_used_delta_mb', 'seed_rss_delta_mb'],
}

const tmp = mkdtempSync(join(tmpdir(), 'dsh-compare-'))
const ratios = {} // key -> [ratio per round]
const same = {} // part -> every round derived the same messages
for (let r = 0; r < rounds; r++) {
  const out = join(tmp, `round-${r}.json`)
  const res = spawnSync(process.execPath, [script, '--pkg', root, '--runs', runs, '--parts', parts, '--json', out], {
    stdio: ['ignore', 'ignore', 'inherit'],
  })
  if (res.status !== 0) {
    console.error(`round ${r + 1}: ../shared/bench/compare.mjs failed (status ${res.status})`)
    process.exit(1)
  }
  const results = JSON.parse(readFileSync(out, 'utf8'))
  for (const [part, sides] of Object.entries(results)) {
    const { reference: a, package: b } = sides
    same[part] = (same[part] ?? true) && JSON.stringify(a.check) === JSON.stringify(b.check)
    for (const metric of HEADLINE[part] ?? []) {
      const x = a.median[metric]
      const y = b.median[metric]
      if (typeof x !== 'number' || typeof y !== 'number') continue
      ;(ratios[`${part} ${metric}`] ??= []).push(y / x)
    }
  }
}

const median = (v) => {
  const s = [...v].sort((x, y) => x - y)
  const m = s.length >> 1
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2
}
const pad = (s, w) => String(s).padEnd(w)
console.log(`package / reference (< 1: this package is faster or smaller); ${rounds} round(s) of ${runs} runs per part\n`)
console.log(`${pad('part', 9)}${pad('metric', 28)}${pad('ratio', 8)}${pad(rounds > 1 ? 'range' : '', 13)}${pad('target', 8)}same messages`)
let missed = 0
for (const [key, values] of Object.entries(ratios)) {
  const [part, metric] = key.split(' ')
  const m = median(values)
  const target = TARGETS[key]
  const range = rounds > 1 ? `${Math.min(...values).toFixed(2)}-${Math.max(...values).toFixed(2)}` : ''
  const mark = target === undefined ? '' : m <= target ? `<= ${target}` : `> ${target} (missed)`
  if (target !== undefined && m > target) missed++
  console.log(`${pad(part, 9)}${pad(metric, 28)}${pad(m.toFixed(2), 8)}${pad(range, 13)}${pad(mark, 8)}  ${same[part] ? 'yes' : 'NO'}`)
}
console.log(`\n${missed === 0 ? 'every target met' : `${missed} target(s) missed`}`)
if (Object.values(same).some((v) => !v)) process.exitCode = 1
