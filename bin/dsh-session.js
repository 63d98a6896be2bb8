#!/usr/bin/env node
'use strict'
// dsh-session: look inside a stored session log, check it, repair it, convert
// it. A log is addressed as a path to a `.jsonl` file or as
// `sqlite:<path>#<session-id>`. Reading is native and read-only (the stores'
// crash-repair rules applied in memory); only `repair` and `convert` write.

const fs = require('node:fs')
const path = require('node:path')

const api = require('../index.js')
const { binding, wrapNative } = api[Symbol.for('dsh-session-native.internal')]
const { JsonlSessionStore, SqliteSessionStore, loadAsWriter } = require('../lib/stores.js')

const PROGRAM = 'dsh-session'
/** Events read from the native log per step (bounds memory and paces the progress bar). */
const CHUNK = 5000
/** Logs at least this long show a progress bar (when stderr is a terminal). */
const PROGRESS_MIN_EVENTS = 20000

// ---------------------------------------------------------------- errors and output

/** A failure to report as one line, with the exit code to end on. */
class CliError extends Error {
  constructor(message, exitCode = 1, code = undefined) {
    super(message)
    this.exitCode = exitCode
    this.code = code
  }
}

/** One line, whatever the message holds. */
function oneLine(message) {
  return String(message).replace(/\s*\n\s*/g, ' ')
}

function out(text) {
  process.stdout.write(text.endsWith('\n') ? text : `${text}\n`)
}

function outJson(value) {
  out(JSON.stringify(value, null, 2))
}

// ---------------------------------------------------------------- help

const USAGE = `usage: ${PROGRAM} <command> [options] <log>

Look inside, check, repair and convert dsh session logs (format v0).

A <log> is a path to a .jsonl file or sqlite:<path>#<session-id>.

commands:
  inspect <log>              a readable report of what the log holds
  check <log>                exit 0 if it loads as stored, 2 if only after repair, 1 if not at all
  derive <log>               the derived model messages, as JSON
  surface <log>              the surface nodes and the replacement history
  repair <log>               make the load repair durable (what a store does on load)
  convert <from> <to>        copy a session between JSONL and SQLite
  list <dir | sqlite:path>   the headers of the stored sessions

options (every command):
  --json                     machine-readable output
  -h, --help                 help for a command

Run '${PROGRAM} <command> --help' for a command's options.`

const COMMANDS = {
  inspect: {
    args: ['log'],
    flags: ['json'],
    help: `usage: ${PROGRAM} inspect <log> [--json]

A report of what the log holds: header, events per type, turns and steps,
tool calls, models and token usage, the surface and what each replacement
(compaction) shadowed, the derived messages by role with their sizes,
request-header changes, whether the log needs repair, and the SPEC 9
invariant checks. Read-only. Long logs show a progress bar on stderr when
it is a terminal.`,
  },
  check: {
    args: ['log'],
    flags: ['json', 'invariants'],
    help: `usage: ${PROGRAM} check <log> [--invariants] [--json]

Whether the log loads. Read-only.

exit status:
  0  it loads as stored
  2  it loads only after repair (a torn tail dropped, an interrupted turn closed)
  1  it cannot be loaded, or (with --invariants) it breaks the SPEC 9 checks;
     the reason is printed with its line or seq

options:
  --invariants   also run the SPEC 9 development checks over the loaded log`,
  },
  derive: {
    args: ['log'],
    flags: ['json', 'repaired'],
    help: `usage: ${PROGRAM} derive <log> [--repaired]

The messages the log derives (what the model sees), as a JSON array on
stdout. The output is JSON with or without --json.

options:
  --repaired   derive the log as a store load returns it (with the closers
               of an interrupted turn); by default, the events as stored`,
  },
  surface: {
    args: ['log'],
    flags: ['json', 'repaired'],
    help: `usage: ${PROGRAM} surface <log> [--repaired] [--json]

The surface (the event seqs that produce model messages, in order) with each
node's type and size, and the replacement history: which nodes each
replace (a compaction, a trim) shadowed.

options:
  --repaired   the log as a store load returns it (with the closers)
  --json       { nodes, replaceGeneration, replacements } as foldSurface gives them`,
  },
  repair: {
    args: ['log'],
    flags: ['json', 'dry-run'],
    help: `usage: ${PROGRAM} repair <log> [--dry-run] [--json]

Apply the load repair durably, as a store does when it loads the session:
drop a torn tail after the last turn/end, and close an interrupted final
turn (a result for each pending tool call, step/end, turn/end). Corruption
before the last turn/end cannot be repaired and is reported.

options:
  --dry-run   say what would change, change nothing`,
  },
  convert: {
    args: ['from', 'to'],
    flags: ['json'],
    help: `usage: ${PROGRAM} convert <from> <to> [--json]

Copy a session between addresses: a .jsonl file and sqlite:<path>[#<id>]
(the id, when given, must be the session's). The session is copied as a
store load returns it; the source is not changed. The destination must not
hold the session yet (a .jsonl file must not exist).`,
  },
  list: {
    args: ['store'],
    flags: ['json'],
    help: `usage: ${PROGRAM} list <dir | sqlite:path> [--json]

The headers of the sessions stored under a JSONL store root (its cwd-*/ and
_no-cwd/ folders, and .jsonl files directly in the folder) or in a SQLite
database. Reads headers only.`,
  },
}

