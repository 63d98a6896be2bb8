// Lossless JSON (PUB 3): validation and detached snapshots in one iterative
// walk, so nesting is bounded by memory and not by the call stack.
//
// Accepted containers: intrinsic arrays of any realm with exactly
// `length + 1` own keys (no holes, no extra own property of any kind), and
// objects whose prototype is null or an intrinsic Object.prototype of any
// realm, with only enumerable string own keys. Snapshots are built of this
// realm's containers; each property is read once, in key order, depth first.

const fnToString = Function.prototype.toString
const isEnumerable = Object.prototype.propertyIsEnumerable
const hasOwn = Object.prototype.hasOwnProperty

/** `proto` has an own data `constructor` that is that realm's native `name`. */
function nativeConstructorOf(proto, name) {
  const descriptor = Object.getOwnPropertyDescriptor(proto, 'constructor')
  const ctor = descriptor === undefined ? undefined : descriptor.value
  if (typeof ctor !== 'function') return false
  try {
    return ctor.name === name
      && ctor.prototype === proto
      && fnToString.call(ctor) === `function ${name}() { [native code] }`
  } catch {
    return false
  }
}

/** Some realm's intrinsic Object.prototype. */
function isObjectPrototype(proto) {
  return typeof proto === 'object' && proto !== null
    && Object.getPrototypeOf(proto) === null
    && nativeConstructorOf(proto, 'Object')
}

/** Some realm's intrinsic Array.prototype (itself an array, over that realm's Object.prototype). */
function isArrayPrototype(proto) {
  return Array.isArray(proto)
    && nativeConstructorOf(proto, 'Array')
    && isObjectPrototype(Object.getPrototypeOf(proto))
}

function plainObjectPrototype(value) {
  const proto = Object.getPrototypeOf(value)
  return proto === null || isObjectPrototype(proto)
}

/** `proto` is acceptable as an array's prototype (fast path: this realm's). */
function arrayPrototypeOk(proto) {
  return proto === Array.prototype || isArrayPrototype(proto)
}

/** `proto` is acceptable as an object's prototype (fast path: null or this realm's). */
function objectPrototypeOk(proto) {
  return proto === null || proto === Object.prototype || isObjectPrototype(proto)
}

const NOT_JSON = Symbol('not json')
const ANCESTOR_SCAN = 32

/**
 * Walk `value` depth first with one frame per open container: each property
 * is read once, in key order, a container's subtree before its next sibling.
 * With `copy`, returns the snapshot (built of this realm's containers, each
 * frozen when complete if `freeze`); without, returns `value`. NOT_JSON when
 * the value is not lossless.
 */
function walk(value, copy, freeze) {
  const first = scalar(value)
  if (first !== CONTAINER) return first
  const frames = []
  let ancestors
  let root
  const enter = (current, parent, key) => {
    if (frames.length < ANCESTOR_SCAN && ancestors === undefined) {
      for (let i = 0; i < frames.length; i++) if (frames[i].src === current) return false
    } else {
      if (ancestors === undefined) ancestors = new Set(frames.map(f => f.src))
      if (ancestors.has(current)) return false
    }
    let frame
    if (Array.isArray(current)) {
      if (!arrayPrototypeOk(Object.getPrototypeOf(current))) return false
      const length = current.length
      if (Reflect.ownKeys(current).length !== length + 1) return false
      frame = { src: current, keys: undefined, len: length, i: 0, out: copy ? [] : undefined }
    } else {
      if (!objectPrototypeOk(Object.getPrototypeOf(current))) return false
      const keys = Reflect.ownKeys(current)
      for (let i = 0; i < keys.length; i++) {
        const k = keys[i]
        if (typeof k !== 'string' || !isEnumerable.call(current, k)) return false
      }
      frame = { src: current, keys, len: keys.length, i: 0, out: copy ? {} : undefined }
    }
    if (copy) {
      if (parent === undefined) root = frame.out
      else put(parent, key, frame.out)
    }
    if (ancestors !== undefined) ancestors.add(current)
    frames.push(frame)
    return true
  }
  if (!enter(value, undefined, undefined)) return NOT_JSON
  while (frames.length > 0) {
    const frame = frames[frames.length - 1]
    if (frame.i === frame.len) {
      frames.pop()
      if (ancestors !== undefined) ancestors.delete(frame.src)
      if (freeze) Object.freeze(frame.out)
      continue
    }
    const index = frame.i++
    const src = frame.src
    let key
    let child
    if (frame.keys === undefined) {
      if (!hasOwn.call(src, index)) return NOT_JSON
      key = index
      child = src[index]
    } else {
      key = frame.keys[index]
      child = src[key]
    }
    const leaf = scalar(child)
    if (leaf === NOT_JSON) return NOT_JSON
    if (leaf === CONTAINER) {
      if (!enter(child, frame.out, key)) return NOT_JSON
    } else if (copy) {
      put(frame.out, key, leaf)
    }
  }
  return copy ? root : value
}

