'use strict'
// dsh-session-native: the public JS API. Each concept has its own module
// under lib/core/ (the Session class, lossless JSON, derivation, request
// headers); this file only gathers the exports. Every rule about the log
// itself (envelope, surface, legacy vocabulary, repair, invariants) runs
// natively (binding.js); see lib/core/session.js for who owns what.

const binding = require('./binding.js')
const { fail, isJsonValue, snapshotJsonValue } = require('./lib/core/json.js')
const { SessionError } = require('./lib/errors.js')
const { deriveEventMessage, renderContextContent } = require('./lib/core/derive.js')
const { canonicalHeader, headerEquals, foldRequestHeader } = require('./lib/core/header.js')
const { Session } = require('./lib/core/session.js')

const SESSION_FORMAT_VERSION = 0
const isArray = Array.isArray

function SessionId(id) {
  if (typeof id !== 'string') throw fail('session id must be a string', 'INVALID_ARGUMENT')
  return id
}

function isSurfaceEligibleType(type) {
  return typeof type === 'string' && binding.isSurfaceEligibleType(type)
}

function isSurfaceEvent(event) {
  return event !== null && typeof event === 'object' && isSurfaceEligibleType(event.type)
    && event.surfaceOp !== undefined
}

function foldSurface(events) {
  const rows = new Array(events.length)
  for (let i = 0; i < events.length; i++) {
    const e = events[i]
    rows[i] = { type: e.type, seq: e.seq, surfaceOp: e.surfaceOp, sourceEventSeqs: e.sourceEventSeqs }
  }
  return JSON.parse(binding.foldSurfaceJson(JSON.stringify(rows)))
}

function interruptedTurnClosers(events) {
  // Each turn boundary resets the scan, so only the events from the last one matter.
  let from = 0
  for (let i = events.length - 1; i >= 0; i--) {
    const type = events[i].type
    if (type === 'turn/start' || type === 'turn/end') {
      from = i
      break
    }
  }
  return JSON.parse(binding.interruptedTurnClosersJson(JSON.stringify(events.slice(from))))
}

function checkSessionInvariants(events) {
  if (!isArray(events)) throw fail('events must be an array', 'INVALID_ARGUMENT')
  binding.checkSessionInvariantsJson(JSON.stringify(events))
}

module.exports = {
  Session,
  SessionId,
  SESSION_FORMAT_VERSION,
  isJsonValue,
  snapshotJsonValue,
  isSurfaceEligibleType,
  isSurfaceEvent,
  foldSurface,
  deriveEventMessage,
  renderContextContent,
  canonicalHeader,
  headerEquals,
  foldRequestHeader,
  interruptedTurnClosers,
  checkSessionInvariants,
  SessionError,
}

// The package's own hooks (lib/core/handle.js), for its tests.
Object.defineProperty(module.exports, Symbol.for('dsh-session-native.internal'), { value: require('./lib/core/handle.js') })

// The durable stores (SPEC 11).
const stores = require('./lib/stores.js')
module.exports.JsonlSessionStore = stores.JsonlSessionStore
module.exports.SqliteSessionStore = stores.SqliteSessionStore

// The SessionStore service (SPEC 12); its cordis peers load on first use.
const service = require('./lib/service.js')
module.exports.SessionStore = service.SessionStore
module.exports.SessionForkError = service.SessionForkError
module.exports.PostgresSessionStore = stores.PostgresSessionStore
