'use strict'
// What `inspect` reports about a log, in one pass over its events. The
// surface fold, the surface types and the header comparison are the core's
// (`foldSurface`, `isSurfaceEligibleType`, `canonicalHeader`, `headerEquals`).

const { api, deriveNative } = require('./core.js')
const { contentChars } = require('./content.js')
const { countInto, formatInt, sortedCounts } = require('./format.js')
const { progress } = require('./progress.js')
const { eventChunks } = require('./read.js')

/** A value for a change line. */
function show(v) {
  return v === undefined ? '(none)' : typeof v === 'string' ? v : JSON.stringify(v)
}

/** What changed between two request headers, in words. */
function headerChanges(prev, next) {
  if (prev === undefined) return []
  const a = api.canonicalHeader(prev)
  const b = api.canonicalHeader(next)
  const changes = []
  const keys = new Set([...Object.keys(a.config ?? {}), ...Object.keys(b.config ?? {})])
  for (const key of keys) {
    const x = a.config?.[key]
    const y = b.config?.[key]
    if (!api.headerEquals({ config: { [key]: x } }, { config: { [key]: y } })) changes.push(`${key} ${show(x)} → ${show(y)}`)
  }
  if (!api.headerEquals({ system: a.system }, { system: b.system })) {
    const [x, y] = [(a.system ?? '').length, (b.system ?? '').length]
    changes.push(x === y ? `system prompt (${formatInt(y)} chars)` : `system prompt (${formatInt(x)} → ${formatInt(y)} chars)`)
  }
  const names = (h) => (Array.isArray(h.tools) ? h.tools.map((t) => t?.name) : [])
  const [na, nb] = [names(a), names(b)]
  const added = nb.filter((n) => !na.includes(n))
  const removed = na.filter((n) => !nb.includes(n))
  if (added.length > 0) changes.push(`tools added: ${added.join(', ')}`)
  if (removed.length > 0) changes.push(`tools removed: ${removed.join(', ')}`)
  if (added.length === 0 && removed.length === 0 && !api.headerEquals({ tools: a.tools }, { tools: b.tools })) {
    changes.push('tool schemas')
  }
  if (!api.headerEquals({ messagePrefix: a.messagePrefix }, { messagePrefix: b.messagePrefix })) {
    const [x, y] = [(a.messagePrefix ?? []).length, (b.messagePrefix ?? []).length]
    changes.push(x === y ? 'message prefix' : `message prefix (${x} → ${y} messages)`)
  }
  return changes
}

function modelOf(header) {
  const c = header?.config ?? {}
  return `${c.provider ?? '?'}/${c.model ?? '?'}`
}

