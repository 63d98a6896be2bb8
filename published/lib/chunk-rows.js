// Packed chunk rows (PUB 14.2): a storage codec, not vocabulary. Runs of at
// least three consecutive packable `assistant/chunk` deltas become one row;
// rows decode back to the exact events. Rows must be byte-identical with
// upstream 0.1.1-rc.2's, so every object below is built in the contract's key
// order.

const MIN_RUN = 3
const ROW_TAG = {
  'text-delta': 'text-chunks',
  'reasoning-delta': 'reasoning-chunks',
  'tool-call-delta': 'tool-call-chunks',
}

function isObject(value) {
  return typeof value === 'object' && value !== null
}

/** `value` has exactly the listed own enumerable keys. */
function keysAre(value, keys) {
  if (Object.keys(value).length !== keys.length) return false
  for (const key of keys) if (!Object.hasOwn(value, key)) return false
  return true
}

/** The delta kind of a packable event, else undefined. */
function packableKind(event) {
  // Read `type` first, as 0.1.1-rc.2 does: a null entry throws its TypeError there.
  if (event.type !== 'assistant/chunk') return undefined
  if (!keysAre(event, ['type', 'seq', 'time', 'data'])) return undefined
  const { seq, time, data } = event
  if (!Number.isSafeInteger(seq) || seq < 0 || !Number.isSafeInteger(time)) return undefined
  if (!isObject(data) || !keysAre(data, ['turn', 'step', 'chunk'])) return undefined
  if (typeof data.turn !== 'number' || typeof data.step !== 'number') return undefined
  const chunk = data.chunk
  if (!isObject(chunk) || typeof chunk.index !== 'number') return undefined
  const kind = chunk.type
  if (kind === 'text-delta' || kind === 'reasoning-delta') {
    return keysAre(chunk, ['type', 'index', 'text']) && typeof chunk.text === 'string' ? kind : undefined
  }
  if (kind === 'tool-call-delta') {
    const shape = keysAre(chunk, ['type', 'index', 'id', 'argumentsDelta'])
      || (keysAre(chunk, ['type', 'index', 'id', 'name', 'argumentsDelta']) && typeof chunk.name === 'string')
    return shape && typeof chunk.id === 'string' && typeof chunk.argumentsDelta === 'string' ? kind : undefined
  }
  return undefined
}

/** Whether `next` continues a run of `kind` whose last member is `prev`. */
function continuesRun(prev, next, kind) {
  if (next.seq !== prev.seq + 1) return false
  if (!Number.isSafeInteger(next.time - prev.time)) return false
  const a = prev.data
  const b = next.data
  if (a.turn !== b.turn || a.step !== b.step || a.chunk.index !== b.chunk.index) return false
  if (kind !== 'tool-call-delta') return true
  const hasA = Object.hasOwn(a.chunk, 'name')
  return a.chunk.id === b.chunk.id && hasA === Object.hasOwn(b.chunk, 'name') && a.chunk.name === b.chunk.name
}

function rowOf(kind, run) {
  const first = run[0]
  const dt = []
  for (let k = 1; k < run.length; k++) dt.push(run[k].time - run[k - 1].time)
  const { turn, step, chunk } = first.data
  let data
  if (kind === 'tool-call-delta') {
    data = { turn, step, index: chunk.index, dt, id: chunk.id }
    if (Object.hasOwn(chunk, 'name')) data.name = chunk.name
    data.args = run.map(event => event.data.chunk.argumentsDelta)
  } else {
    data = { turn, step, index: chunk.index, dt, texts: run.map(event => event.data.chunk.text) }
  }
  return { type: ROW_TAG[kind], seq0: first.seq, time0: first.time, data }
}

/**
 * Pack runs of >= 3 packable deltas into rows; every other event passes
 * through as the same object, in order.
 */