// ---------------------------------------------------------------- arguments

function parseArgs(argv) {
  if (argv.length === 0) throw new CliError(`no command given\n${USAGE}`, 1)
  const first = argv[0]
  if (first === '-h' || first === '--help' || first === 'help') {
    const topic = argv[1]
    if (topic !== undefined && COMMANDS[topic] !== undefined) return { help: COMMANDS[topic].help }
    return { help: USAGE }
  }
  if (first === '--version' || first === '-V') return { version: true }
  const spec = COMMANDS[first]
  if (spec === undefined) {
    throw new CliError(`unknown command "${first}" (commands: ${Object.keys(COMMANDS).join(', ')}; see ${PROGRAM} --help)`)
  }
  const flags = {}
  const positionals = []
  let onlyPositionals = false
  for (const arg of argv.slice(1)) {
    if (!onlyPositionals && arg === '--') {
      onlyPositionals = true
    } else if (!onlyPositionals && (arg === '-h' || arg === '--help')) {
      return { help: spec.help }
    } else if (!onlyPositionals && arg.startsWith('-') && arg !== '-') {
      const name = arg.replace(/^--?/, '')
      if (!spec.flags.includes(name)) {
        throw new CliError(`unknown option ${arg} for ${first} (see ${PROGRAM} ${first} --help)`)
      }
      flags[name] = true
    } else {
      positionals.push(arg)
    }
  }
  if (positionals.length !== spec.args.length) {
    const usage = spec.help.split('\n')[0]
    throw new CliError(`${first} takes ${spec.args.map((a) => `<${a}>`).join(' ')} (${usage})`)
  }
  return { command: first, flags, positionals }
}

/**
 * A log address: `{ kind: 'jsonl', path, text }` or
 * `{ kind: 'sqlite', path, id, text }` (`id` undefined when absent).
 */
function parseAddress(text, { needId = true, allowJsonl = true } = {}) {
  if (text.startsWith('sqlite:')) {
    const rest = text.slice('sqlite:'.length)
    const hash = rest.indexOf('#')
    const file = hash === -1 ? rest : rest.slice(0, hash)
    const id = hash === -1 ? undefined : rest.slice(hash + 1)
    if (file === '') throw new CliError(`bad address "${text}": sqlite: needs a database path (sqlite:<path>#<session-id>)`)
    if (id === '') throw new CliError(`bad address "${text}": empty session id after #`)
    if (needId && id === undefined) {
      throw new CliError(`bad address "${text}": name the session (sqlite:<path>#<session-id>)`)
    }
    return { kind: 'sqlite', path: path.resolve(file), id, text }
  }
  if (/^[a-z][a-z0-9+.-]+:/i.test(text) && !/^[a-z]:[\\/]/i.test(text)) {
    throw new CliError(`bad address "${text}": unknown scheme (use a .jsonl path or sqlite:<path>#<session-id>)`)
  }
  if (!allowJsonl || !text.endsWith('.jsonl')) {
    throw new CliError(`bad address "${text}": expected a .jsonl file or sqlite:<path>#<session-id>`)
  }
  return { kind: 'jsonl', path: path.resolve(text), text }
}

/** Fail unless `file` is an existing regular file. */
function requireFile(file, text) {
  let stat
  try {
    stat = fs.statSync(file)
  } catch (error) {
    if (error.code === 'ENOENT') throw new CliError(`${text}: no such file`)
    throw new CliError(`${text}: ${error.message}`)
  }
  if (stat.isDirectory()) throw new CliError(`${text}: is a directory, not a log file`)
  if (!stat.isFile()) throw new CliError(`${text}: not a regular file`)
  return stat
}

// ---------------------------------------------------------------- reading a log

/**
 * Read a log with the load repair of SPEC 11: `{ report, plan }`. With
 * `write` (JSONL only) the repair is made durable. A log that cannot be
 * loaded is a CliError naming it.
 */
async function readLog(address, { write = false } = {}) {
  requireFile(address.path, address.kind === 'sqlite' ? address.path : address.text)
  const report = address.kind === 'jsonl'
    ? await binding.readJsonlLog(address.path, write)
    : await binding.readSqliteLog(address.path, address.id)
  const error = report.errorJson()
  if (error !== null) {
    const { code, message } = JSON.parse(error)
    throw new CliError(`${address.text}: ${oneLine(message)}`, 1, code)
  }
  const plan = JSON.parse(report.planJson())
  return { report, plan }
}

function needsRepair(plan) {
  return plan.torn || plan.closers.length > 0
}

/** What the repair of `plan` does, in words (empty when nothing). */
function describeRepair(plan, address) {
  const parts = []
  if (plan.torn) {
    const records = plan.records - plan.preserved
    const after = plan.preserved === 0 ? 'after the header' : `after seq ${plan.preserved - 1}`
    const bytes = plan.fileBytes === null ? '' : `, ${formatBytes(plan.fileBytes - plan.committedBytes)}`
    const unit = address.kind === 'sqlite' ? 'row' : 'record'
    parts.push(`torn tail dropped: ${plural(records, unit)} ${after}${bytes}`)
  }
  if (plan.closers.length > 0) {
    const end = plan.closers[plan.closers.length - 1]
    const what = plan.closers.map((c) => (c.type === 'tool/result' ? `tool/result ${c.data.callId}` : c.type))
    parts.push(`interrupted turn ${end.data.turn} closed: ${what.join(', ')} (seq ${plan.closers[0].seq}..${end.seq})`)
  }
  return parts
}

