// dsh-session says what happened (issue 20): one numbering for a defect (the
// file's lines, with the event's seq), plain words for old logs, the torn
// record and its cause, "not found" for a missing session, read commands
// that create nothing beside a database, "in use" for a session a store is
// writing, a usage error's own exit status, IO for file-system errors, and
// the standard-input spool removed on signals. One test per item.

import { spawn } from 'node:child_process'
import * as fs from 'node:fs'
import * as path from 'node:path'
import { describe, expect, it } from 'vitest'
import { BIN, cli, FIXTURES, pkg, ROOT, stores, tempDir } from './cli-helpers.js'
import { NOBODY, nobodyCannotRun } from './users.js'

const LOAD = path.join(FIXTURES, 'load')
const OLD = path.join(FIXTURES, 'real', 'acp-snapshot-record-suite-rec-child-session.jsonl')
const INTERRUPTED = path.join(ROOT, 'examples', 'interrupted.jsonl')

/** The one JSON error line of a --json run. */
function jsonError(stderr: string): Record<string, unknown> {
  return (JSON.parse(stderr.trim().split('\n').pop()!) as { error: Record<string, unknown> }).error
}

type Live = InstanceType<typeof pkg.Session>
const turnStart = (s: Live, turn: number) => s.append('turn/start', { turn, trigger: { kind: 'message', source: { kind: 'user' } } })
const userMessage = (s: Live, text: string) => s.append('user/message', { content: [{ type: 'text', text }], source: { kind: 'user' } }, { surfaceOp: 'append' })

