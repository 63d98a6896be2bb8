#!/usr/bin/env node
// Refresh the in-repo copy of the shared test data (test-data/) from
// ../shared, when that folder is beside the clone: the conformance fixtures
// and the benchmark workload the tests and benchmarks read. Without
// ../shared there is nothing to refresh and the repository's copy stays.
//
// usage: npm run refresh-shared [-- --check]
//   --check   change nothing; exit 1 if test-data/ differs from ../shared
import { cpSync, existsSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const shared = path.resolve(root, '..', 'shared')
const check = process.argv.includes('--check')

/** What is copied: a path under ../shared → the same under test-data/. */
const COPIES = [
  ['fixtures', 'fixtures'],
  ['bench/workload.mjs', 'bench/workload.mjs'],
  ['fixtures-published', 'fixtures-published'],
]

/** Every file under `dir`, relative to it. */
function files(dir, rel = '') {
  const here = path.join(dir, rel)
  if (!existsSync(here)) return []
  if (statSync(here).isFile()) return [rel]
  return readdirSync(here).sort().flatMap((name) => files(dir, path.join(rel, name)))
}

if (!existsSync(shared)) {
  console.log(`refresh-shared: no ${shared}; test-data/ stays as committed`)
  process.exit(0)
}

const differences = []
for (const [from, to] of COPIES) {
  const src = path.join(shared, from)
  const dst = path.join(root, 'test-data', to)
  const a = new Set(files(src))
  const b = new Set(files(dst))
  for (const f of a) {
    if (!b.has(f)) differences.push(`new: ${path.join(to, f)}`)
    else if (!readFileSync(path.join(src, f)).equals(readFileSync(path.join(dst, f)))) differences.push(`changed: ${path.join(to, f)}`)
  }
  for (const f of b) if (!a.has(f)) differences.push(`gone: ${path.join(to, f)}`)
  if (!check) {
    rmSync(dst, { recursive: true, force: true })
    cpSync(src, dst, { recursive: true })
  }
}

if (differences.length === 0) {
  console.log('refresh-shared: test-data/ matches ../shared')
} else {
  for (const d of differences) console.log(`refresh-shared: ${d}`)
  if (check) {
    console.log(`refresh-shared: ${differences.length} differences (run npm run refresh-shared)`)
    process.exit(1)
  }
  console.log(`refresh-shared: ${differences.length} files refreshed`)
}
