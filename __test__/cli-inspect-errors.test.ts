// dsh-session inspect on the bundled example and on a 100k-event log, and
// how every command reports a missing file, a bad address or a corrupt log:
// one line naming it, never a stack trace.

import * as fs from 'node:fs'
import * as path from 'node:path'
import { pathToFileURL } from 'node:url'
import { beforeAll, describe, expect, it } from 'vitest'
import { cli, expectOneLineError, expectUsageError, FIXTURES, logFixture, pkg, readJsonl, ROOT, tempDir } from './cli-helpers.js'

const EXAMPLE = path.join(ROOT, 'examples', 'session.jsonl')
const INTERRUPTED = path.join(ROOT, 'examples', 'interrupted.jsonl')

/** Every line of a readable report fits a terminal. */
function expectReadable(text: string, maxLines: number): void {
  const lines = text.trimEnd().split('\n')
  expect(lines.length).toBeLessThanOrEqual(maxLines)
  for (const line of lines) expect(line.length, line).toBeLessThanOrEqual(160)
}

describe('dsh-session inspect', () => {
  it('reports the bundled example (npm start)', async () => {
    const run = await cli(['inspect', 'examples/session.jsonl'])
    expect(run.stderr).toBe('')
    expect(run.code).toBe(0)
    for (const section of ['session ', 'events by type', 'turns ', 'steps ', 'tools ', 'models ', 'surface ', 'messages ', 'headers ', 'repair ', 'invariants ']) {
      expect(run.stdout).toContain(section)
    }
    expect(run.stdout).toMatch(/surface +29 nodes, 1 replacement/)
    expect(run.stdout).toMatch(/seq \d+ user\/message replaced nodes 1\.\.\d+: shadowed 26 nodes/)
    expect(run.stdout).toContain('model deepseek-chat → deepseek-reasoner')
    expect(run.stdout).toContain('repair     not needed')
    expect(run.stdout).toContain('invariants ok')
    expectReadable(run.stdout, 70)
    const { events } = readJsonl(EXAMPLE)
    expect(events.length).toBeGreaterThanOrEqual(300)
    expect(events.length).toBeLessThanOrEqual(600)
    expect(() => pkg.checkSessionInvariants(events as never)).not.toThrow()
    const pkgJson = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'))
    expect(pkgJson.scripts.start).toBe('node bin/dsh-session.js inspect examples/session.jsonl')
    expect(pkgJson.bin).toEqual({ 'dsh-session': 'bin/dsh-session.js' })
  })

  it('--json holds the same facts', async () => {
    const run = await cli(['inspect', EXAMPLE, '--json'])
    const out = JSON.parse(run.stdout)
    const { header, events } = readJsonl(EXAMPLE)
    expect(out.header).toEqual(header)
    expect(out.events).toBe(events.length)
    expect(out.surface.nodes).toBe(29)
    expect(out.surface.replacements[0].shadowedSeqs).toHaveLength(26)
    expect(out.messages.count).toBe(new pkg.Session('x', events as never).deriveMessages().length)
    expect(out.repair.needed).toBe(false)
    expect(out.invariants).toEqual({ ok: true })
    expect(out.requestHeaders.map((h: { reason: string }) => h.reason)).toEqual(['initial', 'change'])
  })

  it('says what a load would repair and what breaks the checks', async () => {
    const run = await cli(['inspect', INTERRUPTED])
    expect(run.code).toBe(0)
    expect(run.stdout).toContain('turn 5 still open at the end')
    expect(run.stdout).toMatch(/repair +needed/)
    expect(run.stdout).toContain('torn tail dropped: 1 record after seq 404')
    expect(run.stdout).toMatch(/interrupted turn 5 closed: tool\/result call_\w+, step\/end, turn\/end/)
    const trim = await cli(['inspect', logFixture('trim-single').file])
    expect(trim.stdout).toContain('invariants invariant violated: tool/result names turn 1/step 1 but open is turn 6/step null (at seq 87)')
    expect((await cli(['inspect', path.join(FIXTURES, 'logs', 'vocabulary.jsonl')])).code).toBe(0)
  })

  describe('on a 100k-event log', () => {
    let file = ''
    beforeAll(async () => {
      const workload = (await import(pathToFileURL(path.resolve(ROOT, 'test-data/bench/workload.mjs')).href)) as {
        generateOps: (n: number) => { ops: { type: string; data: unknown; opts?: unknown }[] }
      }
      const { ops } = workload.generateOps(100_000)
      const s = new pkg.Session('big', [], { version: 0, id: pkg.SessionId('big'), createdAt: 1_760_000_000_000 })
      const append = s.append as unknown as (...a: unknown[]) => unknown
      for (const op of ops) (op.opts === undefined ? append.call(s, op.type, op.data) : append.call(s, op.type, op.data, op.opts))
      file = path.join(tempDir('big'), 'big.jsonl')
      fs.writeFileSync(file, s.toJsonl())
    })

    it('stays readable and quick', async () => {
      const started = Date.now()
      const run = await cli(['inspect', file])
      const ms = Date.now() - started
      expect(run.code).toBe(0)
      expect(run.stderr).toBe('') // no progress bar when stderr is not a terminal
      expect(run.stdout).toContain('events     100,000 (seq 0..99999)')
      expect(run.stdout).toMatch(/what changed: /)
      expectReadable(run.stdout, 70)
      expect(ms).toBeLessThan(20_000)
    })
  })
})

