'use strict'
// `dsh-session inspect <log>`: a readable report of what the log holds. A log
// that cannot be loaded is reported up to its defect, then the reason (exit 1).

const fs = require('node:fs')
const { resolveLog, sqliteIds } = require('../address.js')
const { analyze } = require('../analyze.js')
const { CliError } = require('../errors.js')
const { countInto, field, formatBytes, formatDuration, formatInt, formatSpan, formatTime, plural, ranges, sortedCounts, table } = require('../format.js')
const { PROGRAM, out, outJson } = require('../output.js')
const { describeRepair, invariantResult, leaseHolder, needsRepair, readBeforeDefect, readLog } = require('../read.js')

/** The report's sections above its verdict (repair and invariants, or the defect). */
function reportLines(address, header, fileBytes, a, partial) {
  const lines = []
  const size = fileBytes === null ? '' : ` (${formatBytes(fileBytes)})`
  lines.push(field('session', String(header.id)))
  lines.push(field('log', `${address.text}${size}`))
  const lineage = [
    `created ${formatTime(header.createdAt)}`,
    header.cwd !== undefined ? `cwd ${header.cwd}` : null,
    header.parentSession !== undefined ? `forked from ${header.parentSession} at ${header.seedLength ?? '?'} events` : null,
  ].filter(Boolean)
  lines.push(field('header', `v${header.version}, ${lineage.join(', ')}`))
  const before = partial ? ' read before the defect' : ''
  const span = a.events === 0 ? (partial ? 'none read before the defect' : 'none') : `${formatInt(a.events)}${before} (seq 0..${a.events - 1}), ${formatSpan(a.firstTime, a.lastTime)} (${formatDuration(a.lastTime - a.firstTime)})`
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
  return lines
}

/** A session the database does not hold: not found, with the ids it does hold (no report). */
async function notFound(address, failure) {
  if (address.kind !== 'sqlite') throw failure
  let ids = []
  try {
    ids = await sqliteIds(address.path, address.text)
  } catch {
    // The ids are a hint; the failure stands without them.
  }
  const shown = ids.slice(0, 5).map((id) => JSON.stringify(id)).join(', ')
  const holds = ids.length === 0 ? 'it holds no sessions' : `it holds ${ids.length === 1 ? '' : `${ids.length} sessions: `}${shown}${ids.length > 5 ? ', …' : ''}`
  throw new CliError(`${failure.message} (${holds})`, failure.code, failure.details)
}

/** The report of a log that cannot be loaded: what was read before the defect, then the reason. */
async function inspectDefective(address, failure, flags) {
  if (failure.code === 'SESSION_NOT_FOUND') return notFound(address, failure)
  const { native, header } = await readBeforeDefect(address)
  const a = native === null ? null : analyze(native)
  let fileBytes = null
  if (address.kind === 'jsonl') fileBytes = fs.statSync(address.path).size
  const { address: _address, ...where } = failure.details
  const error = { code: failure.code, message: failure.message.slice(address.text.length + 2), ...where }
  if (flags.json) {
    outJson({ address: address.text, complete: false, header, fileBytes, ...(a ?? { events: 0 }), error })
  } else {
    const lines = a === null
      ? [field('log', `${address.text}${fileBytes === null ? '' : ` (${formatBytes(fileBytes)})`}`), field('header', 'unreadable'), '']
      : reportLines(address, header, fileBytes, a, true)
    lines.push(field('load', `fails: ${error.message}`))
    lines.push(field('', address.kind === 'sqlite'
      ? 'a SQLite session is read whole or not at all: the report shows its header only'
      : `the report covers the ${plural(a?.events ?? 0, 'event')} before the defect`))
    out(lines.join('\n'))
  }
  throw failure
}

async function inspect({ positionals, flags }) {
  const address = await resolveLog(positionals[0])
  let read
  try {
    read = await readLog(address)
  } catch (error) {
    if (!(error instanceof CliError) || error.details.address === undefined) throw error
    return inspectDefective(address, error, flags)
  }
  const { report, plan } = read
  const native = report.session(false)
  const a = analyze(native)
  const violation = invariantResult(report, true)
  const repair = describeRepair(plan, address)
  const header = plan.header
  const holder = leaseHolder(address, header.id)
  if (flags.json) {
    outJson({
      address: address.text,
      complete: true,
      header,
      fileBytes: plan.fileBytes,
      ...a,
      inUse: holder,
      repair: { needed: needsRepair(plan), torn: plan.torn, tornRecord: plan.tornRecord, preserved: plan.preserved, records: plan.records, committedBytes: plan.committedBytes, closers: plan.closers, summary: repair },
      invariants: violation === null ? { ok: true } : { ok: false, message: violation.message, seq: violation.seq },
    })
    return 0
  }
  const lines = reportLines(address, header, plan.fileBytes, a, false)
  if (repair.length === 0) {
    lines.push(field('repair', 'not needed: the log loads as stored'))
  } else if (holder !== null) {
    lines.push(field('repair', `not now: in use (${holder} holds its write lease); its last turn is being written`))
  } else {
    lines.push(field('repair', `needed (${PROGRAM} repair applies it):`))
    for (const r of repair) lines.push(`  ${r}`)
  }
  lines.push(field('invariants', violation === null ? 'ok (SPEC 9 development checks)' : `${violation.message} (at seq ${violation.seq})`))
  out(lines.join('\n'))
  return 0
}

module.exports = { inspect }
