'use strict'
// Where each store of a test directory lives (one home for stores.ts and
// the child processes): a JSONL root, a SQLite database in it, and for
// PostgreSQL the server .ci/run starts (DSH_TEST_PG_URL) with a schema of
// the directory's own.

const path = require('node:path')
const { createHash } = require('node:crypto')

/** A schema per test directory (identifiers stop at 63 bytes). */
function pgSchema(dir) {
  return `t_${createHash('sha256').update(dir).digest('hex').slice(0, 20)}`
}

/** The PostgreSQL store of test directory `dir`. */
function pgStore(dir, options = {}) {
  const { PostgresSessionStore } = require('../../lib/stores.js')
  const url = process.env.DSH_TEST_PG_URL
  if (url === undefined) throw new Error('DSH_TEST_PG_URL is unset (bash .ci/run starts a server and sets it)')
  return new PostgresSessionStore({ connectionString: url, schema: pgSchema(dir), ...options })
}

/**
 * The same store reached through PgBouncer in transaction mode
 * (DSH_TEST_PGBOUNCER_URL, in front of the same server: same schema).
 */
function pgbouncerStore(dir, options = {}) {
  const { PostgresSessionStore } = require('../../lib/stores.js')
  const url = process.env.DSH_TEST_PGBOUNCER_URL
  if (url === undefined) throw new Error('DSH_TEST_PGBOUNCER_URL is unset (bash .ci/run starts PgBouncer and sets it)')
  return new PostgresSessionStore({ connectionString: url, schema: pgSchema(dir), ...options })
}

/** The store of kind `jsonl`, `sqlite`, `postgres` or `pgbouncer` in test directory `dir`. */
function storeOf(kind, dir) {
  const { JsonlSessionStore, SqliteSessionStore } = require('../../lib/stores.js')
  if (kind === 'jsonl') return new JsonlSessionStore({ root: dir })
  if (kind === 'sqlite') return new SqliteSessionStore({ path: path.join(dir, 'sessions.db') })
  if (kind === 'postgres') return pgStore(dir)
  if (kind === 'pgbouncer') return pgbouncerStore(dir)
  throw new Error(`unknown store kind ${JSON.stringify(kind)}`)
}

module.exports = { pgSchema, pgStore, pgbouncerStore, storeOf }
