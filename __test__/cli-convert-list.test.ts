// dsh-session convert / list, as a subprocess: JSONL -> SQLite -> JSONL
// gives identical events, and list reads the stored headers of both stores.

import * as fs from 'node:fs'
import * as path from 'node:path'
import { describe, expect, it } from 'vitest'
import { cli, expectOneLineError, logFixture, manifest, pkg, readJsonl, ROOT, stores, tempDir } from './cli-helpers.js'

const EXAMPLE = path.join(ROOT, 'examples', 'session.jsonl')

/** The events and header a store load of `file` returns (the kept events and the closers). */
function loaded(file: string): { header: Record<string, unknown>; events: unknown[] } {
  const { header, events } = readJsonl(file)
  return { header, events: [...events, ...pkg.interruptedTurnClosers(events as never)] }
}

describe.concurrent('dsh-session convert', () => {
  const names = [
    ...manifest.logs.filter((n) => !n.startsWith('real/')),
    'real/advanced-toolchain-session',
    'real/subagent-mixed-session',
    'real/fs-edit-session',
    'real/todo-plan-session',
  ]
  const sources = [...names.map((n) => logFixture(n).file), EXAMPLE]
  for (const source of sources) {
    it(`${path.basename(source)}: JSONL -> SQLite -> JSONL keeps every event`, async () => {
      const dir = tempDir('convert')
      const db = path.join(dir, 'sessions.db')
      const back = path.join(dir, 'back.jsonl')
      const want = loaded(source)
      const id = want.header.id as string
      const toDb = await cli(['convert', source, `sqlite:${db}`])
      expect(toDb.stderr).toBe('')
      expect(toDb.code).toBe(0)
      expect(toDb.stdout).toContain(`sqlite:${db}#${id}`)
      const fromDb = await cli(['convert', `sqlite:${db}#${id}`, back])
      expect(fromDb.code).toBe(0)
      const got = readJsonl(back)
      expect(got.header).toEqual(want.header)
      expect(got.events).toEqual(want.events)
      // The database holds the same session, as the SQLite store loads it.
      const store = new stores.SqliteSessionStore({ path: db })
      const stored = await store.load(id)
      await store.close()
      expect(stored.events).toEqual(want.events)
      expect((await cli(['check', back])).code).toBe(0)
    })
  }

  it('copies the load repair of an interrupted, torn log and leaves the source alone', async () => {
    const source = path.join(ROOT, 'examples', 'interrupted.jsonl')
    const before = fs.readFileSync(source)
    const out = path.join(tempDir('convert-torn'), 'copy.jsonl')
    const run = await cli(['convert', source, out])
    expect(run.code).toBe(0)
    expect(run.stdout).toContain('the copy includes the load repair: torn tail dropped')
    expect(fs.readFileSync(source).equals(before)).toBe(true)
    expect((await cli(['check', out])).code).toBe(0)
    expect(JSON.parse((await cli(['derive', out])).stdout)).toEqual(JSON.parse((await cli(['derive', source, '--repaired'])).stdout))
  })

  it('never overwrites, and keeps the session id', async () => {
    const dir = tempDir('convert-refuse')
    const out = path.join(dir, 'x.jsonl')
    fs.writeFileSync(out, 'keep me')
    expectOneLineError(await cli(['convert', EXAMPLE, out]), out, 'already exists')
    expect(fs.readFileSync(out, 'utf8')).toBe('keep me')
    const db = path.join(dir, 'sessions.db')
    expectOneLineError(await cli(['convert', EXAMPLE, `sqlite:${db}#other-id`]), 'not "other-id"')
    expect((await cli(['convert', EXAMPLE, `sqlite:${db}`])).code).toBe(0)
    expectOneLineError(await cli(['convert', EXAMPLE, `sqlite:${db}`]), 'already has a persisted log')
    expectOneLineError(await cli(['convert', EXAMPLE, path.join(dir, 'missing', 'y.jsonl')]), 'no such directory')
    expect(fs.readdirSync(dir).filter((f) => f.endsWith('.tmp'))).toEqual([])
  })
})

describe('dsh-session list', () => {
  it('lists a JSONL store root and the .jsonl files in it', async () => {
    const root = tempDir('list-jsonl')
    const store = new stores.JsonlSessionStore({ root })
    for (const [id, cwd] of [['alpha', '/home/dev/a'], ['beta', undefined]] as const) {
      await store.create({ version: 0, id, createdAt: id === 'alpha' ? 2000 : 1000, ...(cwd ? { cwd } : {}) } as never)
      await store.append(id, [{ type: 'turn/start', seq: 0, time: 1, data: { turn: 1 } }] as never)
    }
    await store.create({ version: 0, id: 'never-appended', createdAt: 3000 } as never)
    await store.close()
    fs.copyFileSync(EXAMPLE, path.join(root, 'example.jsonl'))
    const run = await cli(['list', root])
    expect(run.code).toBe(0)
    expect(run.stdout).toContain(`${root}: 3 sessions`)
    expect(run.stdout).not.toContain('never-appended')
    const json = JSON.parse((await cli(['list', root, '--json'])).stdout) as { id: string; address: string; cwd?: string }[]
    expect(json.map((h) => h.id)).toEqual(['beta', 'alpha', readJsonl(EXAMPLE).header.id])
    expect(json[1]).toMatchObject({ id: 'alpha', cwd: '/home/dev/a', version: 0, createdAt: 2000 })
    expect(json[1]!.address).toMatch(/cwd-[0-9a-f]{12}[/\\]alpha\.jsonl$/)
  })

  it('lists a SQLite database', async () => {
    const db = path.join(tempDir('list-sqlite'), 'sessions.db')
    expect((await cli(['convert', EXAMPLE, `sqlite:${db}`])).code).toBe(0)
    expect((await cli(['convert', logFixture('agent-basic').file, `sqlite:${db}`])).code).toBe(0)
    const json = JSON.parse((await cli(['list', `sqlite:${db}`, '--json'])).stdout) as { id: string; address: string }[]
    expect(json.map((h) => h.address).sort()).toEqual([`sqlite:${db}#agent-basic`, `sqlite:${db}#${readJsonl(EXAMPLE).header.id}`].sort())
    const run = await cli(['list', `sqlite:${db}`])
    expect(run.stdout).toContain('2 sessions')
  })

  it('names a missing or wrong store', async () => {
    const dir = tempDir('list-bad')
    expectOneLineError(await cli(['list', path.join(dir, 'nope')]), 'nope: no such directory')
    expectOneLineError(await cli(['list', EXAMPLE]), 'not a directory')
    expectOneLineError(await cli(['list', `sqlite:${path.join(dir, 'none.db')}`]), 'none.db: no such file')
    expect(fs.existsSync(path.join(dir, 'none.db'))).toBe(false)
    expectOneLineError(await cli(['list', `sqlite:${path.join(dir, 'x.db')}#id`]), 'list takes a database')
    expect((await cli(['list', dir])).stdout).toContain('no stored sessions')
    // Listing reads only: a database no store has written stays untouched.
    const empty = path.join(dir, 'empty.db')
    fs.writeFileSync(empty, '')
    expect((await cli(['list', `sqlite:${empty}`])).stdout).toContain('no stored sessions')
    expect(fs.statSync(empty).size).toBe(0)
  })
})