describe.concurrent('dsh-session reports', () => {
  it('names a defect by its file line and the event seq, as fromJsonl counts lines', async () => {
    const file = path.join(LOAD, 'corrupt-committed.jsonl')
    // Line 4 of the file (the header is line 1) holds seq 2, the third event.
    expect(fs.readFileSync(file, 'utf8').split('\n')[3]).not.toMatch(/^\{.*\}$/)
    const check = await cli(['check', file])
    expect(check.stderr).toBe(`dsh-session: ${file}: corrupt session log: unparsable committed event at line 4 (seq 2)\n`)
    const inspect = await cli(['inspect', file, '--json'])
    expect(JSON.parse(inspect.stdout)).toMatchObject({ complete: false, events: 2, error: { line: 4, seq: 2 } })
    expect(jsonError(inspect.stderr)).toMatchObject({ code: 'CORRUPT_LOG', line: 4, seq: 2 })
    // The API's own reader names the same line.
    let line: number | undefined
    try {
      pkg.Session.fromJsonl(fs.readFileSync(file))
    } catch (error) {
      line = (error as { line?: number }).line
    }
    expect(line).toBe(4)
    // A seq gap and a rule that names a seq: the same numbering.
    const gap = await cli(['check', path.join(LOAD, 'seq-gap-committed.jsonl')])
    expect(gap.stderr).toContain('seq gap in committed region at line 6 (expected seq 4, got 5)')
    const legacy = await cli(['check', path.join(LOAD, 'legacy-header-delta.jsonl')])
    expect(legacy.stderr).toContain('unsupported legacy request/header-delta event at line 6 (seq 4)')
  })

  it('calls a log from before provider routing old, in plain words, not corrupt', async () => {
    for (const command of ['check', 'inspect', 'derive']) {
      const run = await cli([command, OLD, '--json'])
      expect(run.code).toBe(1)
      const error = jsonError(run.stderr)
      expect(error).toMatchObject({ code: 'OLD_LOG', line: 2, seq: 0 })
      expect(error.message).toBe(`${OLD}: an old log, written before sessions recorded the model's provider: its request/header at line 2 (seq 0) names no provider/model; this version reads only logs that do (nothing in the file is damaged)`)
      expect(error.message).not.toMatch(/corrupt|seed|index/)
    }
  })

  it('reports a torn tail with its cause and the torn record', async () => {
    const cut = await cli(['check', INTERRUPTED])
    expect(cut.code).toBe(2)
    expect(cut.stdout).toContain('torn tail dropped: 1 record after seq 404, 57 B; line 407 (seq 405) has no newline at its end (a write cut short): {"type":"tool/result","seq":405,')
    const gap = await cli(['check', path.join(LOAD, 'seq-gap-tail.jsonl'), '--json'])
    const verdict = JSON.parse(gap.stdout) as { repair: string[] }
    expect(verdict.repair[0]).toMatch(/^torn tail dropped: \d+ records? after seq 81, .*; line 84 breaks the seq order \(expected seq 82, got \d+\): \{"type":/)
    const inspect = await cli(['inspect', INTERRUPTED, '--json'])
    expect(JSON.parse(inspect.stdout).repair.tornRecord).toMatchObject({ line: 407, seq: 405, cause: 'has no newline at its end (a write cut short)' })
  })

  it('says not found, and no report, for a session a SQLite database does not hold', async () => {
    const dir = tempDir('report-missing')
    const db = path.join(dir, 's.db')
    expect((await cli(['convert', INTERRUPTED, db])).code).toBe(0)
    const run = await cli(['inspect', `sqlite:${db}#nope`])
    expect(run.code).toBe(1)
    expect(run.stdout).toBe('')
    expect(run.stderr).toBe(`dsh-session: sqlite:${db}#nope: session "nope" not found (it holds "b7e2c4d1-5f3a-4c8e-9d21-acme-orders-fix")\n`)
    expect(jsonError((await cli(['inspect', `sqlite:${db}#nope`, '--json'])).stderr).code).toBe('SESSION_NOT_FOUND')
  })

  it('read commands create nothing beside a WAL database, idle or with a writer', async () => {
    const dir = tempDir('report-wal')
    const db = path.join(dir, 's.db')
    const store = new stores.SqliteSessionStore({ path: db })
    const session = new pkg.Session('wal')
    turnStart(session, 1)
    userMessage(session, 'hi')
    session.append('turn/end', { turn: 1, reason: { kind: 'completed' } })
    await store.create(session.header)
    await store.flush(session)
    await store.close()
    const before = fs.readdirSync(dir).sort()
    expect(before).toEqual(['s.db', 's.db.locks'])
    const head = fs.readFileSync(db).subarray(18, 20)
    expect([...head]).toEqual([2, 2]) // WAL mode
    const reads = [['inspect', db], ['check', db], ['list', db], ['list', dir], ['surface', db], ['derive', db], ['inspect', `sqlite:${db}#wal`], ['check', `${db}#wal`]]
    for (const args of reads) {
      const run = await cli(args)
      expect(run.code, `${args.join(' ')}: ${run.stderr}`).toBe(0)
      expect(fs.readdirSync(dir).sort(), args.join(' ')).toEqual(before)
    }
    // With a writer that has the database open: read as a reader among
    // writers, and when the writer closes, nothing is left.
    const writer = new stores.SqliteSessionStore({ path: db })
    const live = await writer.open('wal')
    turnStart(live, 2)
    await writer.flush(live)
    const run = await cli(['check', db, '--json'])
    expect(JSON.parse(run.stdout)).toMatchObject({ preserved: 4 })
    await writer.close()
    expect(fs.readdirSync(dir).sort()).toEqual(before)
  })

  it('says in use, not repair, for a session whose lease a store holds', async () => {
    const root = tempDir('report-lease')
    for (const kind of ['jsonl', 'sqlite'] as const) {
      const store = kind === 'jsonl' ? new stores.JsonlSessionStore({ root }) : new stores.SqliteSessionStore({ path: path.join(root, 's.db') })
      const session = new pkg.Session(`busy-${kind}`)
      turnStart(session, 1)
      userMessage(session, 'still typing')
      await store.create(session.header)
      await store.flush(session)
      const log = kind === 'jsonl' ? (store as InstanceType<typeof stores.JsonlSessionStore>).locate(session.header).path : `sqlite:${path.join(root, 's.db')}#busy-${kind}`
      const held = await cli(['check', log])
      expect(held.code, held.stderr).toBe(3)
      expect(held.stdout).toContain(`in use: process ${process.pid} holds the write lease of session "busy-${kind}"`)
      expect(held.stdout).not.toContain('run: dsh-session repair')
      expect(JSON.parse((await cli(['check', log, '--json'])).stdout)).toMatchObject({ status: 'in-use', exitCode: 3, inUse: `process ${process.pid}` })
      expect((await cli(['inspect', log])).stdout).toMatch(/^repair {5}not now: in use/m)
      await store.close()
      // Its writer gone, the open turn is an interrupted one.
      const free = await cli(['check', log])
      expect(free.code).toBe(2)
      expect(free.stdout).toContain('run: dsh-session repair')
    }
  })

  it('gives usage errors their own exit status, 64', async () => {
    for (const args of [['frobnicate'], ['check'], ['check', INTERRUPTED, '--bogus'], []]) {
      const run = await cli(args)
      expect(run.code, args.join(' ')).toBe(64)
    }
    const json = await cli(['check', '--json'])
    expect(json.code).toBe(64)
    expect(jsonError(json.stderr).code).toBe('USAGE')
    // Not a usage error: a log that cannot be loaded stays 1.
    expect((await cli(['check', OLD])).code).toBe(1)
  })

  // As root every file is readable: the commands run as nobody then, who
  // must be able to read the checkout (not so in a 0700 folder: skipped).
  const asRoot = process.getuid?.() === 0
  const cannot = asRoot ? nobodyCannotRun() : undefined
  it.skipIf(cannot !== undefined)(`reports a file it may not read as IO, in plain words${cannot === undefined ? '' : ` (${cannot})`}`, async () => {
    const dir = tempDir('report-eacces')
    fs.chmodSync(dir, 0o755)
    const file = path.join(dir, 'secret.jsonl')
    fs.copyFileSync(INTERRUPTED, file)
    fs.chmodSync(file, 0o600)
    if (!asRoot) fs.chmodSync(file, 0o000)
    const runAs = asRoot ? NOBODY : {}
    for (const command of ['inspect', 'check']) {
      const run = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
        const child = spawn(process.execPath, [BIN, command, file, '--json'], { cwd: ROOT, ...runAs, stdio: ['ignore', 'ignore', 'pipe'] })
        let stderr = ''
        child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
        child.on('close', (code) => resolve({ code, stderr }))
      })
      expect(run.code).toBe(1)
      expect(jsonError(run.stderr)).toMatchObject({ code: 'IO', path: file, errno: 'EACCES', message: `cannot open ${file}: permission denied (EACCES)` })
    }
  })

  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    it(`inspect - removes its standard-input spool on ${signal}`, async () => {
      const tmp = tempDir(`report-spool-${signal}`)
      const child = spawn(process.execPath, [BIN, 'inspect', '-'], { cwd: ROOT, env: { ...process.env, TMPDIR: tmp }, stdio: ['pipe', 'ignore', 'pipe'] })
      const closed = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('close', (code, sig) => resolve({ code, signal: sig })))
      // Half a log, and standard input left open: the spool exists while it is read.
      child.stdin.write(fs.readFileSync(INTERRUPTED).subarray(0, 4096))
      const deadline = Date.now() + 20_000
      while (!fs.readdirSync(tmp).some((f) => f.startsWith('dsh-session-stdin-'))) {
        if (Date.now() > deadline) throw new Error('no spool appeared')
        await new Promise((r) => setTimeout(r, 20))
      }
      child.kill(signal)
      const end = await closed
      expect(end.signal).toBe(signal)
      expect(fs.readdirSync(tmp)).toEqual([])
    })
  }
})
