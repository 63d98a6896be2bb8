// dsh-session check / repair, as a subprocess, over the load fixtures
// (fixtures/load/*.jsonl + .expect.json): check exits 0 / 2 / 1 with the exact
// reason and writes nothing; repair leaves exactly what a store load leaves.

import * as fs from 'node:fs'
import * as path from 'node:path'
import { describe, expect, it } from 'vitest'
import { cli, cliReason, expectOneLineError, FIXTURES, logFixture, manifest, readJsonl, stores, tempDir, type AnyEvent } from './cli-helpers.js'

type Expect =
  | { ok: true; header: Record<string, unknown>; preservedEvents: number; committedBytes: number; closers: AnyEvent[] }
  | { ok: false; error: string }

const LOAD = path.join(FIXTURES, 'load')

function loadCase(name: string): { file: string; bytes: Buffer; expect: Expect } {
  const file = path.join(LOAD, `${name}.jsonl`)
  return {
    file,
    bytes: fs.readFileSync(file),
    expect: JSON.parse(fs.readFileSync(path.join(LOAD, `${name}.expect.json`), 'utf8')) as Expect,
  }
}

/** What the JSONL store leaves on disk after loading `bytes` (or its error). */
async function storeLoad(name: string, bytes: Buffer): Promise<{ bytes: Buffer } | { error: string }> {
  let id = name
  try {
    const first = JSON.parse(bytes.toString('utf8').split('\n')[0]!) as { type?: string; id?: unknown }
    if (first.type === 'session' && typeof first.id === 'string') id = first.id
  } catch {
    // no header: placed under the case's name
  }
  const store = new stores.JsonlSessionStore({ root: tempDir(`store-${name}`) })
  const file = store.locate({ version: 0, id, createdAt: 0 } as never).path
  fs.mkdirSync(path.dirname(file), { recursive: true })
  fs.writeFileSync(file, bytes)
  try {
    await store.load(id)
    return { bytes: fs.readFileSync(file) }
  } catch (error) {
    return { error: (error as Error).message }
  } finally {
    await store.close()
  }
}

describe.concurrent('dsh-session check', () => {
  it('covers every load case of the manifest', () => {
    expect(manifest.load.length).toBeGreaterThan(10)
  })

  for (const name of manifest.load) {
    it(`${name}: exit status and reason as the fixture expects, nothing written`, async () => {
      const { file, bytes, expect: e } = loadCase(name)
      const run = await cli(['check', file])
      if (!e.ok) {
        expectOneLineError(run, file, cliReason(e.error))
        expect(run.stderr).toBe(`dsh-session: ${file}: ${cliReason(e.error)}\n`)
      } else {
        const tornTail = e.committedBytes < bytes.length
        expect(run.code).toBe(tornTail || e.closers.length > 0 ? 2 : 0)
        expect(run.stderr).toBe('')
        if (run.code === 0) expect(run.stdout).toMatch(/: ok: loads as stored/)
        else expect(run.stdout).toMatch(/loads only after repair/)
        if (tornTail) expect(run.stdout).toContain('torn tail dropped')
        if (e.closers.length > 0) expect(run.stdout).toContain(`interrupted turn ${(e.closers.at(-1)!.data as { turn: number }).turn} closed`)
      }
      expect(fs.readFileSync(file).equals(bytes)).toBe(true)
    })
  }

  it('--json gives the status, the exit code and the plan', async () => {
    const { file } = loadCase('interrupted-torn')
    const run = await cli(['check', file, '--json'])
    expect(run.code).toBe(2)
    const out = JSON.parse(run.stdout)
    expect(out).toMatchObject({ status: 'repair', exitCode: 2, preserved: 81, torn: true, closers: 3, events: 84 })
    const bad = await cli(['check', loadCase('corrupt-committed').file, '--json'])
    expect(bad.code).toBe(1)
    expect(JSON.parse(bad.stdout)).toMatchObject({ status: 'error', code: 'CORRUPT_LOG' })
  })

  it('--invariants fails a log that breaks SPEC 9, naming the seq', async () => {
    const { file } = logFixture('trim-single')
    expect((await cli(['check', file])).code).toBe(0)
    const run = await cli(['check', file, '--invariants'])
    expectOneLineError(run, file, 'invariant violated: tool/result names turn 1/step 1 but open is turn 6/step null', '(at seq 87)')
    const ok = await cli(['check', logFixture('compaction-nested').file, '--invariants'])
    expect(ok.code).toBe(0)
    expect(ok.stdout).toContain('invariants ok')
    // An interrupted log is checked as a load returns it (closers included).
    expect((await cli(['check', logFixture('interrupted-parallel').file, '--invariants'])).code).toBe(2)
  })
})