const CONTAINER = Symbol('container')

/** A lossless scalar itself, CONTAINER for an object, else NOT_JSON. */
function scalar(value) {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value
    case 'number':
      return Number.isFinite(value) && !Object.is(value, -0) ? value : NOT_JSON
    case 'object':
      return value === null ? null : CONTAINER
    default:
      return NOT_JSON
  }
}

/**
 * Store a copied value. Array copies fill in order. An object key that the
 * prototype chain knows (`__proto__`, `constructor`, an accessor someone
 * added) is defined, so it stays data and runs no setter.
 */
function put(target, key, item) {
  if (typeof key === 'number') target.push(item)
  else if (key in target) Object.defineProperty(target, key, { value: item, enumerable: true, configurable: true, writable: true })
  else target[key] = item
}

/** PUB 3: whether `value` survives JSON losslessly. */
export function isJsonValue(value) {
  return walk(value, false, false) !== NOT_JSON
}

/** PUB 3: a detached copy of `value` in this realm, or undefined when not lossless. */
export function snapshotJsonValue(value) {
  const copy = walk(value, true, false)
  return copy === NOT_JSON ? undefined : copy
}

/**
 * `snapshotJsonValue` whose copy is deep-frozen as it is built (each container
 * when its last child is stored): one walk instead of a snapshot and a freeze.
 * Not a root export; for the append and create paths.
 */
export function snapshotFrozenJsonValue(value) {
  const copy = walk(value, true, true)
  return copy === NOT_JSON ? undefined : copy
}

/**
 * Freeze `value` and everything reachable from it in place, iteratively (depth
 * unbounded). Used by `fromRestore`'s ownership transfer (PUB 4.1), whose
 * graphs are detached trees; an object already frozen is still descended, so a
 * frozen shell around mutable data is frozen through. Returns `value`.
 */
export function deepFreezeInPlace(value) {
  if (typeof value !== 'object' || value === null) return value
  const seen = new Set()
  const stack = [value]
  while (stack.length > 0) {
    const current = stack.pop()
    if (seen.has(current)) continue
    seen.add(current)
    Object.freeze(current)
    if (Array.isArray(current)) {
      for (let i = 0; i < current.length; i++) {
        const item = current[i]
        if (typeof item === 'object' && item !== null) stack.push(item)
      }
    } else {
      for (const key of Object.keys(current)) {
        const item = current[key]
        if (typeof item === 'object' && item !== null) stack.push(item)
      }
    }
  }
  return value
}

/**
 * Freeze `value` in place, iteratively, stopping at subtrees that are already
 * frozen: for trees whose frozen parts are deep-frozen already (what this
 * package builds: snapshots, canonical headers, copies over frozen log data).
 * A cycle ends at its frozen ancestor. About twice as fast as
 * `deepFreezeInPlace`, which also descends frozen shells (and is the one for
 * caller graphs handed over by `fromRestore`). Returns `value`.
 */
export function deepFreezeFresh(value) {
  if (typeof value !== 'object' || value === null || Object.isFrozen(value)) return value
  Object.freeze(value)
  const stack = [value]
  while (stack.length > 0) {
    const current = stack.pop()
    if (Array.isArray(current)) {
      for (let i = 0; i < current.length; i++) {
        const item = current[i]
        if (typeof item === 'object' && item !== null && !Object.isFrozen(item)) {
          Object.freeze(item)
          stack.push(item)
        }
      }
    } else {
      for (const key of Object.keys(current)) {
        const item = current[key]
        if (typeof item === 'object' && item !== null && !Object.isFrozen(item)) {
          Object.freeze(item)
          stack.push(item)
        }
      }
    }
  }
  return value
}
