'use strict'
// `dsh-session convert <from> <to>`: copy a session between a JSONL file and
// a SQLite database, as a store load returns it; the source is not changed.

const fs = require('node:fs')
const path = require('node:path')
const { resolveDestination, resolveLog } = require('../address.js')
const { PostgresSessionStore, SqliteSessionStore, fromNative } = require('../core.js')
const { CliError, CODES, fromPackageError, oneLine } = require('../errors.js')
const { plural } = require('../format.js')
const { out, outJson } = require('../output.js')
const { describeRepair, readLog } = require('../read.js')

/**
 * Write `session`'s JSONL to a new file `dest`, durably, never overwriting:
 * streamed by `writeJsonl` (a log of any size) into a temporary file,
 * fsynced, then linked into place.
 */
async function writeNewFile(dest, session, label) {
  const dir = path.dirname(dest)
  if (!fs.existsSync(dir)) throw new CliError(`${label}: no such directory ${dir}`, CODES.NO_SUCH_FILE, { path: dir })
  if (fs.existsSync(dest)) throw new CliError(`${label}: already exists (convert never overwrites)`, CODES.ALREADY_EXISTS, { path: dest })
  const tmp = path.join(dir, `.${path.basename(dest)}.${process.pid}.tmp`)
  fs.closeSync(fs.openSync(tmp, 'wx'))
  try {
    await session.writeJsonl(tmp)
    const fd = fs.openSync(tmp, 'r+')
    try {
      fs.fsyncSync(fd)
    } finally {
      fs.closeSync(fd)
    }
  } catch (error) {
    fs.rmSync(tmp, { force: true })
    throw fromPackageError(label, error)
  }
  try {
    fs.linkSync(tmp, dest)
  } catch (error) {
    if (error.code === 'EEXIST') throw new CliError(`${label}: already exists (convert never overwrites)`, CODES.ALREADY_EXISTS, { path: dest })
    throw new CliError(`${label}: ${oneLine(error.message)}`, CODES.IO, { path: dest })
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

async function convert({ positionals, flags }) {
  const from = await resolveLog(positionals[0])
  const to = resolveDestination(positionals[1])
  const { report, plan } = await readLog(from)
  const native = report.session(true)
  const header = plan.header
  const count = native.length
  if (to.kind === 'stdout') {
    // Through a string: a log past V8's string limit fails TOO_LARGE (convert to a file instead).
    try {
      process.stdout.write(fromNative(native).toJsonl())
    } catch (error) {
      throw fromPackageError(to.text, error)
    }
    return 0
  }
  if (to.kind === 'jsonl') {
    await writeNewFile(to.path, fromNative(native), to.text)
  } else {
    if (to.id !== undefined && to.id !== header.id) {
      throw new CliError(`${to.text}: the session id is ${JSON.stringify(header.id)}, not ${JSON.stringify(to.id)} (convert keeps the id)`, CODES.BAD_ADDRESS)
    }
    let store
    if (to.kind === 'postgres') {
      store = new PostgresSessionStore({ connectionString: to.url, schema: to.schema })
    } else {
      const dir = path.dirname(to.path)
      if (!fs.existsSync(dir)) throw new CliError(`${to.text}: no such directory ${dir}`, CODES.NO_SUCH_FILE, { path: dir })
      store = new SqliteSessionStore({ path: to.path })
    }
    try {
      await store.create(header)
      if (count > 0) await store.flush(fromNative(native))
    } catch (error) {
      throw fromPackageError(to.text, error)
    } finally {
      await store.close()
    }
  }
  const target = to.kind !== 'jsonl' && to.id === undefined
    ? (to.named ? `${to.text}#${header.id}` : `sqlite:${to.text}#${header.id}`)
    : to.text
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

module.exports = { convert }
