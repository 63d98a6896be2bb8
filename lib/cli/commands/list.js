'use strict'
// `dsh-session list <dir | database | sqlite:path>`: the headers of the stored
// sessions. Headers are read by the core (the JSONL store's list, the SQLite
// list, `Session.fromJsonl`'s header rule for loose files); a log whose
// header cannot be read is a warning on stderr, never left out in silence.

const fs = require('node:fs')
const path = require('node:path')
const { formatOf, isPostgres, requireFile, splitPostgres } = require('../address.js')
const { binding, JsonlSessionStore } = require('../core.js')
const { CliError, CODES, oneLine } = require('../errors.js')
const { formatTime, plural, table } = require('../format.js')
const { out, outJson, warn } = require('../output.js')

/** Longest header line read (a header holds an id, a time, a cwd and a parent). */
const MAX_HEADER_BYTES = 1 << 20

/** A path as the user best reads it: relative to the working directory when under it. */
function shownPath(file) {
  const rel = path.relative(process.cwd(), file)
  return rel === '' || rel.startsWith('..') || path.isAbsolute(rel) ? file : rel
}

/** Report a log the listing cannot read. */
function unreadable(file, reason) {
  warn('UNREADABLE_LOG', `${shownPath(file)}: ${oneLine(reason)} (not listed)`, { path: file })
}

/** The first line of a file, with its newline (at most MAX_HEADER_BYTES). */
function firstLine(file) {
  const fd = fs.openSync(file, 'r')
  try {
    const buf = Buffer.alloc(Math.min(MAX_HEADER_BYTES, Math.max(1, fs.fstatSync(fd).size)))
    const n = fs.readSync(fd, buf, 0, buf.length, 0)
    const end = buf.subarray(0, n).indexOf(0x0a)
    return end === -1 ? buf.subarray(0, n) : buf.subarray(0, end + 1)
  } finally {
    fs.closeSync(fd)
  }
}

/** The header of a JSONL log file, read by the core's header rule; a warning and undefined when it cannot be read. */
function jsonlHeader(file) {
  let line
  try {
    line = firstLine(file)
  } catch (error) {
    unreadable(file, `cannot read: ${error.message}`)
    return undefined
  }
  try {
    return JSON.parse(new binding.JsonlReading(line).finish().headerJson())
  } catch (error) {
    if (typeof error?.code !== 'string') throw error
    unreadable(file, line.length === 0 ? 'empty file, no session header' : error.message)
    return undefined
  }
}

/** The headers of a SQLite database, read-only; `onError` gets a database the core cannot read. */
async function sqliteHeaders(file, onError) {
  try {
    return JSON.parse(await binding.listSqliteSessions(file))
  } catch (error) {
    if (typeof error?.code !== 'string') throw error
    return onError(error)
  }
}

/** Directory entries, or a warning and none when the folder cannot be read. */
function entries(dir) {
  try {
    return fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
  } catch (error) {
    unreadable(dir, `cannot read the folder: ${error.message}`)
    return []
  }
}

/** The sessions of a JSONL store root and of the logs and databases directly in it. */
async function listDirectory(root) {
  const found = []
  const listed = new Set()
  const store = new JsonlSessionStore({ root })
  try {
    for (const header of await store.list()) {
      const file = store.locate(header).path
      listed.add(path.resolve(file))
      found.push({ header, address: shownPath(file) })
    }
  } finally {
    await store.close()
  }
  for (const entry of entries(root)) {
    const file = path.join(root, entry.name)
    if (entry.isDirectory() && (entry.name.startsWith('cwd-') || entry.name === '_no-cwd')) {
      // A store's bucket: a log the store did not list has a header it cannot read.
      for (const inner of entries(file)) {
        const log = path.join(file, inner.name)
        if (!inner.name.endsWith('.jsonl') || listed.has(path.resolve(log))) continue
        if (jsonlHeader(log) !== undefined) unreadable(log, 'its file name is not the encoded id of a session')
      }
    } else if (entry.isFile() && entry.name.endsWith('.jsonl')) {
      const header = jsonlHeader(file)
      if (header !== undefined) found.push({ header, address: shownPath(file) })
    } else if (entry.isFile() && isDatabase(file)) {
      const headers = await sqliteHeaders(file, (error) => {
        unreadable(file, error.message)
        return []
      })
      for (const header of headers) found.push({ header, address: `${shownPath(file)}#${header.id}` })
    }
  }
  found.sort((a, b) => (a.header.createdAt ?? 0) - (b.header.createdAt ?? 0) || String(a.header.id).localeCompare(String(b.header.id)))
  return found
}

function isDatabase(file) {
  try {
    return formatOf(file) === 'sqlite'
  } catch {
    return false
  }
}

/** The sessions of one SQLite database. */
async function listDatabase(file, label, shown) {
  requireFile(file, label)
  // Read-only (the store would stamp a database no store has written yet).
  const headers = await sqliteHeaders(file, (error) => {
    throw new CliError(`${label}: ${oneLine(error.message)}`, error.code, { path: file })
  })
  return headers.map((header) => ({ header, address: `${shown}#${header.id}` }))
}

async function list({ positionals, flags }) {
  const text = positionals[0]
  let found
  if (isPostgres(text)) {
    const { url, schema, id, shown } = splitPostgres(text)
    if (id !== undefined) throw new CliError(`bad address "${shown}#${id}": list takes a database (postgres://…/db[?schema=name]), not a session`, CODES.BAD_ADDRESS)
    let headers
    try {
      headers = JSON.parse(await binding.listPostgresSessions(url, schema))
    } catch (error) {
      if (typeof error?.code !== 'string') throw error
      throw new CliError(`${shown}: ${oneLine(error.message)}`, error.code)
    }
    found = headers.map((header) => ({ header, address: `${shown}#${encodeURIComponent(header.id)}` }))
  } else if (text.startsWith('sqlite:')) {
    const rest = text.slice('sqlite:'.length)
    if (rest.includes('#')) throw new CliError(`bad address "${text}": list takes a database (sqlite:<path>), not a session`, CODES.BAD_ADDRESS)
    if (rest === '') throw new CliError(`bad address "${text}": sqlite: needs a database path`, CODES.BAD_ADDRESS)
    found = await listDatabase(path.resolve(rest), path.resolve(rest), text)
  } else {
    const root = path.resolve(text)
    let stat
    try {
      stat = fs.statSync(root)
    } catch {
      throw new CliError(`${text}: no such directory`, CODES.NO_SUCH_FILE, { path: root })
    }
    if (stat.isFile() && isDatabase(root)) {
      found = await listDatabase(root, text, text)
    } else if (!stat.isDirectory()) {
      throw new CliError(`${text}: not a directory (list takes a JSONL store root, a SQLite database or sqlite:<path>)`, CODES.NOT_A_FILE, { path: root })
    } else {
      found = await listDirectory(root)
    }
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

module.exports = { list }