/** Say on stderr that the log read needs repair, and which view is shown. */
function warnRepair(plan, address, repaired) {
  const parts = describeRepair(plan, address)
  if (parts.length === 0) return
  const view = repaired ? 'showing the log as a load repairs it' : 'showing the events as stored (--repaired adds the closers)'
  process.stderr.write(`${PROGRAM}: warning: ${address.text} needs repair (${parts.join('; ')}); ${view}\n`)
}

/** `{ message, seq }` of the first SPEC 9 violation, or null. */
function invariantResult(report, repaired) {
  const json = report.invariants(repaired)
  return json === null ? null : JSON.parse(json)
}

/** Where an event is, for a message. */
function place(_address, seq) {
  return `at seq ${seq}`
}

/** Events of a native log in chunks: yields `[from, events]`. */
function* eventChunks(native, size = CHUNK) {
  const total = native.length
  for (let from = 0; from < total; from += size) {
    yield [from, JSON.parse(native.eventsJson(from, Math.min(total, from + size)))]
  }
}

// ---------------------------------------------------------------- formatting

function plural(n, unit, many = `${unit}s`) {
  return `${formatInt(n)} ${n === 1 ? unit : many}`
}

function formatInt(n) {
  return Number(n).toLocaleString('en-US')
}

function formatBytes(n) {
  if (n < 1024) return `${n} B`
  const units = ['KiB', 'MiB', 'GiB']
  let v = n / 1024
  let i = 0
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024
    i++
  }
  return `${v < 10 ? v.toFixed(1) : Math.round(v)} ${units[i]}`
}

function formatTime(ms) {
  if (typeof ms !== 'number' || !Number.isFinite(ms)) return '-'
  const d = new Date(ms)
  if (Number.isNaN(d.getTime())) return String(ms)
  return d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC')
}

/** `start → end`, the end without its date when both fall on the same day. */
function formatSpan(start, end) {
  const a = formatTime(start)
  const b = formatTime(end)
  if (a.slice(0, 10) === b.slice(0, 10) && a.length === b.length) return `${a.replace(' UTC', '')} → ${b.slice(11)}`
  return `${a} → ${b}`
}

function formatDuration(ms) {
  if (!(ms >= 0)) return '-'
  if (ms < 1000) return `${ms} ms`
  const s = ms / 1000
  if (s < 60) return `${s.toFixed(1)} s`
  const m = Math.floor(s / 60)
  if (m < 60) return `${m} min ${Math.round(s - m * 60)} s`
  const h = Math.floor(m / 60)
  return `${h} h ${m - h * 60} min`
}

/** Seqs as compact ranges: `3-7, 9, 12-14`. */
function ranges(seqs, limit = 12) {
  const parts = []
  let i = 0
  while (i < seqs.length) {
    let j = i
    while (j + 1 < seqs.length && seqs[j + 1] === seqs[j] + 1) j++
    parts.push(i === j ? `${seqs[i]}` : `${seqs[i]}-${seqs[j]}`)
    i = j + 1
  }
  if (parts.length <= limit) return parts.join(', ')
  return `${parts.slice(0, limit).join(', ')}, … (${parts.length - limit} more ranges)`
}

/** Rows as aligned columns; `align[i]` is 'r' for right-aligned numbers. */
function table(rows, align = [], indent = '  ') {
  const widths = []
  for (const row of rows) {
    row.forEach((cell, i) => {
      widths[i] = Math.max(widths[i] ?? 0, String(cell).length)
    })
  }
  return rows
    .map((row) => indent + row
      .map((cell, i) => {
        const s = String(cell)
        if (i === row.length - 1 && align[i] !== 'r') return s
        return align[i] === 'r' ? s.padStart(widths[i]) : s.padEnd(widths[i])
      })
      .join('  ')
      .trimEnd())
    .join('\n')
}

/** A labelled section line: `label      text`. */
function field(label, text) {
  return `${label.padEnd(11)}${text}`
}

function preview(text, width = 60) {
  const flat = String(text).replace(/\s+/g, ' ').trim()
  return flat.length > width ? `${flat.slice(0, width - 1)}…` : flat
}

// ---------------------------------------------------------------- progress

/** A progress bar on stderr, drawn only on a terminal and for long logs. */
function progress(label, total) {
  const enabled = process.stderr.isTTY === true && total >= PROGRESS_MIN_EVENTS
  let last = 0
  return {
    update(done) {
      if (!enabled) return
      const now = Date.now()
      if (now - last < 80 && done < total) return
      last = now
      const width = 30
      const filled = Math.round((done / total) * width)
      const pct = Math.floor((done / total) * 100)
      process.stderr.write(`\r${label} [${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${String(pct).padStart(3)}% ${formatInt(done)}/${formatInt(total)}`)
    },
    done() {
      if (enabled) process.stderr.write('\r\x1b[K')
    },
  }
}

// ---------------------------------------------------------------- message sizes

