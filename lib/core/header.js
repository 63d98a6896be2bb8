'use strict'
// Request headers (SPEC 7): the one home of the canonical form and equality.
// The native log only tracks which event is the latest `request/header`
// (and rejects the legacy vocabulary); the canonical header is built here,
// from the event's frozen payload, and shares its values.

const isArray = Array.isArray
const hasOwn = Object.prototype.hasOwnProperty

function isRecord(value) {
  return typeof value === 'object' && value !== null && !isArray(value)
}

/** `system`, `tools` and `messagePrefix` count as absent when empty. */
function isEmptyField(value) {
  return (typeof value === 'string' || isArray(value)) && value.length === 0
}

const OPTIONAL = ['system', 'tools', 'messagePrefix']

const { fail: coded } = require('../errors.js')

/** A value of the wrong kind: a `TypeError` with code `INVALID_ARGUMENT`. */
function fail(message) {
  return coded(message, 'INVALID_ARGUMENT', { Type: TypeError })
}

function describe(value) {
  return value === null ? 'null' : isArray(value) ? 'an array' : typeof value
}

/** `canonicalHeader(h)`: `h` without an empty `system`, `tools` or `messagePrefix`. */
function canonicalHeader(header) {
  if (!isRecord(header)) throw fail(`canonicalHeader expects a request header object, got ${describe(header)}`)
  return canonicalForm(header)
}

/** The canonical form of any value (a non-record is its own canonical form). */
function canonicalForm(header) {
  if (!isRecord(header)) return header
  const out = {}
  for (const key of Object.keys(header)) {
    const value = header[key]
    if (value === undefined) continue
    if ((key === 'system' || key === 'tools' || key === 'messagePrefix') && isEmptyField(value)) continue
    if (key === '__proto__') {
      Object.defineProperty(out, key, { value, enumerable: true, configurable: true, writable: true })
    } else {
      out[key] = value
    }
  }
  return out
}

/** Equality of two JSON values, ignoring object key order ("canonical JSON"). */
function jsonEqual(a, b) {
  if (a === b) return true
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) {
    return false
  }
  if (isArray(a)) {
    if (!isArray(b) || a.length !== b.length) return false
    for (let i = 0; i < a.length; i++) if (!jsonEqual(a[i], b[i])) return false
    return true
  }
  if (isArray(b)) return false
  let count = 0
  for (const key in a) {
    if (!hasOwn.call(a, key)) continue
    const x = a[key]
    if (x === undefined) continue
    count++
    if (!hasOwn.call(b, key) || !jsonEqual(x, b[key])) return false
  }
  for (const key in b) if (hasOwn.call(b, key) && b[key] !== undefined) count--
  return count === 0
}

function field(header, key) {
  if (!isRecord(header) || !hasOwn.call(header, key)) return undefined
  const value = header[key]
  return isEmptyField(value) ? undefined : value
}

/** `headerEquals(a, b)`: config field-wise; system, prefix and tools canonically; absent equals empty. */
function headerEquals(a, b) {
  if (!isRecord(a) || !isRecord(b)) {
    throw fail(`headerEquals expects two request header objects, got ${describe(a)} and ${describe(b)}`)
  }
  if (a === b) return true
  const ca = isRecord(a.config) ? a.config : {}
  const cb = isRecord(b.config) ? b.config : {}
  if (!jsonEqual(ca, cb)) return false
  for (let i = 0; i < OPTIONAL.length; i++) {
    const x = field(a, OPTIONAL[i])
    const y = field(b, OPTIONAL[i])
    if (x === undefined ? y !== undefined : y === undefined || !jsonEqual(x, y)) return false
  }
  return true
}

/** `foldRequestHeader(events, from?)`: the canonical header of the latest `request/header`, else `from`. */
function foldRequestHeader(events, from) {
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i]
    if (e.type === 'request/header') return canonicalForm(e.data.header)
  }
  return from
}

module.exports = { canonicalHeader, canonicalForm, headerEquals, foldRequestHeader, jsonEqual }
