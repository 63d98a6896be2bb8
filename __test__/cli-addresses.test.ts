// dsh-session addresses: any file name (the content tells JSONL from SQLite),
// a database with or without the session named, and - for standard input.

import * as fs from 'node:fs'
import { createRequire } from 'node:module'
import * as path from 'node:path'
import { describe, expect, it } from 'vitest'
import { cli, expectOneLineError, expectUsageError, FIXTURES, readJsonl, ROOT, tempDir } from './cli-helpers.js'

const EXAMPLE = path.join(ROOT, 'examples', 'session.jsonl')
const INTERRUPTED = path.join(ROOT, 'examples', 'interrupted.jsonl')
const exampleId = readJsonl(EXAMPLE).header.id as string
const nodeRequire = createRequire(__filename)

describe('a PostgreSQL address', () => {
  it('without ?schema names the schema PostgresSessionStore defaults to (one default, public)', () => {
    const { splitPostgres } = nodeRequire('../lib/cli/address.js') as { splitPostgres(t: string): { schema: string; id?: string } }
    const { POSTGRES_DEFAULT_SCHEMA } = nodeRequire('../lib/stores.js') as { POSTGRES_DEFAULT_SCHEMA: string }
    expect(POSTGRES_DEFAULT_SCHEMA).toBe('public')
    expect(splitPostgres('postgres://u@h/db#s')).toMatchObject({ schema: POSTGRES_DEFAULT_SCHEMA, id: 's' })
    expect(splitPostgres('postgres://u@h/db?schema=other#s').schema).toBe('other')
  })
})

describe.concurrent('dsh-session addresses', () => {
  it('reads a JSONL log under any name, the same as under .jsonl', async () => {
    const dir = tempDir('names')
    const reference = await cli(['derive', EXAMPLE])
    for (const name of ['session.log', 'SESSION.JSONL', 'no-extension', 'events.db.bak']) {
      const file = path.join(dir, name)
      fs.copyFileSync(EXAMPLE, file)
      const run = await cli(['derive', file])
      expect(run.code).toBe(0)
      expect(run.stdout).toBe(reference.stdout)
      expect((await cli(['check', file])).stdout).toContain(`${file}: ok: loads as stored`)
    }
  })

  it('reads a SQLite database by its first bytes, whatever its name, with its one session', async () => {
    const dir = tempDir('sqlite-names')
    const db = path.join(dir, 'backup.data')
    expect((await cli(['convert', EXAMPLE, `sqlite:${db}`])).code).toBe(0)
    expect(fs.readFileSync(db).subarray(0, 16).toString('latin1')).toBe('SQLite format 3\0')
    const run = await cli(['check', db])
    expect(run.code).toBe(0)
    expect(run.stdout).toContain(`ok: loads as stored (session ${JSON.stringify(exampleId)}`)
    // <database>#<id> names one session; with two sessions the id is needed.
    expect((await cli(['convert', path.join(FIXTURES, 'logs', 'agent-basic.jsonl'), db])).code).toBe(0)
    expect((await cli(['check', `${db}#agent-basic`])).code).toBe(0)
    expectOneLineError(await cli(['check', db]), 'holds 2 sessions', `name one: sqlite:${db}#<session-id>`)
  })

  it('reads - from standard input, JSONL or SQLite', async () => {
    const input = fs.readFileSync(INTERRUPTED)
    const check = await cli(['check', '-'], { input })
    expect(check.code).toBe(2)
    expect(check.stdout).toMatch(/^stdin: loads only after repair/)
    const derive = await cli(['derive', '-', '--repaired'], { input })
    expect(derive.stdout).toBe((await cli(['derive', INTERRUPTED, '--repaired'])).stdout)
    const db = path.join(tempDir('stdin-sqlite'), 's.db')
    expect((await cli(['convert', EXAMPLE, db])).code).toBe(0)
    const fromDb = await cli(['surface', '-', '--json'], { input: fs.readFileSync(db) })
    expect(fromDb.code).toBe(0)
    expect(JSON.parse(fromDb.stdout)).toEqual(JSON.parse((await cli(['surface', EXAMPLE, '--json'])).stdout))
  })

  it('converts standard input to a file and a log to standard output', async () => {
    const dir = tempDir('stdio-convert')
    const out = path.join(dir, 'copy.log')
    const run = await cli(['convert', '-', out], { input: fs.readFileSync(EXAMPLE) })
    expect(run.code).toBe(0)
    expect(readJsonl(out)).toEqual(readJsonl(EXAMPLE))
    const piped = await cli(['convert', EXAMPLE, '-'])
    expect(piped.code).toBe(0)
    expect(piped.stdout).toBe(fs.readFileSync(out, 'utf8'))
  })

  it('names a new file *.db, *.sqlite or *.sqlite3 a SQLite database, any other a JSONL file', async () => {
    const dir = tempDir('convert-kind')
    for (const name of ['a.db', 'b.sqlite', 'c.sqlite3']) {
      expect((await cli(['convert', EXAMPLE, path.join(dir, name)])).code).toBe(0)
      expect(fs.readFileSync(path.join(dir, name)).subarray(0, 15).toString('latin1')).toBe('SQLite format 3')
    }
    expect((await cli(['convert', EXAMPLE, path.join(dir, 'd.txt')])).code).toBe(0)
    expect(readJsonl(path.join(dir, 'd.txt')).header.id).toBe(exampleId)
  })

  it('refuses to repair standard input', async () => {
    expectUsageError(await cli(['repair', '-'], { input: fs.readFileSync(INTERRUPTED) }), '-: this command needs a file')
  })
})
