'use strict'
// Lease-test child: a writer of session ID that takes orders on stdin, one
// per line, and answers one line each, so the parent can hold a session
// open in another process, write through it, and kill it.
//
//   node holder.cjs <jsonl|sqlite|postgres> <dir> <id>
//
// On start it loads the session (creating it when absent) and prints
// `READY <pid> <events>`. Orders:
//   open-turn   append the first batch of a new turn (the turn stays open)
//   finish      append the rest of the open turn
//   turn        append one whole turn, batch by batch
//   close       close the store, print CLOSED and exit
// Each durable batch prints `ACK <events JSON>`; an order that fails prints
// `ERROR <code> <message JSON>`; every order ends with `DONE`.

const readline = require('node:readline')
const { storeOf } = require('./places.cjs')
const { turnBatches } = require('./turns.cjs')

const [kind, dir, id] = process.argv.slice(2)
// Where STORES in stores.ts puts it (places.cjs).
const store = storeOf(kind, dir)
const say = (line) => process.stdout.write(`${line}\n`)

let seq = 0
let turn = 0
let rest = []

async function append(batches) {
  for (const batch of batches) {
    await store.append(id, batch)
    seq += batch.length
    say(`ACK ${JSON.stringify(batch)}`)
  }
}

const orders = {
  'open-turn': async () => {
    turn += 1
    const [first, ...others] = turnBatches(turn, seq)
    await append([first])
    rest = others
  },
  finish: async () => {
    const others = rest
    rest = []
    // The seqs were fixed when the turn opened.
    await append(others)
  },
  turn: async () => {
    turn += 1
    await append(turnBatches(turn, seq))
  },
  close: async () => {
    await store.close()
    say('CLOSED')
    process.exit(0)
  },
}

async function main() {
  try {
    const { events } = await store.load(id)
    seq = events.length
    turn = events.filter((e) => e.type === 'turn/start').length
  } catch (error) {
    if (error.code !== 'SESSION_NOT_FOUND') throw error
    await store.create({ version: 0, id, createdAt: 1 })
  }
  say(`READY ${process.pid} ${seq}`)
  const lines = readline.createInterface({ input: process.stdin })
  for await (const line of lines) {
    const order = orders[line.trim()]
    try {
      if (order === undefined) throw new Error(`unknown order ${line}`)
      await order()
    } catch (error) {
      say(`ERROR ${error.code} ${JSON.stringify(error.message)}`)
    }
    say('DONE')
  }
}

main().catch((error) => {
  process.stderr.write(`${error.code ?? ''} ${error.stack}\n`)
  process.exit(1)
})
