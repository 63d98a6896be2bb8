'use strict'
// Log addresses: a file (JSONL or SQLite, told apart by its first bytes, not
// its name), `sqlite:<path>#<session-id>`, `<database>#<session-id>`, or `-`
// (standard input, spooled to a temporary file the reads then use).

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { pipeline } = require('node:stream/promises')
const { binding, POSTGRES_DEFAULT_SCHEMA } = require('./core.js')
const { CliError, CODES, oneLine, toCliError } = require('./errors.js')

/** The first bytes of every SQLite 3 database file. */
const SQLITE_MAGIC = Buffer.from('SQLite format 3\0', 'latin1')

/** Temporary folders (standard input's spool), removed when the process ends, by a signal too. */
const temporary = []

function removeTemporary() {
  for (const dir of temporary.splice(0)) fs.rmSync(dir, { recursive: true, force: true })
}

/**
 * A temporary folder of this run. The first one installs the clean-up: on
 * exit, and on SIGINT, SIGTERM and SIGHUP, which then end the process as
 * the signal would have (the shell sees 128 + its number).
 */
function temporaryDir(prefix) {
  if (temporary.length === 0) {
    process.on('exit', removeTemporary)
    for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
      process.once(signal, () => {
        removeTemporary()
        process.kill(process.pid, signal)
      })
    }
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix))
  temporary.push(dir)
  return dir
}

/** `'sqlite'` when the file starts as a SQLite database does, else `'jsonl'`. */
function formatOf(file) {
  const head = Buffer.alloc(SQLITE_MAGIC.length)
  let n = 0
  const fd = fs.openSync(file, 'r')
  try {
    n = fs.readSync(fd, head, 0, head.length, 0)
  } finally {
    fs.closeSync(fd)
  }
  return n === head.length && head.equals(SQLITE_MAGIC) ? 'sqlite' : 'jsonl'
}

/** The stat of an existing regular file, or a CliError naming what is there instead. */
function requireFile(file, label) {
  let stat
  try {
    stat = fs.statSync(file)
  } catch (error) {
    if (error.code === 'ENOENT' || error.code === 'ENOTDIR') throw new CliError(`${label}: no such file`, CODES.NO_SUCH_FILE, { path: file })
    throw toCliError(error)
  }
  if (stat.isDirectory()) throw new CliError(`${label}: is a directory, not a log file`, CODES.NOT_A_FILE, { path: file })
  if (!stat.isFile()) throw new CliError(`${label}: not a regular file`, CODES.NOT_A_FILE, { path: file })
  return stat
}

/** Standard input, whole, in a temporary file (written as it arrives). */
async function spoolStdin() {
  if (process.stdin.isTTY) {
    throw new CliError('-: standard input is a terminal; pipe a log into it (dsh-session inspect - < session.jsonl)', CODES.USAGE)
  }
  const file = path.join(temporaryDir('dsh-session-stdin-'), 'stdin')
  await pipeline(process.stdin, fs.createWriteStream(file))
  return file
}

/** The session ids of a SQLite database, read-only (the core's list). */
async function sqliteIds(file, label) {
  let headers
  try {
    headers = JSON.parse(await binding.listSqliteSessions(file))
  } catch (error) {
    if (typeof error?.code !== 'string') throw error
    throw new CliError(`${label}: ${oneLine(error.message)}`, error.code)
  }
  return headers.map((h) => h.id)
}

/** A database named without a session: its one session, or a CliError asking for the id. */
async function onlySession(file, label) {
  const ids = await sqliteIds(file, label)
  if (ids.length === 1) return ids[0]
  if (ids.length === 0) throw new CliError(`${label}: the SQLite database holds no sessions`, 'SESSION_NOT_FOUND', { path: file })
  const shown = ids.slice(0, 5).map((id) => JSON.stringify(id)).join(', ')
  throw new CliError(`${label}: the SQLite database holds ${ids.length} sessions (${shown}${ids.length > 5 ? ', …' : ''}); name one: sqlite:${label}#<session-id>`, CODES.BAD_ADDRESS, { path: file })
}

/** `sqlite:<file>[#<id>]` split, or a CliError for an empty part. */
function splitSqlite(text) {
  const rest = text.slice('sqlite:'.length)
  const hash = rest.indexOf('#')
  const file = hash === -1 ? rest : rest.slice(0, hash)
  const id = hash === -1 ? undefined : rest.slice(hash + 1)
  if (file === '') throw new CliError(`bad address "${text}": sqlite: needs a database path (sqlite:<path>#<session-id>)`, CODES.BAD_ADDRESS)
  if (id === '') throw new CliError(`bad address "${text}": empty session id after #`, CODES.BAD_ADDRESS)
  return { file, id }
}

/** Whether `text` is a PostgreSQL address (`postgres://…` or `postgresql://…`). */
function isPostgres(text) {
  return /^postgres(ql)?:\/\//i.test(text)
}

/**
 * `postgres://user@host:port/db[?schema=name][#<session-id>]` split into the
 * connection URL (without `schema` and the fragment), the schema (default
 * the store's, `POSTGRES_DEFAULT_SCHEMA`) and the id (URL-decoded).
 */