describe.concurrent('errors: one line naming the log, never a stack trace', () => {
  const dir = tempDir('errors')
  const missing = path.join(dir, 'missing.jsonl')
  const corrupt = path.join(FIXTURES, 'load', 'corrupt-committed.jsonl')
  const commands = [['inspect'], ['check'], ['derive'], ['surface'], ['repair'], ['convert', '__SRC__', path.join(dir, 'out.jsonl')]]

  for (const c of commands) {
    const name = c[0]!
    const args = (src: string) => (c.length > 1 ? c.map((a) => (a === '__SRC__' ? src : a)) : [name, src])

    it(`${name}: a missing file`, async () => {
      expectOneLineError(await cli(args(missing)), `${missing}: no such file`)
    })

    it(`${name}: a bad address`, async () => {
      expectOneLineError(await cli(args('http://example.com/x.jsonl')), 'bad address "http://example.com/x.jsonl"')
      // Any file name is a log (the content decides): a missing one is named as missing.
      expectOneLineError(await cli(args(path.join(dir, 'notes.txt'))), 'notes.txt: no such file')
      expectOneLineError(await cli(args(`sqlite:${path.join(dir, 'x.db')}`)), 'bad address', 'name the session')
      expectOneLineError(await cli(args('sqlite:#id')), 'bad address "sqlite:#id"')
      expectOneLineError(await cli(args(`sqlite:${path.join(dir, 'none.db')}#s`)), 'none.db: no such file')
    })

    it(`${name}: a corrupt log`, async () => {
      expectOneLineError(await cli(args(corrupt)), corrupt, 'corrupt session log: unparsable committed event at line 4 (seq 2)')
    })

    it(`${name}: a directory`, async () => {
      const d = path.join(dir, `${name}.jsonl`)
      fs.mkdirSync(d, { recursive: true })
      expectOneLineError(await cli(args(d)), 'is a directory')
    })

    it(`${name}: a file that is not a SQLite database`, async () => {
      expectOneLineError(await cli(args(`sqlite:${EXAMPLE}#x`)), `session database at "${EXAMPLE}"`)
    })

    it(`${name}: --help`, async () => {
      const run = await cli([name, '--help'])
      expect(run.code).toBe(0)
      expect(run.stdout).toMatch(new RegExp(`^usage: dsh-session ${name} `))
    })
  }

  it('an unknown command or option, or a missing argument', async () => {
    expectUsageError(await cli(['frobnicate']), 'unknown command "frobnicate"')
    expectUsageError(await cli(['check', EXAMPLE, '--bogus']), 'unknown option --bogus for check')
    expectUsageError(await cli(['check']), 'check takes <log>')
    expectUsageError(await cli(['convert', EXAMPLE]), 'convert takes <from> <to>')
  })

  it('no command prints the usage', async () => {
    const run = await cli([])
    expect(run.code).toBe(64)
    expect(run.stderr).toMatch(/^dsh-session: no command given\nusage: dsh-session <command>/)
    const help = await cli(['--help'])
    expect(help.code).toBe(0)
    for (const c of ['inspect', 'check', 'derive', 'surface', 'repair', 'convert', 'list']) expect(help.stdout).toContain(`  ${c} `)
    const version = await cli(['--version'])
    expect(version.stdout).toBe(`${(JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }).version}\n`)
  })
})
