// dsh-session derive / surface, as a subprocess, over every log of the
// manifest: the output equals what the reference derives (expected/*.json).

import * as fs from 'node:fs'
import { describe, expect, it } from 'vitest'
import { cli, cliReason, expectOneLineError, logFixture, manifest, pkg, readJsonl } from './cli-helpers.js'

type Expected =
  | { ok?: true; eventCount: number; surface: { nodes: number[]; replaceGeneration: number }; replacements: unknown[]; messages: unknown[]; closers: unknown[] }
  | { ok: false; error: string }

function expected(name: string): Expected {
  return JSON.parse(fs.readFileSync(logFixture(name).expected, 'utf8')) as Expected
}

describe.concurrent('dsh-session derive', () => {
  it('covers every log of the manifest', () => {
    expect(manifest.logs.length).toBeGreaterThan(80)
  })

  for (const name of manifest.logs) {
    it(`derives ${name} as the reference does`, async () => {
      const e = expected(name)
      const run = await cli(['derive', logFixture(name).file])
      if (e.ok === false && !e.error.includes('contiguous')) {
        // A log the seed rules reject cannot be loaded: one line naming it and the reason.
        expectOneLineError(run, logFixture(name).file, cliReason(e.error))
        return
      }
      if (e.ok === false) {
        // A seq gap is a seed error but, read as a store reads it, either
        // corruption (a turn/end follows) or a torn tail the load drops.
        if (run.code === 1) {
          expectOneLineError(run, 'corrupt session log: seq gap in committed region')
        } else {
          expect(run.code).toBe(0)
          expect(run.stderr).toMatch(/^dsh-session: warning: .* needs repair \(torn tail dropped/)
          expect(JSON.parse(run.stdout)).toEqual([])
        }
        return
      }
      expect(run.code).toBe(0)
      // An interrupted log derives as stored, with a one-line note that it needs repair.
      const closers = e.closers.length
      expect(run.stderr).toMatch(closers > 0 ? /^dsh-session: warning: .* needs repair \(interrupted turn \d+ closed: [^\n]*\n$/ : /^$/)
      expect(JSON.parse(run.stdout)).toEqual(e.messages)
    })
  }

  it('--repaired derives the log as a store load returns it (with the closers)', async () => {
    const { file } = logFixture('interrupted-after-call')
    const { events } = readJsonl(file)
    const closers = pkg.interruptedTurnClosers(events as never)
    expect(closers.length).toBeGreaterThan(0)
    const repaired = new pkg.Session('x', [...events, ...closers] as never).deriveMessages()
    const run = await cli(['derive', file, '--repaired'])
    expect(run.code).toBe(0)
    expect(JSON.parse(run.stdout)).toEqual(repaired)
    expect(JSON.parse((await cli(['derive', file, '--json'])).stdout)).toEqual((expected('interrupted-after-call') as { messages: unknown[] }).messages)
  })
})

describe.concurrent('dsh-session surface', () => {
  const names = manifest.logs.filter((n) => !n.startsWith('real/') || n.includes('advanced') || n.includes('subagent-mixed'))
  for (const name of names) {
    it(`gives the surface and replacements of ${name}`, async () => {
      const e = expected(name)
      if (e.ok === false) return
      const run = await cli(['surface', logFixture(name).file, '--json'])
      expect(run.code).toBe(0)
      const out = JSON.parse(run.stdout) as { nodes: number[]; replaceGeneration: number; replacements: unknown[] }
      expect(out.nodes).toEqual(e.surface.nodes)
      expect(out.replaceGeneration).toBe(e.surface.replaceGeneration)
      expect(out.replacements).toEqual(e.replacements)
    })
  }

  it('prints the nodes and what each replacement shadowed', async () => {
    const run = await cli(['surface', logFixture('compaction-nested').file])
    expect(run.code).toBe(0)
    expect(run.stdout).toContain('8 surface nodes, 2 replacements')
    expect(run.stdout).toMatch(/seq 125 user\/message replaced 1\.\.22: 6 nodes/)
    expect(run.stdout).toMatch(/shadowed 1, 6, 8, 15, 17, 22/)
    expect(run.stdout).toMatch(/seq 187 user\/message replaced 125\.\.178: 38 nodes/)
    // One line per node.
    const nodes = run.stdout.split('\nnodes\n')[1]!.trimEnd().split('\n')
    expect(nodes).toHaveLength(1 + 8)
  })
})
