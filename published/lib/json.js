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

// Task kinds on the explicit stack.
const VISIT = 0
const ITEM = 1
const PROP = 2
const LEAVE = 3

/**
 * Walk `value`. With `copy`, returns `{value: snapshot}` or undefined; without,
 * returns true or undefined.
 */
function walk(value, copy) {
  const open = new Set()
  const box = { root: undefined }
  // Each task: [kind, a, b, target, slot]. VISIT: a = value, target/slot = where
  // to store its copy. ITEM: a = source array, b = index. PROP: a = source
  // object, b = key. LEAVE: a = source container.
  const tasks = [[VISIT, value, undefined, box, 'root']]
  while (tasks.length > 0) {
    const task = tasks.pop()
    const kind = task[0]
    if (kind === LEAVE) {
      open.delete(task[1])
      continue
    }
    if (kind === ITEM) {
      const source = task[1]
      const index = task[2]
      if (!hasOwn.call(source, index)) return undefined
      tasks.push([VISIT, source[index], undefined, task[3], index])
      continue
    }
    if (kind === PROP) {
      tasks.push([VISIT, task[1][task[2]], undefined, task[3], task[2]])
      continue
    }
    const current = task[1]
    const target = task[3]
    const slot = task[4]
    if (current === null || typeof current === 'boolean' || typeof current === 'string') {
      if (copy) store(target, slot, current)
      continue
    }
    if (typeof current === 'number') {
      if (!Number.isFinite(current) || Object.is(current, -0)) return undefined
      if (copy) store(target, slot, current)
      continue
    }
    if (typeof current !== 'object') return undefined
    if (open.has(current)) return undefined
    if (Array.isArray(current)) {
      if (!isArrayPrototype(Object.getPrototypeOf(current))) return undefined
      const length = current.length
      if (Reflect.ownKeys(current).length !== length + 1) return undefined
      const out = copy ? [] : undefined
      if (copy) store(target, slot, out)
      open.add(current)
      tasks.push([LEAVE, current])
      for (let i = length - 1; i >= 0; i--) tasks.push([ITEM, current, i, out])
      continue
    }
    if (!plainObjectPrototype(current)) return undefined
    const keys = Reflect.ownKeys(current)
    for (const key of keys) {
      if (typeof key !== 'string' || !isEnumerable.call(current, key)) return undefined
    }
    const out = copy ? {} : undefined
    if (copy) store(target, slot, out)
    open.add(current)
    tasks.push([LEAVE, current])
    for (let i = keys.length - 1; i >= 0; i--) tasks.push([PROP, current, keys[i], out])
  }
  return copy ? box : true
}

/** Store a copied value; object keys are defined, so `__proto__` stays data. */
function store(target, slot, item) {
  if (Array.isArray(target)) {
    target[slot] = item
  } else {
    Object.defineProperty(target, slot, { value: item, enumerable: true, configurable: true, writable: true })
  }
}

/** PUB 3: whether `value` survives JSON losslessly. */
export function isJsonValue(value) {
  return walk(value, false) === true
}

/** PUB 3: a detached copy of `value` in this realm, or undefined when not lossless. */
export function snapshotJsonValue(value) {
  const box = walk(value, true)
  return box === undefined ? undefined : box.root
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
