'use strict'
// What the CLI takes from the package: its public API, the stores, and the
// native binding's read-only log reader (the stores' own load code). The
// rules (surface types, canonical headers, the surface fold, repair) all
// come from here; the CLI re-derives none of them.

const api = require('../../index.js')
const binding = require('../../binding.js')
const { fromNative } = require('../core/handle.js')
const { JsonlSessionStore, SqliteSessionStore, PostgresSessionStore, POSTGRES_DEFAULT_SCHEMA, loadAsWriter } = require('../stores.js')

/** The messages a native log derives (through the one derivation, in the Session). */
function deriveNative(native) {
  return fromNative(native).deriveMessages()
}

module.exports = {
  api, binding, fromNative, deriveNative, JsonlSessionStore, SqliteSessionStore, PostgresSessionStore, POSTGRES_DEFAULT_SCHEMA, loadAsWriter,
}
