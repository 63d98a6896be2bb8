#!/usr/bin/env node
// The smoke test of one platform's binary, as a user's machine runs it
// (.ci/run under QEMU for linux-arm64-gnu, the release workflow for every
// binary it publishes):
//   node scripts/smoke.mjs <project dir> [fixture.jsonl]
// <project dir> has node_modules/dsh-session-native and its platform
// package (the tarballs of `npm run package`, installed or unpacked).
// Checks: require and import; a seed of the fixture and its derive (equal to
// the conformance fixture's expected messages, which x64 produces); the
// fromJsonl round trip (toJsonl gives the bytes back, same derive); JSONL
// and SQLite store round trips (create, flush, load, open). Prints one JSON
// line: the platform, the Node version and a digest of every result, which
// CI compares across platforms; exits 1 on the first failed check.
import { createHash } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { deepStrictEqual, strictEqual } from 'node:assert/strict'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const project = path.resolve(process.argv[2] ?? '.')
const fixture = path.resolve(process.argv[3] ?? path.join(root, 'test-data/fixtures/logs/compaction-nested.jsonl'))
const expectedFile = path.join(path.dirname(fixture), '..', 'expected', `${path.basename(fixture, '.jsonl')}.json`)

const step = { name: 'start' }
const digest = (value) => createHash('sha256').update(JSON.stringify(value)).digest('hex').slice(0, 16)

async function main() {
  step.name = 'require'
  const req = createRequire(path.join(project, 'package.json'))
  const pkg = req('dsh-session-native')
  const binary = Object.keys(req.cache).find((f) => f.endsWith('.node'))
  if (binary === undefined || !/dsh-session-native-[a-z0-9-]+[/\\]/.test(binary)) throw new Error(`the binary is not the platform package's: ${binary}`)
  step.name = 'import'
  const esm = await import(pathToFileURL(req.resolve('dsh-session-native').replace(/index\.js$/, 'index.mjs')).href)
  strictEqual(esm.Session, pkg.Session)

  step.name = 'seed'
  const bytes = readFileSync(fixture)
  const lines = bytes.toString('utf8').split('\n').filter((l) => l.length > 0)
  const { type: _type, ...header } = JSON.parse(lines[0])
  const events = lines.slice(1).map((l) => JSON.parse(l))
  const seeded = new pkg.Session(header.id, events, header)
  strictEqual(seeded.seq, events.length)
  const messages = seeded.deriveMessages()

  step.name = 'derive equal to the fixture (x64)'
  let expected = null
  try {
    expected = JSON.parse(readFileSync(expectedFile, 'utf8'))
  } catch {
    // A fixture without an expected file: the digest is compared instead.
  }
  if (expected !== null) {
    deepStrictEqual(JSON.parse(JSON.stringify(messages)), expected.messages)
    deepStrictEqual(JSON.parse(JSON.stringify(seeded.surface)), expected.surface)
  }

  step.name = 'fromJsonl round trip'
  const resumed = pkg.Session.fromJsonl(bytes)
  strictEqual(resumed.toJsonl(), bytes.toString('utf8'))
  deepStrictEqual(resumed.deriveMessages(), messages)

  const dir = mkdtempSync(path.join(os.tmpdir(), 'dsh-smoke-'))
  try {
    for (const [kind, store] of [
      ['JSONL store', new pkg.JsonlSessionStore({ root: path.join(dir, 'jsonl') })],
      ['SQLite store', new pkg.SqliteSessionStore({ path: path.join(dir, 'sessions.db') })],
    ]) {
      step.name = `${kind} round trip`
      await store.create(seeded.header)
      strictEqual(await store.flush(seeded), events.length)
      const loaded = await store.load(header.id)
      deepStrictEqual(loaded.events, JSON.parse(JSON.stringify(events)))
      const opened = await store.open(header.id)
      deepStrictEqual(opened.deriveMessages(), messages)
      deepStrictEqual((await store.list()).map((h) => h.id), [header.id])
      await store.close()
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }

  process.stdout.write(`${JSON.stringify({
    ok: true,
    platform: `${process.platform}-${process.arch}`,
    node: process.version,
    binary: path.basename(binary),
    fixture: path.basename(fixture),
    events: events.length,
    messages: messages.length,
    derive: digest(messages),
    surface: digest(seeded.surface),
    jsonl: digest(resumed.toJsonl()),
  })}\n`)
}

main().catch((error) => {
  process.stdout.write(`${JSON.stringify({ ok: false, platform: `${process.platform}-${process.arch}`, node: process.version, step: step.name, code: error?.code, message: String(error?.message ?? error) })}\n`)
  process.exit(1)
})
