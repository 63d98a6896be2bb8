// Runs vitest once and prints one plain closing line ("N passed, N failed")
// that counts the Rust unit tests too, so a CI reader sees the whole run.
import { spawnSync } from 'node:child_process'
import { readFileSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'

const rustPassed = Number(process.argv[2] ?? 0)
const out = path.join(mkdtempSync(path.join(tmpdir(), 'dsh-vitest-')), 'report.json')
const run = spawnSync(
  process.execPath,
  ['node_modules/vitest/vitest.mjs', 'run', '--reporter=default', '--reporter=json', `--outputFile=${out}`],
  { stdio: 'inherit' },
)
let passed = 0
let failed = 0
try {
  const report = JSON.parse(readFileSync(out, 'utf8'))
  passed = report.numPassedTests
  failed = report.numFailedTests + (report.numFailedTestSuites ?? 0)
} catch {
  failed += 1
}
// Errors outside tests (type errors, unhandled rejections) fail the run too.
if (run.status !== 0 && failed === 0) failed = 1
const total = passed + failed
console.log(`\nvitest: ${passed} passed, ${failed} failed; cargo test: ${rustPassed} passed`)
if (process.env.DSH_CI_STARTED_AT) console.log(`.ci/run: ${Math.round(Date.now() / 1000 - Number(process.env.DSH_CI_STARTED_AT))} s in all`)
console.log(`${passed + rustPassed} passed, ${failed} failed`)
if (run.status !== 0 || failed > 0 || total === 0) process.exit(1)
