'use strict'
// Lossless JSON (SPEC 2): the one JS reader of caller values. Only JS can see
// getters, prototypes and sparse arrays, so this check lives here; one pass
// reads each property once, validates it and copies it.


const { fail } = require('../errors.js')

const FAIL = Symbol('not lossless')
const ObjectPrototype = Object.prototype
const ArrayPrototype = Array.prototype
const { getPrototypeOf, keys: objectKeys, freeze, defineProperty, getOwnPropertySymbols } = Object
const isArray = Array.isArray
const hasOwn = Object.prototype.hasOwnProperty

/** An intrinsic `Object.prototype` of any realm (for values from vm contexts). */
function isForeignObjectPrototype(proto) {
  if (proto === null || getPrototypeOf(proto) !== null) return false
  const ctor = Object.getOwnPropertyDescriptor(proto, 'constructor')?.value
  try {
    return typeof ctor === 'function' && ctor.name === 'Object' && ctor.prototype === proto
      && Function.prototype.toString.call(ctor) === 'function Object() { [native code] }'
  } catch {
    return false
  }
}

function isForeignArrayPrototype(proto) {
  if (!isArray(proto)) return false
  const ctor = Object.getOwnPropertyDescriptor(proto, 'constructor')?.value
  try {
    return typeof ctor === 'function' && ctor.name === 'Array' && ctor.prototype === proto
      && Function.prototype.toString.call(ctor) === 'function Array() { [native code] }'
      && isForeignObjectPrototype(getPrototypeOf(proto))
  } catch {
    return false
  }
}

/**
 * One pass that reads each property once, validates it and copies it:
 * returns the copy (deep-frozen when `frozen`) or FAIL. Cycles are looked
 * for only below depth CYCLE_DEPTH (a cycle always gets that deep): `path`
 * holds the ancestors from that depth down, and is null above it, so
 * ordinary payloads allocate nothing for the check.
 */
/** Depth from which copyJson looks for cycles. */
const CYCLE_DEPTH = 24
/** How deeply a payload may nest arrays and objects (`MAX_NESTING` in src/scan.rs). */
const MAX_NESTING = 1000

function copyJson(value, frozen, path, depth) {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value
    case 'number':
      return Number.isFinite(value) && !(value === 0 && 1 / value < 0) ? value : FAIL
    case 'object':
      break
    default:
      return FAIL
  }
  if (value === null) return null
  // Deeper than the native reader reads (and than JSON.stringify reliably writes).
  if (depth >= MAX_NESTING) return FAIL
  if (depth >= CYCLE_DEPTH) {
    if (path === null) path = []
    else if (path.includes(value)) return FAIL
    path.push(value)
  }
  let out
  if (isArray(value)) {
    const proto = getPrototypeOf(value)
    if (proto !== ArrayPrototype && !isForeignArrayPrototype(proto)) return FAIL
    const length = value.length
    out = new Array(length)
    for (let i = 0; i < length; i++) {
      const v = value[i]
      // Numbers inline: long arrays of seqs are the common case.
      if (typeof v === 'number' && Number.isFinite(v) && !(v === 0 && 1 / v < 0)) {
        out[i] = v
        continue
      }
      if (v === undefined && !hasOwn.call(value, i)) return FAIL
      const item = copyJson(v, frozen, path, depth + 1)
      if (item === FAIL) return FAIL
      out[i] = item
    }
    // JSON writes an array's elements only: like a non-enumerable property
    // of an object, a named property beside them is not data. A symbol-keyed
    // one is refused, as on objects.
    if (getOwnPropertySymbols(value).length !== 0) return FAIL
  } else {
    const proto = getPrototypeOf(value)
    if (proto !== ObjectPrototype && proto !== null && !isForeignObjectPrototype(proto)) return FAIL
    // Enumerable string keys are what JSON.stringify writes; a symbol key
    // would be lost. (Checked after the copy: most objects have none, and
    // asking for them is cheaper than listing every key twice.)
    const keys = objectKeys(value)
    out = {}
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i]
      const item = copyJson(value[key], frozen, path, depth + 1)
      if (item === FAIL) return FAIL
      if (key === '__proto__') {
        defineProperty(out, key, { value: item, enumerable: true, configurable: true, writable: true })
      } else {
        out[key] = item
      }
    }
    if (getOwnPropertySymbols(value).length !== 0) return FAIL
  }
  if (path !== null) path.pop()
  return frozen ? freeze(out) : out
}

function snapshot(value, frozen) {
  return copyJson(value, frozen, null, 0)
}

/** `snapshot` of a whole event: its payload may nest MAX_NESTING levels inside the envelope. */
function snapshotEvent(event, frozen) {
  return copyJson(event, frozen, null, -1)
}

function isJsonValue(value) {
  return copyJson(value, false, null, 0) !== FAIL
}

function snapshotJsonValue(value) {
  const copy = copyJson(value, false, null, 0)
  return copy === FAIL ? undefined : copy
}

/** Deep-freeze a tree freshly built by JSON.parse. */
function deepFreeze(value) {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    if (isArray(value)) {
      for (let i = 0; i < value.length; i++) deepFreeze(value[i])
    } else {
      for (const key in value) deepFreeze(value[key])
    }
    freeze(value)
  }
  return value
}

/**
 * A copy of a deep-frozen JSON tree, deep-frozen: new arrays and objects
 * around the same strings and numbers (which have no identity). The tree
 * was checked when it was made, so nothing is checked again.
 */
function copyFrozen(value) {
  if (typeof value !== 'object' || value === null) return value
  let out
  if (isArray(value)) {
    out = new Array(value.length)
    for (let i = 0; i < value.length; i++) out[i] = copyFrozen(value[i])
  } else {
    out = {}
    for (const key in value) {
      if (key === '__proto__') defineProperty(out, key, { value: copyFrozen(value[key]), enumerable: true, configurable: true, writable: true })
      else out[key] = copyFrozen(value[key])
    }
  }
  return freeze(out)
}

function parseFrozen(text) {
  return deepFreeze(JSON.parse(text))
}

/** Snapshot an array of events for a native bulk path; throws NOT_LOSSLESS_JSON. */
function snapshotEvents(events, what = "event") {
  if (!isArray(events)) throw fail(`${what}s must be an array`, 'INVALID_ARGUMENT')
  const out = new Array(events.length)
  for (let i = 0; i < events.length; i++) {
    const copy = snapshotEvent(events[i], false)
    if (copy === FAIL) throw fail(`${what} at index ${i} is not losslessly JSON-serializable`, 'NOT_LOSSLESS_JSON')
    out[i] = copy
  }
  return JSON.stringify(out)
}

module.exports = { FAIL, fail, copyJson, snapshot, snapshotEvent, isJsonValue, snapshotJsonValue, deepFreeze, copyFrozen, parseFrozen, snapshotEvents }