/** Characters of a content block's text (tool results: their inner text). */
function blockChars(block) {
  if (block === null || typeof block !== 'object') return 0
  switch (block.type) {
    case 'text':
    case 'reasoning':
      return typeof block.text === 'string' ? block.text.length : 0
    case 'tool-call':
      return (typeof block.arguments === 'string' ? block.arguments.length : 0) + String(block.name ?? '').length
    case 'tool-result':
      return contentChars(block.content)
    default:
      return JSON.stringify(block).length
  }
}

function contentChars(content) {
  if (!Array.isArray(content)) return 0
  let n = 0
  for (const block of content) n += blockChars(block)
  return n
}

/** The first text of a message's content, for previews. */
function firstText(content) {
  if (!Array.isArray(content)) return ''
  for (const block of content) {
    if (block?.type === 'text' && typeof block.text === 'string') return block.text
    if (block?.type === 'tool-result') return firstText(block.content)
    if (block?.type === 'tool-call') return `${block.name}(${block.arguments})`
  }
  return ''
}

// ---------------------------------------------------------------- the analysis

const SURFACE_TYPES = new Set(['user/message', 'assistant/message', 'tool/result', 'context/message', 'steering/message'])
const ROLE_OF = {
  'user/message': 'user',
  'tool/result': 'user',
  'context/message': 'user',
  'steering/message': 'user',
  'assistant/message': 'assistant',
}

function countInto(map, key, n = 1) {
  map.set(key, (map.get(key) ?? 0) + n)
}

function sortedCounts(map) {
  return [...map.entries()].sort((a, b) => b[1] - a[1] || String(a[0]).localeCompare(String(b[0])))
}

