// Issue 29: a SQLite database this process cannot write (a read-only file
// system: backups and snapshots are mounted read-only; no write permission)
// is read, never written. A WAL database on a read-only mount used to fail
// every load and list with "unable to open database file": the store opened
// it read-write, set its journal mode and could stamp its schema.

import { execFileSync, spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import * as path from 'node:path'
import { describe, expect, it } from 'vitest'
import {
  asEvents,
  header,
  rejection,
  Session,
  SqliteSessionStore,
  testCleanup,
  turnBatches,
  turns,
} from './fixtures-crash/stores.js'

import { NOBODY, nobodyCannotRun } from './users.js'

const { cleanup, dirFor } = testCleanup()

const EVENTS = turns(2)
const NEXT = turnBatches(3, EVENTS.length).flat()

/** Every file under `dir` and its bytes (a directory as `name/`). */
function snapshot(dir: string, out: Record<string, string> = {}, prefix = ''): Record<string, string> {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const name = `${prefix}${entry.name}`
    if (entry.isDirectory()) {
      out[`${name}/`] = ''
      snapshot(path.join(dir, entry.name), out, `${name}/`)
    } else {
      out[name] = fs.readFileSync(path.join(dir, entry.name)).toString('base64')
    }
  }
  return out
}

/** Session `s` (EVENTS) written to the store at `db`. */
async function writeSession(store: SqliteSessionStore): Promise<void> {
  await store.create(header('s'))
  await store.append('s', asEvents(EVENTS))
}

/**
 * `dir` mounted read-only at a new directory (a bind mount remounted
 * read-only), or why that cannot be done here.
 */
function readOnlyMount(dir: string): string | { skip: string } {
  if (process.platform !== 'linux') return { skip: 'read-only bind mounts are a Linux test' }
  const at = dirFor('ro-mount')
  try {
    execFileSync('mount', ['--bind', dir, at], { stdio: 'pipe' })
  } catch (e) {
    return { skip: `mount --bind is not available here (needs root or CAP_SYS_ADMIN): ${String(e).split('\n')[0]}` }
  }
  cleanup.push(() => {
    execFileSync('umount', [at], { stdio: 'pipe' })
  })
  try {
    execFileSync('mount', ['-o', 'remount,ro,bind', at], { stdio: 'pipe' })
  } catch (e) {
    return { skip: `cannot remount the bind mount read-only: ${String(e).split('\n')[0]}` }
  }
  return at
}

/** A WAL database holding session `s` (EVENTS), its store closed (every commit in the database file). */
async function written(dir: string): Promise<string> {
  const db = path.join(dir, 'sessions.db')
  const store = new SqliteSessionStore({ path: db, journalMode: 'wal' })
  await writeSession(store)
  await store.close()
  return db
}

/** What a store reads of the database at `db`, and what its writes get; nothing may be written. */
async function readAndRefuse(db: string) {
  const store = new SqliteSessionStore({ path: db })
  cleanup.push(() => store.close())
  expect(await store.list()).toEqual([header('s')])
  const loaded = await store.load('s')
  expect(loaded.meta).toEqual(header('s'))
  expect(loaded.events).toEqual(EVENTS)
  expect((await store.open('s')).events).toEqual(EVENTS)
  expect((await rejection(store.load('missing'))).code).toBe('SESSION_NOT_FOUND')
  const flushed = await rejection(store.flush(new Session('s', asEvents([...EVENTS, ...NEXT]))))
  expect(flushed.code).toBe('READ_ONLY')
  expect(flushed.message).toMatch(new RegExp(`^session database at "${db.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}" is read-only \\(.+\\): it is read, never written; nothing was written$`))
  expect((await rejection(store.append('s', asEvents(NEXT)))).code).toBe('READ_ONLY')
  expect((await rejection(store.flush(new Session('t', asEvents(EVENTS))))).code).toBe('READ_ONLY')
  await store.close()
}

