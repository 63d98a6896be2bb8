'use strict'
// Child process of store-11-1-live-flush: a first flush whose directory
// fsync fails (the shim in fail-dir-fsync.c), then the retry. Prints what
// each flush did and what a fresh store loads, as JSON.
const { Session } = require('../../index.js')
const { JsonlSessionStore } = require('../../lib/stores.js')
const { turnBatches } = require('../fixtures-crash/turns.cjs')

async function main() {
  const root = process.argv[2]
  const store = new JsonlSessionStore({ root })
  const s = new Session('first', [], { version: 0, id: 'first', createdAt: 1 })
  const append = (e) => s.append(e.type, e.data, ...(e.surfaceOp === undefined ? [] : [{ surfaceOp: e.surfaceOp, sourceEventSeqs: e.sourceEventSeqs }]))
  for (const e of turnBatches(1, 0).flat()) append(e)
  const out = {}
  try {
    out.first = await store.flush(s)
  } catch (error) {
    out.first = { code: error.code, message: error.message }
  }
  out.retry = await store.flush(s)
  for (const e of turnBatches(2, s.seq).flat()) append(e)
  out.next = await store.flush(s)
  await store.close()
  const loaded = await new JsonlSessionStore({ root }).load('first')
  out.same = JSON.stringify(loaded.events) === JSON.stringify(s.events)
  out.seq = s.seq
  process.stdout.write(JSON.stringify(out))
}
main().catch((error) => {
  process.stdout.write(JSON.stringify({ crashed: String(error?.stack ?? error) }))
  process.exitCode = 1
})
