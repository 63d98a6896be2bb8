'use strict'
// Reading a log: the stores' own load code, read-only (the crash-repair rules
// of SPEC 11 applied in memory), and, for a log that cannot be loaded, the
// events before its defect.

const fs = require('node:fs')
const { binding } = require('./core.js')
const { plainDefect } = require('./defect.js')
const { CliError, oneLine } = require('./errors.js')
const { warn } = require('./output.js')
const { formatBytes, plural } = require('./format.js')

/** Events read from the native log per step (bounds memory and paces the progress bar). */
const CHUNK = 5000

/** The package's codes for a log that cannot be read as a session (its defect is told by plainDefect). */
const DEFECTS = new Set(['CORRUPT_LOG', 'LEGACY_VOCABULARY', 'INVALID_EVENT', 'INVALID_HEADER', 'INVALID_SURFACE', 'SEQ_NOT_CONTIGUOUS', 'NOT_LOSSLESS_JSON', 'UNSUPPORTED_VERSION'])

/**
 * Read a log with the load repair of SPEC 11: `{ report, plan }`. With
 * `write` (JSONL only) the repair is made durable. A log that cannot be
 * loaded is a CliError with the store's reason in the CLI's words
 * (`defect.js`: file lines with the event's seq, SQLite rows; old logs in
 * plain words) and `line`/`row`/`seq` details.
 */
async function readLog(address, { write = false } = {}) {
  let report
  try {
    report = address.kind === 'jsonl'
      ? await binding.readJsonlLog(address.path, write)
      : address.kind === 'postgres'
        ? await binding.readPostgresLog(address.url, address.schema, address.id)
        : await binding.readSqliteLog(address.path, address.id)
  } catch (error) {
    if (typeof error?.code !== 'string') throw error
    const failure = { code: error.code, message: error.message }
    const { code, message, ...where } = DEFECTS.has(failure.code) ? plainDefect(failure, address.kind) : failure
    throw new CliError(`${address.text}: ${oneLine(message)}`, code, { address: address.text, ...where })
  }
  const plan = JSON.parse(report.planJson())
  return { report, plan }
}

/** The byte offset where 1-based line `line` of `bytes` starts (the length when past the end). */
function lineStart(bytes, line) {
  let at = 0
  for (let l = 1; l < line; l++) {
    const nl = bytes.indexOf(0x0a, at)
    if (nl === -1) return bytes.length
    at = nl + 1
  }
  return at
}

/**
 * What can be read of a log that cannot be loaded: `{ native, header }`,
 * the events before the first defect as the core reads them
 * (`Session.fromJsonl`'s reader: the longest prefix of whole lines it
 * accepts), or `native: null` when not even the header reads. A SQLite
 * session gives its header only (as a log of no events): its rows are read
 * by the store's load, whole or not at all.
 */
/** The core's read of a whole JSONL log: the native session, or the error it threw (`code`, `line`). */
function readJsonl(bytes) {
  try {
    return new binding.JsonlReading(bytes).finish()
  } catch (error) {
    if (typeof error?.code !== 'string') throw error
    return error
  }
}

async function readBeforeDefect(address) {
  if (address.kind === 'sqlite' || address.kind === 'postgres') {
    let headers
    try {
      headers = JSON.parse(address.kind === 'postgres'
        ? await binding.listPostgresSessions(address.url, address.schema)
        : await binding.listSqliteSessions(address.path))
    } catch (error) {
      if (typeof error?.code !== 'string') throw error
      headers = []
    }
    const header = headers.find((h) => h.id === address.id)
    if (header === undefined) return { native: null, header: null, defectLine: null }
    // The header alone, as a log of no events (the core reads it back).
    const native = readJsonl(Buffer.from(`${JSON.stringify({ type: 'session', ...header })}\n`))
    return { native: native instanceof binding.NativeSession ? native : null, header, defectLine: null }
  }
  let bytes
  try {
    bytes = fs.readFileSync(address.path)
  } catch {
    return { native: null, header: null, defectLine: null }
  }
  let end = bytes.length
  let defectLine = null
  for (;;) {
    const result = readJsonl(bytes.subarray(0, end))
    if (result instanceof binding.NativeSession) {
      return { native: result, header: JSON.parse(result.headerJson()), defectLine }
    }
    // A failure on the header (line 1) leaves nothing to read.
    if (result.line <= 1) return { native: null, header: null, defectLine: defectLine ?? result.line }
    defectLine ??= result.line
    const next = lineStart(bytes, result.line)
    if (next >= end) return { native: null, header: null, defectLine }
    end = next
  }
}

function needsRepair(plan) {
  return plan.torn || plan.closers.length > 0
}

/** The first record a torn tail drops, in words: where, why, and its text. */
function describeTorn(torn) {
  if (torn === null || torn === undefined) return ''
  const where = torn.line !== undefined ? `line ${torn.line}` : `row ${torn.row}`
  const seq = /\bseq\b/.test(torn.cause) ? '' : ` (seq ${torn.seq})`
  return `; ${where}${seq} ${torn.cause}: ${torn.text}`
}

/** What the repair of `plan` does, in words (empty when nothing). */
function describeRepair(plan, address) {
  const parts = []
  if (plan.torn) {
    const records = plan.records - plan.preserved
    const after = plan.preserved === 0 ? 'after the header' : `after seq ${plan.preserved - 1}`
    const bytes = plan.fileBytes === null ? '' : `, ${formatBytes(plan.fileBytes - plan.committedBytes)}`
    const unit = address.kind === 'jsonl' ? 'record' : 'row'
    parts.push(`torn tail dropped: ${plural(records, unit)} ${after}${bytes}${describeTorn(plan.tornRecord)}`)
  }
  if (plan.closers.length > 0) {
    const end = plan.closers[plan.closers.length - 1]
    const what = plan.closers.map((c) => (c.type === 'tool/result' ? `tool/result ${c.data.callId}` : c.type))
    parts.push(`interrupted turn ${end.data.turn} closed: ${what.join(', ')} (seq ${plan.closers[0].seq}..${end.seq})`)
  }
  return parts
}

/**
 * Who holds the write lease of the session `address` names (`process N`),
 * seen without taking it; null when none does or it cannot be seen (a
 * PostgreSQL session, standard input, a file outside a store's layout, a
 * system without /proc/locks).
 */
function leaseHolder(address, id) {
  if (address.stdin || (address.kind !== 'jsonl' && address.kind !== 'sqlite')) return null
  const pid = binding.sessionLeaseHolder(address.kind, address.path, String(id))
  return pid === null ? null : `process ${pid}`
}

/** Say on stderr that the log read needs repair, and which view is shown. */
function warnRepair(plan, address, repaired) {
  const parts = describeRepair(plan, address)
  if (parts.length === 0) return
  const view = repaired ? 'showing the log as a load repairs it' : 'showing the events as stored (--repaired adds the closers)'
  warn('NEEDS_REPAIR', `${address.text} needs repair (${parts.join('; ')}); ${view}`, { address: address.text, repair: parts })
}

/** `{ message, code, seq }` of the first SPEC 9 violation, or null. */
function invariantResult(report, repaired) {
  const json = report.invariants(repaired)
  return json === null ? null : JSON.parse(json)
}

/** Events of a native log in chunks: yields `[from, events]`. */
function* eventChunks(native, size = CHUNK) {
  const total = native.length
  for (let from = 0; from < total; from += size) {
    yield [from, JSON.parse(native.eventsJson(from, Math.min(total, from + size)))]
  }
}

module.exports = { readLog, readBeforeDefect, needsRepair, describeRepair, leaseHolder, warnRepair, invariantResult, eventChunks }
