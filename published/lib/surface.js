// The surface fold of the published line, in plain JavaScript.
//
// The Rust core holds the same fold for the root's sessions; this copy exists
// only because `./surface` must be browser-safe (PUB 13.2): no imports at all,
// no `node:` built-ins, no native addon. It is the contract of PUB 6 and PUB 7
// (and SPEC 5 for the messages unchanged from v0), written from that text.

const ELIGIBLE = new Set(['user/message', 'assistant/message', 'tool/result'])

/** PUB 6: true for exactly the three surface-eligible types. */
export function isSurfaceEligibleType(type) {
  return ELIGIBLE.has(type)
}

/** PUB 6: an eligible type carrying a `surfaceOp`. */
export function isSurfaceEvent(event) {
  return ELIGIBLE.has(event.type) && event.surfaceOp !== undefined
}

/** PUB 6: a surface event that appended to the tail. */
export function isAppendSurfaceEvent(event) {
  return isSurfaceEvent(event) && event.surfaceOp === 'append'
}

/** PUB 6: a surface event that replaced a range. */
export function isReplacementSurfaceEvent(event) {
  return isSurfaceEvent(event) && event.surfaceOp !== 'append'
}

/**
 * PUB 7: the identified message object already in the event, or null.
 * Nothing is wrapped or rebuilt.
 */
export function deriveEventMessage(event) {
  const type = event.type
  if (type === 'user/message') return event.data
  if (type === 'assistant/message') {
    const message = event.data.message
    return message.content.length === 0 ? null : message
  }
  if (type === 'tool/result') return event.data.message
  return null
}

function isSeq(value) {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0
}

/** The event's validated `surfaceOp`, or undefined for a log-only event. */
function opOf(event) {
  const type = event.type
  const op = event.surfaceOp
  if (!ELIGIBLE.has(type)) {
    if (op !== undefined) {
      throw new Error(`session event "${type}" is not surface-eligible and cannot carry surfaceOp`)
    }
    if (event.sourceEventSeqs !== undefined) {
      throw new Error(`session event "${type}" is not surface-eligible and cannot carry sourceEventSeqs`)
    }
    return undefined
  }
  if (op === undefined) {
    throw new Error(`session event "${type}" is surface-eligible and requires a surfaceOp marker`)
  }
  if (op === 'append') return op
  if (op === null || typeof op !== 'object' || Array.isArray(op)) {
    throw new Error(`session event "${type}" carries an invalid surfaceOp`)
  }
  const exact = Object.keys(op).length === 3
    && Object.hasOwn(op, 'op') && Object.hasOwn(op, 'start') && Object.hasOwn(op, 'end')
    && op.op === 'replace' && isSeq(op.start) && isSeq(op.end)
  if (!exact) {
    throw new Error(`session event "${type}" carries an invalid replace surfaceOp`)
  }
  return op
}

/** PUB 6: the five `sourceEventSeqs` checks in order, then shadowed-node coverage. */
function checkSources(event, shadowed) {
  const list = event.sourceEventSeqs
  const cited = new Set()
  if (list !== undefined) {
    if (!Array.isArray(list)) {
      throw new Error(`sourceEventSeqs on event at seq ${event.seq} must be an array when present`)
    }
    if (list.length === 0 && event.type !== 'assistant/message') {
      throw new Error('sourceEventSeqs must not be empty except on assistant/message')
    }
    let firstLate
    for (let i = 0; i < list.length; i++) {
      const source = list[i]
      if (!isSeq(source)) {
        throw new Error(`session event "${event.type}" sourceEventSeqs must densely contain non-negative safe integers`)
      }
      cited.add(source)
      if (firstLate === undefined && source >= event.seq) firstLate = source
    }
    if (cited.size !== list.length) {
      throw new Error('sourceEventSeqs must not contain duplicates')
    }
    if (firstLate !== undefined) {
      throw new Error(`sourceEventSeqs must reference earlier events: ${firstLate} >= current seq ${event.seq}`)
    }
  }
  const missing = []
  for (const seq of shadowed) if (!cited.has(seq)) missing.push(seq)
  if (missing.length > 0) {
    throw new Error(`surface replace: sourceEventSeqs must include every shadowed surface node; missing ${missing.join(', ')}`)
  }
}

/**
 * Structural JSON equality: key sets and values, key order ignored, arrays by
 * element. Iterative, so nesting depth does not reach the call stack.
 */
function sameJson(left, right) {
  const pending = [left, right]
  while (pending.length > 0) {
    const b = pending.pop()
    const a = pending.pop()
    if (a === b) continue
    const aArray = Array.isArray(a)
    const bArray = Array.isArray(b)
    if (aArray || bArray) {
      if (!aArray || !bArray || a.length !== b.length) return false
      for (let i = 0; i < a.length; i++) pending.push(a[i], b[i])
      continue
    }
    if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return false
    const keys = Object.keys(a)
    if (keys.length !== Object.keys(b).length) return false
    for (const key of keys) {
      if (!Object.hasOwn(b, key)) return false
      pending.push(a[key], b[key])
    }
  }
  return true
}

