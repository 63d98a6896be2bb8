'use strict'
// `dsh-session repair <log>`: the load repair of SPEC 11, made durable as a
// store makes it on load (JSONL: the core's repair write; SQLite: the store's load).

const { resolveLog } = require('../address.js')
const { PostgresSessionStore, SqliteSessionStore, loadAsWriter } = require('../core.js')
const { fromPackageError } = require('../errors.js')
const { plural } = require('../format.js')
const { out, outJson } = require('../output.js')
const { describeRepair, needsRepair, readLog } = require('../read.js')

async function repair({ positionals, flags }) {
  const address = await resolveLog(positionals[0], { stdin: false })
  const dryRun = flags['dry-run'] === true
  let plan
  if (address.kind === 'jsonl') {
    ;({ plan } = await readLog(address, { write: !dryRun }))
  } else {
    ;({ plan } = await readLog(address))
    if (!dryRun && needsRepair(plan)) {
      // The store's load as the session's writer makes the repair durable; it
      // is refused (SESSION_IN_USE, naming the holder) while another store holds it.
      const store = address.kind === 'postgres'
        ? new PostgresSessionStore({ connectionString: address.url, schema: address.schema })
        : new SqliteSessionStore({ path: address.path })
      try {
        await loadAsWriter(store, address.id)
      } catch (error) {
        throw fromPackageError(address.text, error)
      } finally {
        await store.close()
      }
    }
  }
  const changes = describeRepair(plan, address)
  const needed = changes.length > 0
  if (flags.json) {
    outJson({
      address: address.text,
      needed,
      dryRun,
      written: needed && !dryRun,
      preserved: plan.preserved,
      records: plan.records,
      torn: plan.torn,
      committedBytes: plan.committedBytes,
      closers: plan.closers,
      changes,
    })
    return 0
  }
  if (!needed) {
    out(`${address.text}: nothing to repair (${plural(plan.preserved, 'event')}, balanced)`)
  } else {
    out(`${address.text}: ${dryRun ? 'would repair (dry run, nothing written)' : 'repaired'}:`)
    for (const c of changes) out(`  ${c}`)
    const events = plan.preserved + plan.closers.length
    if (!dryRun) out(`  the log now holds ${plural(events, 'event')}`)
  }
  return 0
}

module.exports = { repair }