describe.concurrent('dsh-session repair (JSONL)', () => {
  for (const name of manifest.load) {
    it(`${name}: leaves exactly what a store load leaves`, async () => {
      const { bytes } = loadCase(name)
      const copy = path.join(tempDir(`repair-${name}`), `${name}.jsonl`)
      fs.writeFileSync(copy, bytes)
      const dry = await cli(['repair', copy, '--dry-run'])
      expect(fs.readFileSync(copy).equals(bytes)).toBe(true)
      const run = await cli(['repair', copy])
      const store = await storeLoad(name, bytes)
      if ('error' in store) {
        expectOneLineError(run, copy, cliReason(store.error))
        expectOneLineError(dry, copy, cliReason(store.error))
        expect(fs.readFileSync(copy).equals(bytes)).toBe(true)
        return
      }
      expect(run.code).toBe(0)
      expect(dry.code).toBe(0)
      expect(fs.readFileSync(copy).toString('utf8')).toBe(store.bytes.toString('utf8'))
      if (store.bytes.equals(bytes)) {
        expect(run.stdout).toContain('nothing to repair')
      } else {
        expect(dry.stdout).toContain('would repair (dry run, nothing written)')
        expect(run.stdout).toContain('repaired:')
        // Repaired logs check clean, and a second repair finds nothing.
        expect((await cli(['check', copy])).code).toBe(0)
        expect((await cli(['repair', copy])).stdout).toContain('nothing to repair')
      }
    })
  }

  it('--json says what changed', async () => {
    const copy = path.join(tempDir('repair-json'), 'x.jsonl')
    fs.copyFileSync(path.join(LOAD, 'interrupted-torn.jsonl'), copy)
    const run = await cli(['repair', copy, '--json'])
    const out = JSON.parse(run.stdout)
    expect(out).toMatchObject({ needed: true, written: true, dryRun: false, preserved: 81, torn: true, committedBytes: 12614 })
    expect(out.closers.map((c: AnyEvent) => c.type)).toEqual(['tool/result', 'step/end', 'turn/end'])
  })
})

describe('dsh-session check / repair (SQLite)', () => {
  it('checks read-only and repairs as the SQLite store loads', async () => {
    const dir = tempDir('sqlite-repair')
    const db = path.join(dir, 'sessions.db')
    const { header, events } = readJsonl(path.join(LOAD, 'interrupted-turn.jsonl'))
    const expectFile = JSON.parse(fs.readFileSync(path.join(LOAD, 'interrupted-turn.expect.json'), 'utf8'))
    const id = header.id as string
    const store = new stores.SqliteSessionStore({ path: db })
    await store.create(header as never)
    await store.append(id, events as never)
    await store.close()
    const address = `sqlite:${db}#${id}`

    const check = await cli(['check', address])
    expect(check.code).toBe(2)
    expect(check.stdout).toContain('interrupted turn 6 closed: tool/result call-6-1, step/end, turn/end')
    expect((await cli(['repair', address, '--dry-run'])).stdout).toContain('would repair')
    expect((await cli(['check', address])).code).toBe(2)

    const repair = await cli(['repair', address])
    expect(repair.code).toBe(0)
    expect(repair.stdout).toContain('repaired:')
    expect((await cli(['check', address])).code).toBe(0)
    const after = new stores.SqliteSessionStore({ path: db })
    const loaded = await after.load(id)
    await after.close()
    expect(loaded.events).toEqual([...events, ...expectFile.closers])
    expect(JSON.parse((await cli(['derive', address])).stdout)).toEqual(
      JSON.parse((await cli(['derive', path.join(LOAD, 'interrupted-turn.jsonl'), '--repaired'])).stdout),
    )
  })

  it('names a session the database does not hold', async () => {
    const dir = tempDir('sqlite-missing')
    const db = path.join(dir, 'sessions.db')
    const store = new stores.SqliteSessionStore({ path: db })
    await store.create({ version: 0, id: 'a', createdAt: 1 } as never)
    await store.append('a', [{ type: 'turn/start', seq: 0, time: 1, data: { turn: 1 } }] as never)
    await store.close()
    expectOneLineError(await cli(['check', `sqlite:${db}#nope`]), `sqlite:${db}#nope`, 'session "nope" not found')
  })
})