export function packChunkRuns(events) {
  const out = []
  let kind
  let run = []
  const close = () => {
    if (kind !== undefined && run.length >= MIN_RUN) out.push(rowOf(kind, run))
    else for (const event of run) out.push(event)
    kind = undefined
    run = []
  }
  for (const event of events) {
    const k = packableKind(event)
    if (k === undefined) {
      close()
      out.push(event)
    } else if (k === kind && run.length > 0 && continuesRun(run[run.length - 1], event, k)) {
      run.push(event)
    } else {
      close()
      kind = k
      run.push(event)
    }
  }
  close()
  return out
}

function malformed(tag, why) {
  throw new Error(`malformed ${tag} storage row: ${why}`)
}

/** Validate a row-tagged value (checks in PUB 14.2's order); returns its members. */
function checkRow(value, tag) {
  if (!keysAre(value, ['type', 'seq0', 'time0', 'data'])) {
    malformed(tag, 'envelope must be exactly {type, seq0, time0, data}')
  }
  const { seq0, time0, data } = value
  if (!Number.isSafeInteger(seq0) || seq0 < 0) malformed(tag, 'seq0 must be a non-negative safe integer')
  if (!Number.isSafeInteger(time0)) malformed(tag, 'time0 must be a safe integer')
  if (!isObject(data)) malformed(tag, 'data must be an object')
  let payloadKey
  if (tag === 'tool-call-chunks') {
    const named = keysAre(data, ['turn', 'step', 'index', 'id', 'name', 'dt', 'args'])
    if (!named && !keysAre(data, ['turn', 'step', 'index', 'id', 'dt', 'args'])) {
      malformed(tag, 'data must be exactly {turn, step, index, id, name?, dt, args}')
    }
    if (typeof data.id !== 'string' || (named && typeof data.name !== 'string')) {
      malformed(tag, 'id (and name when present) must be strings')
    }
    payloadKey = 'args'
  } else {
    if (!keysAre(data, ['turn', 'step', 'index', 'dt', 'texts'])) {
      malformed(tag, 'data must be exactly {turn, step, index, dt, texts}')
    }
    payloadKey = 'texts'
  }
  if (typeof data.turn !== 'number' || typeof data.step !== 'number' || typeof data.index !== 'number') {
    malformed(tag, 'turn/step/index must be numbers')
  }
  const members = data[payloadKey]
  if (!Array.isArray(members) || members.length === 0 || members.some(m => typeof m !== 'string')) {
    malformed(tag, `${payloadKey} must be a non-empty string array`)
  }
  const dt = data.dt
  if (!Array.isArray(dt) || dt.some(gap => !Number.isSafeInteger(gap))) {
    malformed(tag, 'dt must be an array of safe integers')
  }
  if (dt.length !== members.length - 1) {
    malformed(tag, `dt length ${dt.length} does not match ${members.length} members`)
  }
  if (!Number.isSafeInteger(seq0 + members.length - 1)) malformed(tag, 'member seqs must stay safe integers')
  let time = time0
  for (const gap of dt) {
    time += gap
    if (!Number.isSafeInteger(time)) malformed(tag, 'member times must stay safe integers')
  }
  return members
}

/**
 * Decode one parsed storage line: a row expands to its `assistant/chunk`
 * events; anything else passes through unvalidated as `[value]`.
 */
export function decodeStorageRecord(value) {
  if (!isObject(value)) return [value]
  const tag = value.type
  if (tag !== 'text-chunks' && tag !== 'reasoning-chunks' && tag !== 'tool-call-chunks') return [value]
  const members = checkRow(value, tag)
  const { seq0, data } = value
  const { turn, step, index, dt } = data
  const events = []
  let time = value.time0
  for (let k = 0; k < members.length; k++) {
    if (k > 0) time += dt[k - 1]
    let chunk
    if (tag === 'tool-call-chunks') {
      chunk = { type: 'tool-call-delta', index, id: data.id }
      if (Object.hasOwn(data, 'name')) chunk.name = data.name
      chunk.argumentsDelta = members[k]
    } else {
      chunk = { type: tag === 'text-chunks' ? 'text-delta' : 'reasoning-delta', index, text: members[k] }
    }
    events.push({ type: 'assistant/chunk', seq: seq0 + k, time, data: { turn, step, chunk } })
  }
  return events
}