/** `data` with `message.content` reduced to its first block, that block's `content` nulled. */
function maskedResult(data) {
  const message = data.message
  const first = message.content[0]
  return { ...data, message: { ...message, content: [{ ...first, content: null }] } }
}

/** PUB 6: the `tool/result` replacement rule, after coverage. */
function checkToolResultRewrite(event, shadowed, log, baseSeq) {
  if (event.type !== 'tool/result') return
  if (shadowed.length !== 1) {
    throw new Error('tool/result surface replacement must rewrite exactly one current node')
  }
  const original = log[shadowed[0] - baseSeq]
  if (original === undefined || original === null || original.type !== 'tool/result') {
    throw new Error('tool/result surface replacement must target a current tool/result')
  }
  if (!sameJson(maskedResult(original.data), maskedResult(event.data))) {
    throw new Error('tool/result surface replacement may change only content')
  }
}

/**
 * Validate one event at `expected` against `nodes` without changing anything.
 * Returns undefined (log-only), `{seq}` (append) or a replace plan.
 */
function plan(nodes, event, expected, log, baseSeq) {
  if (event.seq !== expected) {
    throw new Error(`session event seq ${event.seq} is not contiguous; expected ${expected}`)
  }
  const op = opOf(event)
  if (op === undefined) return undefined
  if (op === 'append') {
    checkSources(event, [])
    return { seq: event.seq }
  }
  const from = nodes.indexOf(op.start)
  if (from === -1) throw new Error(`surface replace: start seq ${op.start} not found in surface`)
  const to = nodes.indexOf(op.end)
  if (to === -1) throw new Error(`surface replace: end seq ${op.end} not found in surface`)
  if (from > to) {
    throw new Error(`surface replace: start seq ${op.start} (index ${from}) is after end seq ${op.end} (index ${to})`)
  }
  const shadowedSeqs = nodes.slice(from, to + 1)
  checkSources(event, shadowedSeqs)
  checkToolResultRewrite(event, shadowedSeqs, log, baseSeq)
  return { seq: event.seq, start: op.start, end: op.end, shadowedSeqs, from, to }
}

/** Apply a plan to a state `{nodes, replaceGeneration}`; true when it replaced. */
function commit(state, step) {
  if (step === undefined) return false
  if (step.shadowedSeqs === undefined) {
    state.nodes.push(step.seq)
    return false
  }
  state.nodes.splice(step.from, step.to - step.from + 1, step.seq)
  state.replaceGeneration += 1
  return true
}

/**
 * PUB 6: fold a whole log (seq === index) into fresh arrays.
 * @returns {{nodes: number[], replacements: {seq: number, start: number, end: number, shadowedSeqs: number[]}[]}}
 */
export function foldSurface(events) {
  const state = { nodes: [], replaceGeneration: 0 }
  const replacements = []
  for (let i = 0; i < events.length; i++) {
    const step = plan(state.nodes, events[i], i, events, 0)
    if (commit(state, step)) {
      replacements.push({ seq: step.seq, start: step.start, end: step.end, shadowedSeqs: step.shadowedSeqs })
    }
  }
  return { nodes: [...state.nodes], replacements }
}

/**
 * PUB 6: an incremental surface over a contiguous window of a log whose first
 * event has seq `baseSeq`. The getters fold unseen events lazily; `nodes` is
 * one live array, changed in place.
 */
export class SurfaceManager {
  #log
  #baseSeq
  #state = { nodes: [], replaceGeneration: 0 }
  /** Absolute seq of the next event to fold. */
  #next
  /** `{event, seq, step}` from validateNext, reused if exactly that event lands at that seq. */
  #pending

  constructor(log, baseSeq = 0) {
    this.#log = log
    this.#baseSeq = baseSeq
    this.#next = baseSeq
  }

  get nodes() {
    this.#catchUp()
    return this.#state.nodes
  }

  get replaceGeneration() {
    this.#catchUp()
    return this.#state.replaceGeneration
  }

  /** Validate a candidate for seq `baseSeq + log.length`; mutates nothing. */
  validateNext(event) {
    this.#catchUp()
    const seq = this.#baseSeq + this.#log.length
    this.#pending = { event, seq, step: plan(this.#state.nodes, event, seq, this.#log, this.#baseSeq) }
  }

  #catchUp() {
    const log = this.#log
    const end = this.#baseSeq + log.length
    while (this.#next < end) {
      const seq = this.#next
      const event = log[seq - this.#baseSeq]
      const pending = this.#pending
      if (pending !== undefined && pending.event === event && pending.seq === seq) {
        commit(this.#state, pending.step)
      } else {
        commit(this.#state, plan(this.#state.nodes, event, seq, log, this.#baseSeq))
      }
      if (pending !== undefined && pending.seq <= seq) this.#pending = undefined
      this.#next = seq + 1
    }
  }
}
