// The parent's side of holder.cjs: a writer of one session in a child
// process, driven order by order (not a test file itself).

import { type ChildProcess, spawn } from 'node:child_process'
import * as path from 'node:path'
import type { AnyEvent } from './stores.js'

const HOLDER = path.join(__dirname, 'holder.cjs')

/** What one order did: the batches acknowledged, and the error if it failed. */
export interface Answer {
  acked: AnyEvent[]
  error?: { code: string; message: string }
}

export interface Holder {
  pid: number
  /** Events the session held when the child loaded it. */
  loaded: number
  /** Every event the child acknowledged, in order. */
  acked: AnyEvent[]
  order(name: 'open-turn' | 'finish' | 'turn' | 'close'): Promise<Answer>
  /** SIGKILL the child and wait until it is gone. */
  kill(): Promise<void>
  child: ChildProcess
}

/**
 * Start a child that holds session `id` of the `kind` store in `dir`;
 * `prefix` runs it through another command (e.g. `unshare`).
 */
export function spawnHolder(kind: 'jsonl' | 'sqlite' | 'postgres' | 'pgbouncer', dir: string, id: string, prefix: string[] = []): Promise<Holder> {
  const [command, ...args] = [...prefix, process.execPath, HOLDER, kind, dir, id]
  const child = spawn(command!, args, { stdio: ['pipe', 'pipe', 'pipe'] })
  const acked: AnyEvent[] = []
  let buffered = ''
  let stderr = ''
  const waiting: ((line: string) => void)[] = []
  const queued: string[] = []
  child.stdout!.setEncoding('utf8')
  child.stdout!.on('data', (chunk: string) => {
    buffered += chunk
    let newline = buffered.indexOf('\n')
    while (newline !== -1) {
      const line = buffered.slice(0, newline)
      buffered = buffered.slice(newline + 1)
      const next = waiting.shift()
      if (next) next(line)
      else queued.push(line)
      newline = buffered.indexOf('\n')
    }
  })
  child.stderr!.on('data', (chunk) => (stderr += chunk))
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()))
  const nextLine = () =>
    new Promise<string>((resolve, reject) => {
      const line = queued.shift()
      if (line !== undefined) return resolve(line)
      waiting.push(resolve)
      exited.then(() => reject(new Error(`holder exited: ${stderr}`)))
    })
  return nextLine().then((ready) => {
    const [word, pid, loaded] = ready.split(' ')
    if (word !== 'READY') throw new Error(`holder did not start: ${ready} ${stderr}`)
    const holder: Holder = {
      pid: Number(pid),
      loaded: Number(loaded),
      acked,
      child,
      async order(name) {
        child.stdin!.write(`${name}\n`)
        const answer: Answer = { acked: [] }
        for (;;) {
          const line = await nextLine()
          if (line === 'DONE' || line === 'CLOSED') return answer
          if (line.startsWith('ACK ')) {
            const batch = JSON.parse(line.slice(4)) as AnyEvent[]
            answer.acked.push(...batch)
            acked.push(...batch)
          } else if (line.startsWith('ERROR ')) {
            const rest = line.slice(6)
            const space = rest.indexOf(' ')
            answer.error = { code: rest.slice(0, space), message: JSON.parse(rest.slice(space + 1)) as string }
          }
        }
      },
      async kill() {
        child.kill('SIGKILL')
        await exited
      },
    }
    return holder
  })
}