/** Everything `inspect` reports about a native log, in one pass over its events. */
function analyze(native) {
  const total = native.length
  const bar = progress('reading', total)
  const byType = new Map()
  const typeIds = new Map()
  const typeNames = []
  const typeOf = new Uint16Array(total)
  const sizeOf = new Float64Array(total)
  const emptyAssistant = new Uint8Array(total)
  const foldRows = new Array(total)
  const turnReasons = new Map()
  const toolNames = new Map()
  const models = new Map()
  const headers = []
  const usage = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, reasoningTokens: 0 }
  let bytes = 0
  let turns = 0
  let steps = 0
  let openTurn = null
  let turnSteps = 0
  let maxSteps = 0
  let longest = null
  let toolCalls = 0
  let toolResults = 0
  let toolErrors = 0
  let interruptedResults = 0
  let chunks = 0
  let todoWrites = 0
  let lastTodos = null
  let firstTime
  let lastTime
  let prevHeader
  for (const [from, events] of eventChunks(native)) {
    for (let k = 0; k < events.length; k++) {
      const e = events[k]
      const seq = from + k
      const size = JSON.stringify(e).length + 1
      bytes += size
      const type = e.type
      let id = typeIds.get(type)
      if (id === undefined) {
        id = typeNames.length
        typeIds.set(type, id)
        typeNames.push(type)
        byType.set(type, { count: 0, bytes: 0 })
      }
      typeOf[seq] = id
      const t = byType.get(type)
      t.count++
      t.bytes += size
      if (firstTime === undefined) firstTime = e.time
      lastTime = e.time
      const d = e.data ?? {}
      const row = { type, seq: e.seq }
      if (api.isSurfaceEligibleType(type)) {
        if (e.surfaceOp !== undefined) row.surfaceOp = e.surfaceOp
        if (e.sourceEventSeqs !== undefined) row.sourceEventSeqs = e.sourceEventSeqs
        sizeOf[seq] = contentChars(d.content)
      }
      foldRows[seq] = row
      switch (type) {
        case 'turn/start':
          turns++
          openTurn = { turn: d.turn, start: e.time, seq }
          turnSteps = 0
          break
        case 'turn/end':
          countInto(turnReasons, d.reason?.kind ?? '?')
          if (openTurn !== null) {
            const ms = e.time - openTurn.start
            if (longest === null || ms > longest.ms) longest = { turn: d.turn, ms, steps: turnSteps, seq: openTurn.seq }
          }
          maxSteps = Math.max(maxSteps, turnSteps)
          openTurn = null
          break
        case 'step/start':
          steps++
          turnSteps++
          break
        case 'assistant/chunk':
          chunks++
          break
        case 'assistant/message': {
          countInto(models, `${d.provenance?.provider ?? '?'}/${d.provenance?.model ?? '?'}`)
          if (Array.isArray(d.content) && d.content.length === 0) emptyAssistant[seq] = 1
          const u = d.usage
          if (u !== null && typeof u === 'object') {
            for (const key of Object.keys(usage)) if (typeof u[key] === 'number') usage[key] += u[key]
          }
          break
        }
        case 'tool/call':
          toolCalls++
          countInto(toolNames, d.name ?? '?')
          break
        case 'tool/result':
          toolResults++
          if (d.isError === true) toolErrors++
          if (d.error?.code === 'interrupted') interruptedResults++
          break
        case 'todo/write':
          todoWrites++
          lastTodos = d.todos
          break
        case 'request/header': {
          const header = d.header
          headers.push({
            seq,
            reason: d.reason,
            model: modelOf(header),
            tools: Array.isArray(header?.tools) ? header.tools.length : 0,
            systemChars: typeof header?.system === 'string' ? header.system.length : 0,
            changes: headerChanges(prevHeader, header),
          })
          prevHeader = header
          break
        }
        default:
          break
      }
    }
    bar.update(Math.min(total, from + events.length))
  }
  if (openTurn !== null) maxSteps = Math.max(maxSteps, turnSteps)
  bar.done()

  const fold = api.foldSurface(foldRows)
  const typeAt = (seq) => typeNames[typeOf[seq]]
  const replacements = fold.replacements.map((r) => {
    const shadowedTypes = new Map()
    let shadowedChars = 0
    for (const s of r.shadowedSeqs) {
      countInto(shadowedTypes, typeAt(s))
      shadowedChars += sizeOf[s]
    }
    return {
      seq: r.seq,
      type: typeAt(r.seq),
      start: r.start,
      end: r.end,
      shadowedSeqs: r.shadowedSeqs,
      shadowedTypes: Object.fromEntries(sortedCounts(shadowedTypes)),
      shadowedChars,
      chars: sizeOf[r.seq],
    }
  })

  // Messages by the event type that derives them, zipped with the surface.
  const messages = deriveNative(native)
  const bySource = new Map()
  let m = 0
  let hosts = 0
  for (const seq of fold.nodes) {
    const type = typeAt(seq)
    if (type === 'assistant/message' && emptyAssistant[seq] === 1) {
      hosts++
      continue
    }
    const message = messages[m++]
    if (message === undefined) break
    const key = `${message.role}\u0000${type}`
    const entry = bySource.get(key) ?? { role: message.role, from: type, count: 0, chars: 0, largest: 0, largestSeq: seq }
    const chars = contentChars(message.content)
    entry.count++
    entry.chars += chars
    if (chars > entry.largest) {
      entry.largest = chars
      entry.largestSeq = seq
    }
    bySource.set(key, entry)
  }
  const roleOrder = { user: 0, assistant: 1 }
  const byRole = [...bySource.values()].sort((a, b) => (roleOrder[a.role] ?? 2) - (roleOrder[b.role] ?? 2) || b.count - a.count)

  return {
    events: total,
    bytes,
    firstTime,
    lastTime,
    byType: sortedCounts(new Map([...byType].map(([k, v]) => [k, v.count]))).map(([type, count]) => ({ type, count, bytes: byType.get(type).bytes })),
    turns: {
      count: turns,
      open: openTurn === null ? null : openTurn.turn,
      endReasons: Object.fromEntries(sortedCounts(turnReasons)),
      steps,
      maxStepsPerTurn: maxSteps,
      longest,
    },
    chunks,
    tools: { calls: toolCalls, results: toolResults, errors: toolErrors, interrupted: interruptedResults, byName: Object.fromEntries(sortedCounts(toolNames)) },
    models: Object.fromEntries(sortedCounts(models)),
    usage,
    todos: { writes: todoWrites, last: lastTodos },
    surface: { nodes: fold.nodes.length, replaceGeneration: fold.replacements.length, replacements },
    messages: { count: messages.length, emptyAssistantNodes: hosts, byRole },
    requestHeaders: headers,
  }
}

module.exports = { analyze, headerChanges }
