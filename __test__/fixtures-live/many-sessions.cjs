'use strict'
// Child process of store-11-1-live-flush: one store writes `count` sessions
// under a descriptor limit the parent set (ulimit -n), and reports how many
// descriptors the process holds at the end.
const fs = require('node:fs')
const path = require('node:path')
const { Session } = require('../../index.js')
const { JsonlSessionStore, SqliteSessionStore } = require('../../lib/stores.js')
const { turnBatches } = require('../fixtures-crash/turns.cjs')

async function main() {
  const [kind, dir, count] = [process.argv[2], process.argv[3], Number(process.argv[4])]
  const store = kind === 'jsonl' ? new JsonlSessionStore({ root: dir }) : new SqliteSessionStore({ path: path.join(dir, 'db.sqlite') })
  const before = fs.readdirSync('/proc/self/fd').length
  for (let i = 0; i < count; i++) {
    const s = new Session(`s${i}`, [], { version: 0, id: `s${i}`, createdAt: 1 })
    for (const e of turnBatches(1, 0).flat()) {
      s.append(e.type, e.data, ...(e.surfaceOp === undefined ? [] : [{ surfaceOp: e.surfaceOp, sourceEventSeqs: e.sourceEventSeqs }]))
    }
    await store.flush(s)
    // A read of each session too (a loaded session held a descriptor as well).
    await store.load(`s${i}`)
  }
  const held = fs.readdirSync('/proc/self/fd').length - before
  // Every session is still writable through the store.
  const again = await store.open('s0')
  for (const e of turnBatches(2, again.seq).flat()) {
    again.append(e.type, e.data, ...(e.surfaceOp === undefined ? [] : [{ surfaceOp: e.surfaceOp, sourceEventSeqs: e.sourceEventSeqs }]))
  }
  const written = await store.flush(again)
  await store.close()
  process.stdout.write(JSON.stringify({ held, written, listed: (await (kind === 'jsonl' ? new JsonlSessionStore({ root: dir }) : new SqliteSessionStore({ path: path.join(dir, 'db.sqlite') })).list()).length }))
}
main().catch((error) => {
  process.stdout.write(JSON.stringify({ crashed: String(error?.stack ?? error) }))
  process.exitCode = 1
})
