'use strict'
// Child of store-11-writers: one store that writes `count` sessions (one
// turn each, by flushing live sessions) and keeps them, then takes orders
// on stdin, one per line:
//   flush   append a turn to the first and the last session and flush both
//   close   close the store and exit
// It prints `READY <pid> <descriptors held>` once every session is written,
// `FLUSHED <events written>` or `ERROR <code> <message JSON>` per flush,
// and `CLOSED`.
//
//   node many-writer.cjs <jsonl|sqlite|postgres> <dir> <count>

const fs = require('node:fs')
const readline = require('node:readline')
const { Session } = require('../../index.js')
const { storeOf } = require('../fixtures-crash/places.cjs')
const { turnBatches } = require('../fixtures-crash/turns.cjs')

const [kind, dir, count] = [process.argv[2], process.argv[3], Number(process.argv[4])]
const say = (line) => process.stdout.write(`${line}\n`)

function appendTurn(session, turn) {
  for (const e of turnBatches(turn, session.seq).flat()) {
    const opts = e.surfaceOp === undefined ? [] : [e.sourceEventSeqs === undefined ? { surfaceOp: e.surfaceOp } : { surfaceOp: e.surfaceOp, sourceEventSeqs: e.sourceEventSeqs }]
    session.append(e.type, e.data, ...opts)
  }
}

async function main() {
  const store = storeOf(kind, dir)
  const fds = () => (fs.existsSync('/proc/self/fd') ? fs.readdirSync('/proc/self/fd').length : -1)
  const before = fds()
  const sessions = []
  for (let i = 0; i < count; i++) {
    const s = new Session(`s${i}`, [], { version: 0, id: `s${i}`, createdAt: 1 })
    appendTurn(s, 1)
    await store.flush(s)
    sessions.push(s)
  }
  say(`READY ${process.pid} ${fds() - before}`)
  const orders = {
    flush: async () => {
      let written = 0
      for (const s of new Set([sessions[0], sessions[sessions.length - 1]])) {
        appendTurn(s, 2 + Math.floor(s.seq / 100))
        written += await store.flush(s)
      }
      say(`FLUSHED ${written}`)
    },
    close: async () => {
      await store.close()
      say('CLOSED')
      process.exit(0)
    },
  }
  for await (const line of readline.createInterface({ input: process.stdin })) {
    try {
      await orders[line.trim()]()
    } catch (error) {
      say(`ERROR ${error.code} ${JSON.stringify(error.message)}`)
    }
  }
}
main().catch((error) => {
  say(`ERROR ${error.code} ${JSON.stringify(String(error.stack ?? error))}`)
  process.exit(1)
})
