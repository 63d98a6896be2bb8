'use strict'
// Where the PostgreSQL store of a test directory lives (one home for
// stores.ts and the child processes): the server .ci/run starts
// (DSH_TEST_PG_URL) and a schema of the directory's own.

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

module.exports = { pgSchema, pgStore }