/** Canonical JSON (sorted keys) for comparing header parts. */
function canonicalJson(value) {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`
  if (value !== null && typeof value === 'object') {
    return `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonicalJson(value[k])}`).join(',')}}`
  }
  return JSON.stringify(value) ?? 'undefined'
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
    if (canonicalJson(x) !== canonicalJson(y)) {
      const show = (v) => (v === undefined ? '(none)' : typeof v === 'string' ? v : JSON.stringify(v))
      changes.push(`${key} ${show(x)} → ${show(y)}`)
    }
  }
  if ((a.system ?? '') !== (b.system ?? '')) {
    const [x, y] = [(a.system ?? '').length, (b.system ?? '').length]
    changes.push(x === y ? `system prompt (${formatInt(y)} chars)` : `system prompt (${formatInt(x)} → ${formatInt(y)} chars)`)
  }
  const names = (h) => (Array.isArray(h.tools) ? h.tools.map((t) => t?.name) : [])
  const [na, nb] = [names(a), names(b)]
  const added = nb.filter((n) => !na.includes(n))
  const removed = na.filter((n) => !nb.includes(n))
  if (added.length > 0) changes.push(`tools added: ${added.join(', ')}`)
  if (removed.length > 0) changes.push(`tools removed: ${removed.join(', ')}`)
  if (added.length === 0 && removed.length === 0 && canonicalJson(a.tools ?? []) !== canonicalJson(b.tools ?? [])) {
    changes.push('tool schemas')
  }
  if (canonicalJson(a.messagePrefix ?? []) !== canonicalJson(b.messagePrefix ?? [])) {
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
      if (SURFACE_TYPES.has(type)) {
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

  const fold = JSON.parse(binding.foldSurfaceJson(JSON.stringify(foldRows)))
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
  const messages = wrapNative(native).deriveMessages()
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

// ---------------------------------------------------------------- commands

async function cmdInspect({ positionals, flags }) {
  const address = parseAddress(positionals[0])
  const { report, plan } = await readLog(address)
  const native = report.session(false)
  const a = analyze(native)
  const violation = invariantResult(report, true)
  const repair = describeRepair(plan, address)
  const header = plan.header
  if (flags.json) {
    outJson({
      address: address.text,
      header,
      fileBytes: plan.fileBytes,
      ...a,
      repair: { needed: needsRepair(plan), torn: plan.torn, preserved: plan.preserved, records: plan.records, committedBytes: plan.committedBytes, closers: plan.closers, summary: repair },
      invariants: violation === null ? { ok: true } : { ok: false, message: violation.message, seq: violation.seq },
    })
    return 0
  }
  const lines = []
  const size = plan.fileBytes === null ? '' : ` (${formatBytes(plan.fileBytes)})`
  lines.push(field('session', String(header.id)))
  lines.push(field('log', `${address.text}${size}`))
  const lineage = [
    `created ${formatTime(header.createdAt)}`,
    header.cwd !== undefined ? `cwd ${header.cwd}` : null,
    header.parentSession !== undefined ? `forked from ${header.parentSession} at ${header.seedLength ?? '?'} events` : null,
  ].filter(Boolean)
  lines.push(field('header', `v${header.version}, ${lineage.join(', ')}`))
  const span = a.events === 0 ? 'none' : `${formatInt(a.events)} (seq 0..${a.events - 1}), ${formatSpan(a.firstTime, a.lastTime)} (${formatDuration(a.lastTime - a.firstTime)})`
  lines.push(field('events', span))
  lines.push('')

  if (a.events > 0) {
    lines.push('events by type')
    const rows = a.byType.map((t) => [t.type, formatInt(t.count), formatBytes(t.bytes), `${((t.bytes / a.bytes) * 100).toFixed(1)}%`])
    lines.push(table(rows, ['l', 'r', 'r', 'r']))
    lines.push('')
  }

  const reasons = Object.entries(a.turns.endReasons).map(([k, n]) => `${n} ${k}`).join(', ')
  const turnLine = [`${formatInt(a.turns.count)}`]
  if (reasons !== '') turnLine.push(`(${reasons})`)
  if (a.turns.open !== null) turnLine.push(`— turn ${a.turns.open} still open at the end`)
  lines.push(field('turns', turnLine.join(' ')))
  if (a.turns.steps > 0) {
    const avg = a.turns.count > 0 ? (a.turns.steps / a.turns.count).toFixed(1) : '0'
    lines.push(field('steps', `${formatInt(a.turns.steps)} (${avg} per turn, at most ${a.turns.maxStepsPerTurn}), ${formatInt(a.chunks)} stream chunks`))
  }
  if (a.turns.longest !== null) {
    const l = a.turns.longest
    lines.push(field('longest', `turn ${l.turn} at seq ${l.seq}: ${plural(l.steps, 'step')}, ${formatDuration(l.ms)}`))
  }
  if (a.tools.calls > 0 || a.tools.results > 0) {
    const names = Object.entries(a.tools.byName)
    const shown = names.slice(0, 6).map(([n, c]) => `${n} ${c}`).join(', ')
    const more = names.length > 6 ? `, … ${names.length - 6} more` : ''
    const errs = [`${formatInt(a.tools.errors)} errors`]
    if (a.tools.interrupted > 0) errs.push(`${a.tools.interrupted} interrupted`)
    lines.push(field('tools', `${plural(a.tools.calls, 'call')} (${shown}${more}); ${plural(a.tools.results, 'result')}, ${errs.join(', ')}`))
  }
  const models = Object.entries(a.models)
  if (models.length > 0) {
    lines.push(field('models', models.map(([k, n]) => `${k} (${plural(n, 'message')})`).join(', ')))
    const u = a.usage
    const usageParts = [`${formatInt(u.inputTokens)} in`, `${formatInt(u.outputTokens)} out`]
    if (u.cacheReadTokens > 0) usageParts.push(`${formatInt(u.cacheReadTokens)} cache read`)
    if (u.reasoningTokens > 0) usageParts.push(`${formatInt(u.reasoningTokens)} reasoning`)
    lines.push(field('tokens', usageParts.join(', ')))
  }
  if (a.todos.writes > 0) {
    const last = Array.isArray(a.todos.last) ? a.todos.last : []
    const done = last.filter((t) => t?.status === 'completed').length
    lines.push(field('todos', `${plural(a.todos.writes, 'write')}; last list: ${done}/${last.length} completed`))
  }
  lines.push('')

  const s = a.surface
  lines.push(field('surface', `${plural(s.nodes, 'node')}, ${plural(s.replacements.length, 'replacement')}`))
  const shownRepl = s.replacements.slice(0, 10)
  for (const r of shownRepl) {
    const types = Object.entries(r.shadowedTypes).map(([t, n]) => `${n} ${t}`).join(', ')
    lines.push(`  seq ${r.seq} ${r.type} replaced nodes ${r.start}..${r.end}: shadowed ${plural(r.shadowedSeqs.length, 'node')} (${types}),`)
    lines.push(`    ${formatInt(r.shadowedChars)} chars → ${formatInt(r.chars)} chars; seqs ${ranges([...r.shadowedSeqs].sort((x, y) => x - y), 6)}`)
  }
  if (s.replacements.length > shownRepl.length) lines.push(`  … ${s.replacements.length - shownRepl.length} more (see ${PROGRAM} surface)`)
  lines.push('')

  const msg = a.messages
  const hosts = msg.emptyAssistantNodes
  const hostNote = hosts > 0 ? ` (${plural(hosts, 'empty assistant message')} only ${hosts === 1 ? 'hosts' : 'host'} usage)` : ''
  lines.push(field('messages', `${formatInt(msg.count)} derived from ${plural(s.nodes, 'surface node')}${hostNote}`))
  if (msg.byRole.length > 0) {
    const rows = [['role', 'from', 'count', 'chars', 'largest']]
    let count = 0
    let chars = 0
    for (const r of msg.byRole) {
      rows.push([r.role, r.from, formatInt(r.count), formatInt(r.chars), `${formatInt(r.largest)} (seq ${r.largestSeq})`])
      count += r.count
      chars += r.chars
    }
    rows.push(['total', '', formatInt(count), formatInt(chars), ''])
    lines.push(table(rows, ['l', 'l', 'r', 'r', 'l']))
  }
  lines.push('')

  const hs = a.requestHeaders
  if (hs.length === 0) {
    lines.push(field('headers', 'no request/header'))
  } else {
    const changed = hs.filter((h) => h.changes.length > 0).length
    lines.push(field('headers', `${plural(hs.length, 'request/header')}, ${plural(changed, 'change')}`))
    const first = hs[0]
    lines.push(`  seq ${first.seq} ${first.reason}: ${first.model}, ${plural(first.tools, 'tool')}, system ${formatInt(first.systemChars)} chars`)
    const changes = hs.filter((h) => h.changes.length > 0)
    const line = (h) => `  seq ${h.seq} ${h.reason}: ${h.changes.join('; ')}`
    if (changes.length <= 6) {
      for (const h of changes) lines.push(line(h))
    } else {
      for (const h of changes.slice(0, 3)) lines.push(line(h))
      lines.push(`  … ${changes.length - 5} more …`)
      for (const h of changes.slice(-2)) lines.push(line(h))
      const what = new Map()
      for (const h of changes) for (const c of h.changes) countInto(what, c.replace(/ \(.*$/, '').replace(/^(\w+) .*→.*$/, '$1'))
      lines.push(`  what changed: ${sortedCounts(what).map(([k, n]) => `${k} ${n}×`).join(', ')}`)
    }
    const same = hs.length - 1 - changed
    if (same > 0) lines.push(`  ${plural(same, 'header')} repeated the one in force`)
  }
  lines.push('')

  if (repair.length === 0) {
    lines.push(field('repair', 'not needed: the log loads as stored'))
  } else {
    lines.push(field('repair', `needed (${PROGRAM} repair applies it):`))
    for (const r of repair) lines.push(`  ${r}`)
  }
  lines.push(field('invariants', violation === null ? 'ok (SPEC 9 development checks)' : `${violation.message} (${place(address, violation.seq)})`))
  out(lines.join('\n'))
  return 0
}

async function cmdCheck({ positionals, flags }) {
  const address = parseAddress(positionals[0])
  let result
  try {
    const { report, plan } = await readLog(address)
    const repair = describeRepair(plan, address)
    const violation = flags.invariants ? invariantResult(report, true) : null
    result = { report, plan, repair, violation }
  } catch (error) {
    if (!(error instanceof CliError) || !flags.json) throw error
    outJson({ address: address.text, status: 'error', exitCode: 1, code: error.code ?? null, message: error.message })
    return 1
  }
  const { plan, repair, violation } = result
  const events = plan.preserved + plan.closers.length
  if (violation !== null) {
    const message = `${address.text}: ${violation.message} (${place(address, violation.seq)})`
    if (flags.json) {
      outJson({ address: address.text, status: 'invariant', exitCode: 1, code: 'INVARIANT', message: violation.message, seq: violation.seq })
      return 1
    }
    throw new CliError(message, 1, 'INVARIANT')
  }
  const status = needsRepair(plan) ? 'repair' : 'ok'
  const exitCode = status === 'ok' ? 0 : 2
  if (flags.json) {
    outJson({ address: address.text, status, exitCode, id: plan.header.id, events, preserved: plan.preserved, records: plan.records, torn: plan.torn, closers: plan.closers.length, repair, invariants: flags.invariants ? 'ok' : 'not checked' })
    return exitCode
  }
  const inv = flags.invariants ? ', invariants ok' : ''
  if (status === 'ok') {
    out(`${address.text}: ok: loads as stored (session ${JSON.stringify(plan.header.id)}, ${plural(plan.preserved, 'event')}${inv})`)
  } else {
    out(`${address.text}: loads only after repair (session ${JSON.stringify(plan.header.id)}${inv}):`)
    for (const r of repair) out(`  ${r}`)
    out(`  run: ${PROGRAM} repair ${address.text}`)
  }
  return exitCode
}

async function cmdDerive({ positionals, flags }) {
  const address = parseAddress(positionals[0])
  const { report, plan } = await readLog(address)
  warnRepair(plan, address, flags.repaired === true)
  const native = report.session(flags.repaired === true)
  out(JSON.stringify(wrapNative(native).deriveMessages(), null, 2))
  return 0
}

async function cmdSurface({ positionals, flags }) {
  const address = parseAddress(positionals[0])
  const { report, plan } = await readLog(address)
  warnRepair(plan, address, flags.repaired === true)
  const native = report.session(flags.repaired === true)
  const total = native.length
  const rows = new Array(total)
  const info = new Map()
  const nodes = new Set(native.surfaceNodes())
  const touched = new Set()
  for (const [from, events] of eventChunks(native)) {
    for (let k = 0; k < events.length; k++) {
      const e = events[k]
      const row = { type: e.type, seq: e.seq }
      if (SURFACE_TYPES.has(e.type)) {
        if (e.surfaceOp !== undefined) row.surfaceOp = e.surfaceOp
        if (e.sourceEventSeqs !== undefined) row.sourceEventSeqs = e.sourceEventSeqs
        if (e.surfaceOp !== undefined) {
          touched.add(from + k)
          info.set(from + k, { type: e.type, chars: contentChars(e.data?.content), text: firstText(e.data?.content) })
        }
      }
      rows[from + k] = row
    }
  }
  const fold = JSON.parse(binding.foldSurfaceJson(JSON.stringify(rows)))
  if (flags.json) {
    outJson({ nodes: fold.nodes, replaceGeneration: fold.replacements.length, replacements: fold.replacements })
    return 0
  }
  const lines = []
  lines.push(`${address.text}: ${plural(fold.nodes.length, 'surface node')}, ${plural(fold.replacements.length, 'replacement')} (${plural(touched.size - nodes.size, 'shadowed event')} stay in the log)`)
  lines.push('')
  lines.push('replacements')
  if (fold.replacements.length === 0) lines.push('  none')
  for (const r of fold.replacements) {
    const i = info.get(r.seq) ?? { type: '?', chars: 0, text: '' }
    const shadowedChars = r.shadowedSeqs.reduce((n, s) => n + (info.get(s)?.chars ?? 0), 0)
    lines.push(`  seq ${r.seq} ${i.type} replaced ${r.start}..${r.end}: ${plural(r.shadowedSeqs.length, 'node')}, ${formatInt(shadowedChars)} → ${formatInt(i.chars)} chars`)
    lines.push(`    shadowed ${ranges([...r.shadowedSeqs].sort((x, y) => x - y), 20)}`)
    if (i.text !== '') lines.push(`    "${preview(i.text, 70)}"`)
  }
  lines.push('')
  lines.push('nodes')
  const table_ = [['#', 'seq', 'type', 'chars', 'text']]
  fold.nodes.forEach((seq, index) => {
    const i = info.get(seq) ?? { type: '?', chars: 0, text: '' }
    table_.push([String(index), String(seq), i.type, formatInt(i.chars), preview(i.text)])
  })
  lines.push(table(table_, ['r', 'r', 'l', 'r', 'l']))
  out(lines.join('\n'))
  return 0
}

async function cmdRepair({ positionals, flags }) {
  const address = parseAddress(positionals[0])
  const dryRun = flags['dry-run'] === true
  let plan
  if (address.kind === 'jsonl') {
    ;({ plan } = await readLog(address, { write: !dryRun }))
  } else {
    ;({ plan } = await readLog(address))
    if (!dryRun && needsRepair(plan)) {
      const store = new SqliteSessionStore({ path: address.path })
      try {
        await loadAsWriter(store, address.id)
      } catch (error) {
        throw new CliError(`${address.text}: ${oneLine(error.message)}`, 1, error.code)
      } finally {
        await store.close()
      }
    }
  }
  const changes = describeRepair(plan, address)
  const needed = changes.length > 0
  if (flags.json) {
    outJson({
      address: address.text,
      needed,
      dryRun,
      written: needed && !dryRun,
      preserved: plan.preserved,
      records: plan.records,
      torn: plan.torn,
      committedBytes: plan.committedBytes,
      closers: plan.closers,
      changes,
    })
    return 0
  }
  if (!needed) {
    out(`${address.text}: nothing to repair (${plural(plan.preserved, 'event')}, balanced)`)
  } else {
    out(`${address.text}: ${dryRun ? 'would repair (dry run, nothing written)' : 'repaired'}:`)
    for (const c of changes) out(`  ${c}`)
    const events = plan.preserved + plan.closers.length
    if (!dryRun) out(`  the log now holds ${plural(events, 'event')}`)
  }
  return 0
}

/** Write `text` to a new file `dest`, durably, never overwriting. */
function writeNewFile(dest, text, label) {
  const dir = path.dirname(dest)
  if (!fs.existsSync(dir)) throw new CliError(`${label}: no such directory ${dir}`)
  if (fs.existsSync(dest)) throw new CliError(`${label}: already exists (convert never overwrites)`)
  const tmp = path.join(dir, `.${path.basename(dest)}.${process.pid}.tmp`)
  const fd = fs.openSync(tmp, 'wx')
  try {
    fs.writeSync(fd, text)
    fs.fsyncSync(fd)
  } finally {
    fs.closeSync(fd)
  }
  try {
    fs.linkSync(tmp, dest)
  } catch (error) {
    if (error.code === 'EEXIST') throw new CliError(`${label}: already exists (convert never overwrites)`)
    throw new CliError(`${label}: ${error.message}`)
  } finally {
    fs.rmSync(tmp, { force: true })
  }
  try {
    const dirFd = fs.openSync(dir, 'r')
    try {
      fs.fsyncSync(dirFd)
    } finally {
      fs.closeSync(dirFd)
    }
  } catch {
    // Directories cannot be opened for fsync everywhere (Windows).
  }
}

async function cmdConvert({ positionals, flags }) {
  const from = parseAddress(positionals[0])
  const to = parseAddress(positionals[1], { needId: false })
  const { report, plan } = await readLog(from)
  const native = report.session(true)
  const header = plan.header
  const count = native.length
  if (to.kind === 'jsonl') {
    writeNewFile(to.path, native.toJsonl(), to.text)
  } else {
    if (to.id !== undefined && to.id !== header.id) {
      throw new CliError(`${to.text}: the session id is ${JSON.stringify(header.id)}, not ${JSON.stringify(to.id)} (convert keeps the id)`)
    }
    const dir = path.dirname(to.path)
    if (!fs.existsSync(dir)) throw new CliError(`${to.text}: no such directory ${dir}`)
    const store = new SqliteSessionStore({ path: to.path })
    try {
      await store.create(header)
      if (count > 0) await store.flush(wrapNative(native))
    } catch (error) {
      throw new CliError(`${to.text}: ${oneLine(error.message)}`, 1, error.code)
    } finally {
      await store.close()
    }
  }
  const target = to.kind === 'sqlite' && to.id === undefined ? `${to.text}#${header.id}` : to.text
  const repaired = describeRepair(plan, from)
  if (flags.json) {
    outJson({ from: from.text, to: target, id: header.id, events: count, repaired })
  } else {
    out(`${from.text} → ${target}: ${plural(count, 'event')} (session ${JSON.stringify(header.id)})`)
    if (count === 0) out('  the session has no events: a store keeps no log for it, so the copy holds only intent')
    for (const r of repaired) out(`  the copy includes the load repair: ${r}`)
  }
  return 0
}

/** A path as the user best reads it: relative to the working directory when under it. */
function shownPath(file) {
  const rel = path.relative(process.cwd(), file)
  return rel === '' || rel.startsWith('..') || path.isAbsolute(rel) ? file : rel
}

/** The header line of a `.jsonl` file, or undefined. */
function readHeaderLine(file) {
  let fd
  try {
    fd = fs.openSync(file, 'r')
    const buf = Buffer.alloc(64 * 1024)
    const n = fs.readSync(fd, buf, 0, buf.length, 0)
    const text = buf.subarray(0, n).toString('utf8')
    const end = text.indexOf('\n')
    if (end === -1) return undefined
    const record = JSON.parse(text.slice(0, end))
    if (record === null || typeof record !== 'object' || record.type !== 'session' || typeof record.id !== 'string') return undefined
    const { type: _type, ...header } = record
    return header
  } catch {
    return undefined
  } finally {
    if (fd !== undefined) fs.closeSync(fd)
  }
}

async function cmdList({ positionals, flags }) {
  const text = positionals[0]
  const found = []
  if (text.startsWith('sqlite:')) {
    const address = parseAddress(text, { needId: false })
    if (address.id !== undefined) throw new CliError(`bad address "${text}": list takes a database (sqlite:<path>), not a session`)
    requireFile(address.path, address.text)
    // Read-only (the store would stamp a database no store has written yet).
    const listed = JSON.parse(await binding.listSqliteSessions(address.path))
    if (listed.error !== undefined) throw new CliError(`${text}: ${oneLine(listed.error.message)}`, 1, listed.error.code)
    for (const header of listed.headers) found.push({ header, address: `sqlite:${positionals[0].slice(7)}#${header.id}` })
  } else {
    const root = path.resolve(text)
    let stat
    try {
      stat = fs.statSync(root)
    } catch {
      throw new CliError(`${text}: no such directory`)
    }
    if (!stat.isDirectory()) {
      throw new CliError(`${text}: not a directory (list takes a JSONL store root or sqlite:<path>)`)
    }
    const store = new JsonlSessionStore({ root })
    try {
      for (const header of await store.list()) {
        found.push({ header, address: shownPath(store.locate(header).path) })
      }
    } finally {
      await store.close()
    }
    for (const name of fs.readdirSync(root).sort()) {
      if (!name.endsWith('.jsonl')) continue
      const file = path.join(root, name)
      const header = readHeaderLine(file)
      if (header !== undefined) found.push({ header, address: shownPath(file) })
    }
    found.sort((a, b) => (a.header.createdAt ?? 0) - (b.header.createdAt ?? 0) || String(a.header.id).localeCompare(String(b.header.id)))
  }
  if (flags.json) {
    outJson(found.map((f) => ({ ...f.header, address: f.address })))
    return 0
  }
  if (found.length === 0) {
    out(`${text}: no stored sessions`)
    return 0
  }
  const rows = [['id', 'created', 'cwd', 'parent', 'address']]
  for (const { header, address } of found) {
    const parent = header.parentSession === undefined ? '' : `${header.parentSession} @${header.seedLength ?? '?'}`
    rows.push([String(header.id), formatTime(header.createdAt), header.cwd ?? '', parent, address])
  }
  out(`${text}: ${plural(found.length, 'session')}\n${table(rows)}`)
  return 0
}

const RUN = {
  inspect: cmdInspect,
  check: cmdCheck,
  derive: cmdDerive,
  surface: cmdSurface,
  repair: cmdRepair,
  convert: cmdConvert,
  list: cmdList,
}

// ---------------------------------------------------------------- main

function report(error) {
  const message = error instanceof CliError ? error.message : `${error?.message ?? error}`
  const lines = String(message).split('\n')
  // The first line is the error; a usage text may follow it.
  process.stderr.write(`${PROGRAM}: ${oneLine(lines[0])}\n`)
  if (lines.length > 1 && error instanceof CliError) process.stderr.write(`${lines.slice(1).join('\n')}\n`)
  if (process.env.DSH_SESSION_DEBUG && error?.stack) process.stderr.write(`${error.stack}\n`)
}

async function main(argv) {
  const parsed = parseArgs(argv)
  if (parsed.help !== undefined) {
    out(parsed.help)
    return 0
  }
  if (parsed.version) {
    out(require('../package.json').version)
    return 0
  }
  return RUN[parsed.command](parsed)
}

process.stdout.on('error', (error) => {
  // A closed pipe (`| head`) ends the output, not the program with a trace.
  if (error.code === 'EPIPE') process.exit(process.exitCode ?? 0)
  throw error
})
process.on('uncaughtException', (error) => {
  report(error)
  process.exit(1)
})
process.on('unhandledRejection', (error) => {
  report(error)
  process.exit(1)
})

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code
  },
  (error) => {
    report(error)
    process.exitCode = error instanceof CliError ? error.exitCode : 1
  },
)
