'use strict'
// Reader child for the PostgreSQL fencing tests: loads session ID from the
// store of <dir> again and again while another process writes it, printing
// `VIEW <events JSON>` per load, then `DONE`.
//
//   node reader.cjs <dir> <id> <loads>

const { pgStore } = require('./places.cjs')

const [dir, id, loadsText] = process.argv.slice(2)

async function main() {
  const store = pgStore(dir)
  for (let i = 0; i < Number(loadsText); i++) {
    const { events } = await store.load(id)
    process.stdout.write(`VIEW ${JSON.stringify(events)}\n`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  await store.close()
  process.stdout.write('DONE\n')
}

main().catch((error) => {
  process.stderr.write(`${error.code ?? ''} ${error.stack}\n`)
  process.exit(1)
})
