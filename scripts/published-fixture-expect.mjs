#!/usr/bin/env node
// What the reference (@deepseek-ai/dsh-session@0.1.1-rc.2, installed in
// test-published/) makes of every published log (../shared/fixtures-published/logs,
// docs/PUBLISHED.md section 16), written to test-published/fixture-expect.json:
// per log (path relative to logs/), either {ok: true, messages (deriveMessages()),
// requestHeader, requestContext, header, events (count), firstLiveSeq,
// surfaceNodes} or {ok: false, error: <message>}. The loading is
// test-published/fixture-load.mjs, which __test__/published-16-fixtures.test.ts
// also uses to compare the package with the reference live.
//   node scripts/published-fixture-expect.mjs [--logs <dir>] [--out <file>]
import { writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const args = process.argv.slice(2)
const arg = (name, fallback) => {
  const i = args.indexOf(name)
  return i === -1 ? fallback : resolve(args[i + 1])
}
const logsDir = arg('--logs', resolve(root, '../shared/fixtures-published/logs'))
const out = arg('--out', join(root, 'test-published/fixture-expect.json'))

const require = createRequire(join(root, 'test-published/package.json'))
const refPath = require.resolve('@deepseek-ai/dsh-session')
const ref = await import(pathToFileURL(refPath).href)
const refVersion = require('@deepseek-ai/dsh-session/package.json').version
const { listLogs, readLog, loadLog, summarize, TEMPLATE_VALUES } = await import(pathToFileURL(join(root, 'test-published/fixture-load.mjs')).href)

const started = Date.now()
const logs = {}
const counts = {}
for (const rel of listLogs(logsDir)) {
  const summary = summarize(loadLog(ref, readLog(logsDir, rel)))
  logs[rel] = summary
  const kind = summary.ok ? 'ok' : summary.error.replace(/\d+/g, '<n>')
  counts[kind] = (counts[kind] ?? 0) + 1
}
writeFileSync(out, JSON.stringify({
  reference: `@deepseek-ai/dsh-session@${refVersion}`,
  templates: TEMPLATE_VALUES,
  counts,
  logs,
}, null, 1) + '\n')
console.log(`${Object.keys(logs).length} logs in ${Date.now() - started} ms -> ${out}`)
for (const [k, n] of Object.entries(counts)) console.log(`  ${n}  ${k}`)