describe('sqlite store: a database on a read-only file system', () => {
  it('loads, opens and lists a WAL database, refuses writes with READ_ONLY, and writes nothing', async (ctx) => {
    const dir = dirFor('ro-src')
    await written(dir)
    const at = readOnlyMount(dir)
    if (typeof at !== 'string') return ctx.skip(at.skip)
    const before = snapshot(at)
    expect(Object.keys(before).filter((name) => !name.startsWith('sessions.db.locks/'))).toEqual(['sessions.db'])
    await readAndRefuse(path.join(at, 'sessions.db'))
    expect(snapshot(at)).toEqual(before)
    expect(snapshot(dir)).toEqual(before)
  })

  it('reads the commits still in a -wal file through its -shm (a snapshot taken while a writer had it open)', async (ctx) => {
    const live = dirFor('ro-live')
    const db = path.join(live, 'sessions.db')
    const writer = new SqliteSessionStore({ path: db, journalMode: 'wal' })
    cleanup.push(() => writer.close())
    await writeSession(writer)
    const dir = dirFor('ro-snapshot')
    for (const name of ['sessions.db', 'sessions.db-wal', 'sessions.db-shm']) fs.copyFileSync(path.join(live, name), path.join(dir, name))
    await writer.close()
    expect(fs.statSync(path.join(dir, 'sessions.db-wal')).size).toBeGreaterThan(0)
    const at = readOnlyMount(dir)
    if (typeof at !== 'string') return ctx.skip(at.skip)
    const before = snapshot(at)
    await readAndRefuse(path.join(at, 'sessions.db'))
    expect(snapshot(at)).toEqual(before)
  })

  it('refuses, rather than misses, commits in a -wal file without its -shm', async (ctx) => {
    const live = dirFor('ro-live')
    const db = path.join(live, 'sessions.db')
    const writer = new SqliteSessionStore({ path: db, journalMode: 'wal' })
    cleanup.push(() => writer.close())
    await writeSession(writer)
    const dir = dirFor('ro-no-shm')
    for (const name of ['sessions.db', 'sessions.db-wal']) fs.copyFileSync(path.join(live, name), path.join(dir, name))
    await writer.close()
    const at = readOnlyMount(dir)
    if (typeof at !== 'string') return ctx.skip(at.skip)
    const before = snapshot(at)
    const store = new SqliteSessionStore({ path: path.join(at, 'sessions.db') })
    cleanup.push(() => store.close())
    const r = await rejection(store.load('s'))
    expect(r.code).toBe('READ_ONLY')
    expect(r.message).toContain('its -wal file holds commits, and SQLite reads them only with a -shm file')
    expect(snapshot(at)).toEqual(before)
  })
})

describe('sqlite store: a database this user may not write', () => {
  it('reads it and refuses writes as an unprivileged user', async (ctx) => {
    if (process.platform === 'win32' || process.getuid?.() !== 0) return ctx.skip('needs root to run a child as uid 65534')
    const root = path.resolve(__dirname, '..')
    const cannot = nobodyCannotRun()
    if (cannot !== undefined) return ctx.skip(cannot)
    const dir = dirFor('ro-perm')
    await written(dir)
    // Root owns the directory (0755) and the database (0644): uid 65534 may read, not write.
    fs.chmodSync(dir, 0o755)
    const before = snapshot(dir)
    const script = `
      const { SqliteSessionStore } = require(${JSON.stringify(path.join(root, 'lib/stores.js'))})
      const { Session } = require(${JSON.stringify(path.join(root, 'index.js'))})
      const events = ${JSON.stringify(EVENTS)}
      const next = ${JSON.stringify(NEXT)}
      ;(async () => {
        const store = new SqliteSessionStore({ path: ${JSON.stringify(path.join(dir, 'sessions.db'))} })
        const out = { list: await store.list(), events: (await store.load('s')).events }
        out.flush = await store.flush(new Session('s', [...events, ...next])).then(() => 'written', (e) => e.code)
        out.append = await store.append('s', next).then(() => 'written', (e) => e.code)
        await store.close()
        process.stdout.write(JSON.stringify(out))
      })().catch((e) => { process.stderr.write(String(e.code) + ': ' + e.message); process.exit(1) })`
    const child = spawnSync(process.execPath, ['-e', script], NOBODY)
    expect(child.stderr.toString()).toBe('')
    expect(JSON.parse(child.stdout.toString())).toEqual({ list: [header('s')], events: EVENTS, flush: 'READ_ONLY', append: 'READ_ONLY' })
    expect(snapshot(dir)).toEqual(before)
  })
})