function splitPostgres(text) {
  const hash = text.indexOf('#')
  const base = hash === -1 ? text : text.slice(0, hash)
  let id
  try {
    id = hash === -1 ? undefined : decodeURIComponent(text.slice(hash + 1))
  } catch {
    throw new CliError(`bad address "${text}": the session id after # is not valid percent-encoding`, CODES.BAD_ADDRESS)
  }
  if (id === '') throw new CliError(`bad address "${text}": empty session id after #`, CODES.BAD_ADDRESS)
  let url
  try {
    url = new URL(base)
  } catch {
    throw new CliError(`bad address "${text}": not a valid postgres:// URL`, CODES.BAD_ADDRESS)
  }
  // How messages name it (the schema included): never the password.
  const shown = new URL(url)
  if (shown.password !== '') shown.password = '***'
  const schema = url.searchParams.get('schema') ?? POSTGRES_DEFAULT_SCHEMA
  url.searchParams.delete('schema')
  return { url: url.toString(), schema, id, shown: shown.toString() }
}

function isScheme(text) {
  return /^[a-z][a-z0-9+.-]+:/i.test(text) && !/^[a-z]:[\\/]/i.test(text)
}

/**
 * The log a command reads: `{ kind: 'jsonl', path, text }` or
 * `{ kind: 'sqlite', path, id, text }`; `stdin: true` for `-`. `text` is
 * how messages name it.
 */
async function resolveLog(text, { stdin = true } = {}) {
  if (text === '-') {
    if (!stdin) throw new CliError('-: this command needs a file, not standard input', CODES.USAGE)
    const file = await spoolStdin()
    const kind = formatOf(file)
    const id = kind === 'sqlite' ? await onlySession(file, 'stdin') : undefined
    return { kind, path: file, id, text: 'stdin', stdin: true }
  }
  if (text.startsWith('sqlite:')) {
    const { file, id } = splitSqlite(text)
    if (id === undefined) throw new CliError(`bad address "${text}": name the session (sqlite:<path>#<session-id>)`, CODES.BAD_ADDRESS)
    const resolved = path.resolve(file)
    requireFile(resolved, resolved)
    return { kind: 'sqlite', path: resolved, id, text }
  }
  if (isPostgres(text)) {
    const { url, schema, id, shown } = splitPostgres(text)
    if (id === undefined) throw new CliError(`bad address "${shown}": name the session (postgres://…/db#<session-id>)`, CODES.BAD_ADDRESS)
    return { kind: 'postgres', url, schema, id, text: `${shown}#${id}` }
  }
  if (isScheme(text)) {
    throw new CliError(`bad address "${text}": unknown scheme (use a file path, sqlite:<path>#<session-id> or -)`, CODES.BAD_ADDRESS)
  }
  const resolved = path.resolve(text)
  // `<database>#<id>`: a path that does not exist as written, whose part before the last # is a database.
  const hash = text.lastIndexOf('#')
  if (hash > 0 && !fs.existsSync(resolved)) {
    const db = path.resolve(text.slice(0, hash))
    if (fs.existsSync(db) && fs.statSync(db).isFile() && formatOf(db) === 'sqlite') {
      const id = text.slice(hash + 1)
      if (id === '') throw new CliError(`bad address "${text}": empty session id after #`, CODES.BAD_ADDRESS)
      return { kind: 'sqlite', path: db, id, text }
    }
  }
  requireFile(resolved, text)
  if (formatOf(resolved) === 'sqlite') return { kind: 'sqlite', path: resolved, id: await onlySession(resolved, text), text }
  return { kind: 'jsonl', path: resolved, text }
}

/**
 * Where `convert` writes: `{ kind: 'stdout' }`, `{ kind: 'jsonl', path }`
 * (a new file) or `{ kind: 'sqlite', path, id? }` (a new or existing database).
 */
function resolveDestination(text) {
  if (text === '-') return { kind: 'stdout', text: 'stdout' }
  if (text.startsWith('sqlite:')) {
    const { file, id } = splitSqlite(text)
    return { kind: 'sqlite', path: path.resolve(file), id, text, named: true }
  }
  if (isPostgres(text)) {
    const { url, schema, id, shown } = splitPostgres(text)
    return { kind: 'postgres', url, schema, id, text: shown, named: true }
  }
  if (isScheme(text)) {
    throw new CliError(`bad address "${text}": unknown scheme (use a file path, sqlite:<path>[#<session-id>] or -)`, CODES.BAD_ADDRESS)
  }
  const resolved = path.resolve(text)
  if (fs.existsSync(resolved)) {
    const stat = fs.statSync(resolved)
    if (stat.isFile() && formatOf(resolved) === 'sqlite') return { kind: 'sqlite', path: resolved, id: undefined, text }
    if (stat.isDirectory()) throw new CliError(`${text}: is a directory, not a log file`, CODES.NOT_A_FILE, { path: resolved })
    throw new CliError(`${text}: already exists (convert never overwrites)`, CODES.ALREADY_EXISTS, { path: resolved })
  }
  if (/\.(db|sqlite3?)$/i.test(text)) return { kind: 'sqlite', path: resolved, id: undefined, text }
  return { kind: 'jsonl', path: resolved, text }
}

module.exports = { SQLITE_MAGIC, formatOf, isPostgres, requireFile, resolveLog, resolveDestination, splitPostgres, sqliteIds }
