// SPEC 11 durability: a child process appends turn by turn and prints each
// acknowledged batch; it is killed with SIGKILL at random moments, many
// times. Every acknowledged event must then load unchanged, and the log
// must load balanced (the repair of an interrupted turn included).

import { spawn } from 'node:child_process'
import * as fs from 'node:fs'
import * as path from 'node:path'
import { describe, expect, it } from 'vitest'
import { interruptedTurnClosers, rejection, rng, STORES, tempDir, type AnyEvent } from './fixtures-crash/stores.js'

const WRITER = path.join(__dirname, 'fixtures-crash', 'writer.cjs')
const ROUNDS = 16
const ID = 'crash/../session'


/** Run the writer until a random moment, SIGKILL it, and collect what it acknowledged. */
function runAndKill(args: string[], killAfterReadyMs: number | undefined, killAfterSpawnMs: number): Promise<{ acked: AnyEvent[]; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [WRITER, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
    const acked: AnyEvent[] = []
    let stderr = ''
    let buffered = ''
    const kill = () => child.kill('SIGKILL')
    if (killAfterReadyMs === undefined) setTimeout(kill, killAfterSpawnMs)
    child.stdout.setEncoding('utf8')
    child.stdout.on('data', (chunk: string) => {
      buffered += chunk
      let newline = buffered.indexOf('\n')
      while (newline !== -1) {
        const line = buffered.slice(0, newline)
        buffered = buffered.slice(newline + 1)
        if (line.startsWith('ACK ')) acked.push(...(JSON.parse(line.slice(4)) as AnyEvent[]))
        else if (line.startsWith('READY') && killAfterReadyMs !== undefined) setTimeout(kill, killAfterReadyMs)
        newline = buffered.indexOf('\n')
      }
    })
    child.stderr.on('data', (chunk) => (stderr += chunk))
    child.on('error', reject)
    child.on('exit', (code, signal) => {
      if (signal !== 'SIGKILL') reject(new Error(`writer exited with ${code}: ${stderr}`))
      else resolve({ acked, stderr })
    })
  })
}

describe('SPEC 11 durability under SIGKILL', () => {
  for (const { kind, make } of STORES) {
    it(`${kind}: acknowledged events survive and the log loads balanced`, async () => {
      const dir = tempDir(`crash-${kind}`)
      const random = rng(kind === 'jsonl' ? 11 : 12) // the kill schedule is the same on every run
      const acked = new Map<number, AnyEvent>()
      let repaired = 0
      try {
        for (let round = 0; round < ROUNDS; round++) {
          const mode = round % 2 === 0 ? 'append' : 'flush'
          // Mostly mid-append; sometimes during start-up and the repair load.
          const early = random() < 0.2
          const run = await runAndKill(
            [kind, dir, ID, mode, String(round)],
            early ? undefined : Math.floor(random() * 60),
            Math.floor(40 + random() * 160),
          )
          // An acknowledged event never changes, whatever the kill interrupted.
          for (const e of run.acked) acked.set(e.seq, e)
          const store = make(dir)
          const loaded = await store.load(ID).catch((error: { code?: string }) => {
            if (error.code === 'SESSION_NOT_FOUND' && acked.size === 0) return undefined
            throw error
          })
          await store.close()
          if (loaded === undefined) continue
          const events = loaded.events as unknown as AnyEvent[]
          for (const [seq, e] of acked) expect(events[seq]).toEqual(e)
          expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i))
          expect(interruptedTurnClosers(loaded.events)).toEqual([])
          expect(events.at(-1)?.type).toBe('turn/end')
          repaired += events.filter((e) => e.type === 'turn/end' && (e.data as { reason: { kind: string } }).reason.kind === 'interrupted').length
          // Everything acknowledged so far is now part of the durable history.
          acked.clear()
          for (const e of events) acked.set(e.seq, e)
        }
        expect(acked.size).toBeGreaterThan(0)
        // The schedule interrupts turns; the loads closed them.
        expect(repaired).toBeGreaterThan(0)
      } finally {
        fs.rmSync(dir, { recursive: true, force: true })
      }
    })
  }

  it('a writer that never started leaves nothing to load', async () => {
    const dir = tempDir('crash-none')
    const store = STORES[0]!.make(dir)
    expect((await rejection(store.load(ID))).code).toBe('SESSION_NOT_FOUND')
    await store.close()
    fs.rmSync(dir, { recursive: true, force: true })
  })
})
