// The read-only store API the CLI reads through (src/store/inspect.rs) has
// the package's one error shape (issue 18): a read or a listing that fails
// rejects with an Error whose `code` is the core's (`errno` when an OS
// error is behind it), never a report holding an error or an
// `{"error": ...}` result; a listing resolves to the headers alone.

import * as fs from 'node:fs'
import { createRequire } from 'node:module'
import * as os from 'node:os'
import * as path from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { asEvents, turns } from './fixtures-crash/stores.js'

const nodeRequire = createRequire(__filename)
const index = nodeRequire('../index.js') as typeof import('../index.js')
type Failure = Error & { code?: string; errno?: number }
interface Report { planJson(): string }
const binding = nodeRequire('../binding.js') as {
  readJsonlLog(path: string, write: boolean): Promise<Report>
  readSqliteLog(path: string, id: string): Promise<Report>
  listSqliteSessions(path: string): Promise<string>
}

const dirs: string[] = []
afterEach(() => {
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true })
})

function tempDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dsh-inspect-'))
  dirs.push(dir)
  return dir
}

function rejection(p: Promise<unknown>): Promise<Failure | undefined> {
  return p.then(() => undefined, (error: Failure) => error)
}

describe('the CLI\'s read-only store API', () => {
  it('rejects a log it cannot read with IO and the OS error', async () => {
    const missing = path.join(tempDir(), 'missing.jsonl')
    const e = await rejection(binding.readJsonlLog(missing, false))
    expect(e).toBeInstanceOf(Error)
    expect(e?.code).toBe('IO')
    expect(e?.message).toContain(missing)
    expect(e?.errno).toBe(os.constants.errno.ENOENT)
  })

  it('rejects a log that cannot be loaded with the store\'s code and message', async () => {
    const file = path.join(tempDir(), 'bad.jsonl')
    fs.writeFileSync(file, 'not a header\n')
    const e = await rejection(binding.readJsonlLog(file, false))
    expect(e).toBeInstanceOf(Error)
    expect(e?.code).toBe('CORRUPT_LOG')
  })

  it('resolves a log it reads to a report of the repair plan', async () => {
    const file = path.join(tempDir(), 'good.jsonl')
    fs.writeFileSync(file, new index.Session('good', asEvents(turns(1))).toJsonl())
    const plan = JSON.parse((await binding.readJsonlLog(file, false)).planJson())
    expect(plan).toMatchObject({ torn: false, tornRecord: null, closers: [], written: false })
    expect(plan.header.id).toBe('good')
  })

  it('rejects a SQLite listing or read with the core\'s code, and lists the headers alone', async () => {
    const dir = tempDir()
    const text = path.join(dir, 'text.db')
    fs.writeFileSync(text, 'not a database, not at all: more than the 100 bytes of a SQLite header '.repeat(3))
    const e = await rejection(binding.listSqliteSessions(text))
    expect(e).toBeInstanceOf(Error)
    expect(e?.code).toBe('SQLITE')

    const db = path.join(dir, 'sessions.db')
    const store = new index.SqliteSessionStore({ path: db })
    await store.flush(new index.Session('one', asEvents(turns(1))))
    await store.close()
    const headers = JSON.parse(await binding.listSqliteSessions(db))
    expect(headers.map((h: { id: string }) => h.id)).toEqual(['one'])
    const missing = await rejection(binding.readSqliteLog(db, 'two'))
    expect(missing?.code).toBe('SESSION_NOT_FOUND')
    expect(missing?.message).toBe('session "two" not found')
  })
})
