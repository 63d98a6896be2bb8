'use strict'
// Crash-test child: resumes session ID from a store and appends turn after
// turn, forever, printing `ACK <events JSON>` once each batch is durable.
// The parent kills it with SIGKILL at random moments.
//
//   node writer.cjs <jsonl|sqlite|postgres> <dir> <id> <append|flush> <seed> [max text length]

const { Session } = require('../../index.js')
const { storeOf } = require('./places.cjs')
const { rng, turnBatches } = require('./turns.cjs')

const [kind, dir, id, mode, seedText, maxTextArg] = process.argv.slice(2)
const maxText = Number(maxTextArg ?? 40_000)
const random = rng(Number(seedText))

// Where STORES in stores.ts puts it (places.cjs).
const store = storeOf(kind, dir)
const say = (line) => process.stdout.write(`${line}\n`)

async function main() {
  const header = { version: 0, id, createdAt: 1 }
  let events = []
  try {
    events = (await store.load(id)).events
  } catch (error) {
    if (error.code !== 'SESSION_NOT_FOUND') throw error
    await store.create(header)
  }
  let turn = events.filter((e) => e.type === 'turn/start').length
  const session = mode === 'flush'
    ? (events.length > 0 ? await store.open(id) : new Session(id, [], header))
    : undefined
  say(`READY ${events.length}`)
  let seq = events.length
  for (;;) {
    turn += 1
    // Payloads of varied size, so kills land inside writes of every length.
    const text = 'x'.repeat(Math.floor(random() * maxText))
    for (const batch of turnBatches(turn, seq, text)) {
      if (session === undefined) {
        await store.append(id, batch)
        say(`ACK ${JSON.stringify(batch)}`)
      } else {
        for (const e of batch) {
          const opts = e.surfaceOp === undefined ? [] : [e.sourceEventSeqs === undefined
            ? { surfaceOp: e.surfaceOp }
            : { surfaceOp: e.surfaceOp, sourceEventSeqs: e.sourceEventSeqs }]
          session.append(e.type, e.data, ...opts)
        }
        const written = await store.flush(session)
        say(`ACK ${JSON.stringify(session.events.slice(session.seq - written))}`)
      }
      seq += batch.length
    }
  }
}

main().catch((error) => {
  process.stderr.write(`${error.code ?? ''} ${error.stack}\n`)
  process.exit(1)
})
